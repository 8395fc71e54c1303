package workers_test

import (
	"fmt"
	"testing"

	"github.com/triagehq/triage/internal/workers"
	"github.com/triagehq/triage/triagetype"
)

// TopRunning keeps a heartbeat bounded: with more keys than StatsKeys it
// names the ones running most and sums the rest; zero counts are dropped.
func TestTopRunning(t *testing.T) {
	keys, typeKeys := map[string]int{"idle": 0}, map[string]int{}
	total := 0
	for i := range 25 {
		keys[fmt.Sprintf("k%02d", i)] = i + 1 // k24 runs 25, k00 runs 1
		typeKeys[fmt.Sprintf("t#k%02d", i)] = i + 1
		total += i + 1
	}
	r := workers.TopRunning(keys, typeKeys)
	if len(r.Keys) != triagetype.StatsKeys || len(r.TypeKeys) != triagetype.StatsKeys {
		t.Fatalf("named %d keys and %d pairs, want %d each", len(r.Keys), len(r.TypeKeys), triagetype.StatsKeys)
	}
	named := 0
	for i := 15; i < 25; i++ {
		k := fmt.Sprintf("k%02d", i)
		if r.Keys[k] != i+1 {
			t.Errorf("key %s: %d, want %d (one of the 10 running most)", k, r.Keys[k], i+1)
		}
		named += i + 1
	}
	if r.Other != total-named {
		t.Errorf("other %d, want %d", r.Other, total-named)
	}
	if _, ok := r.Keys["idle"]; ok {
		t.Error("a key running nothing is named")
	}
	small := workers.TopRunning(map[string]int{"a": 2, "b": 0}, nil)
	if len(small.Keys) != 1 || small.Keys["a"] != 2 || small.Other != 0 {
		t.Errorf("TopRunning of a small map: %+v", small)
	}
}
