package stats_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/triagehq/triage/internal/stats"
	"github.com/triagehq/triage/triagetype"
)

// fakeKeyed is a registry of keyed scopes; it counts the per-scope reads.
type fakeKeyed struct {
	scopes []triagetype.ControlSettings
	reads  int
}

func (f *fakeKeyed) KeyedScopes(context.Context) ([]triagetype.ControlSettings, error) {
	return f.scopes, nil
}

func (f *fakeKeyed) KeyedUse(_ context.Context, typ, key string) (triagetype.ControlSettings, *triagetype.RateUse, error) {
	f.reads++
	return triagetype.ControlSettings{Type: typ, Key: key, MaxConcurrency: 3}, nil, nil
}

// CollectKeys sums the live workers' heartbeats, names at most StatsKeys
// keys and keyed scopes (the ones running most), sums the rest, skips dead
// workers, and reads the controls of the shown scopes only.
func TestCollectKeysIsBounded(t *testing.T) {
	w1 := triagetype.WorkerInfo{State: triagetype.WorkerActive, Keys: map[string]int{}, TypeKeys: map[string]int{}, KeysOther: 7}
	w2 := triagetype.WorkerInfo{State: triagetype.WorkerDraining, Keys: map[string]int{"k00": 100}, TypeKeys: map[string]int{"mail#k01": 4}}
	dead := triagetype.WorkerInfo{State: triagetype.WorkerDead, Keys: map[string]int{"k00": 1000}}
	k := &fakeKeyed{}
	total := 7 + 100
	for i := range 20 {
		key := fmt.Sprintf("k%02d", i)
		w1.Keys[key] = i + 1
		total += i + 1
		k.scopes = append(k.scopes, triagetype.ControlSettings{Key: key})
	}
	k.scopes = append(k.scopes, triagetype.ControlSettings{Type: "mail", Key: "k01"})
	ks, err := stats.CollectKeys(context.Background(), []triagetype.WorkerInfo{w1, w2, dead}, k)
	if err != nil {
		t.Fatal(err)
	}
	if len(ks.Top) != triagetype.StatsKeys || ks.Top[0] != (triagetype.KeyRunning{Key: "k00", Running: 101}) || ks.Top[1].Key != "k19" {
		t.Fatalf("top: %+v", ks.Top)
	}
	sum := ks.OtherRunning
	for _, r := range ks.Top {
		sum += r.Running
	}
	if sum != total {
		t.Errorf("top + other = %d running, want %d (every live task once, the dead worker's none)", sum, total)
	}
	if len(ks.Limits) != triagetype.StatsKeys || k.reads != triagetype.StatsKeys {
		t.Fatalf("%d limits shown, %d scopes read; want %d of each", len(ks.Limits), k.reads, triagetype.StatsKeys)
	}
	if l := ks.Limits[0]; l.Controls.Key != "k00" || l.Running != 101 || l.Controls.MaxConcurrency != 3 {
		t.Errorf("first limit: %+v", l)
	}
	if ks.OtherLimits != 21-triagetype.StatsKeys {
		t.Errorf("other limits %d, want %d", ks.OtherLimits, 21-triagetype.StatsKeys)
	}
	// Not shown: k01..k10 (running 2..11) and (mail, k01) running 4.
	if want := 65 + 4; ks.OtherLimitsRunning != want {
		t.Errorf("other limits running %d, want %d", ks.OtherLimitsRunning, want)
	}
}
