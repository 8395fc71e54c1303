package workers_test

import (
	"strings"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/workers"
	"github.com/triagehq/triage/triagetype"
)

// HandledTypes follows the advertising workers' lives on the real table: a
// type is live while an active worker advertises it, not while its only
// worker drains or is dead, and stays listed with its last heartbeat until
// that worker's item expires.
func TestHandledTypes(t *testing.T) {
	env := stacktest.New(t)
	ctx := ctxT(t)
	clk := &clock{now: time.Now().Add(-time.Hour).Truncate(time.Second)}
	reg := workers.New(env.DynamoDB, env.Spec.Table.Name, spec.DefaultShards, workers.WithClock(clk.Now))
	every := 10 * time.Second
	a := workers.Instance{ID: "w-a", Kind: triagetype.WorkerKindWorker, Capacity: 8, Every: every, Types: []string{"greet", "shared"}}
	b := workers.Instance{ID: "w-b", Kind: triagetype.WorkerKindDev, Capacity: 8, Every: every, Types: []string{"echo", "shared"}}
	for _, in := range []workers.Instance{a, b} {
		if err := reg.Register(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	start := clk.Now()
	// GET /workers shows what each advertised.
	listed, err := reg.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range listed {
		want := map[string][]string{"w-a": a.Types, "w-b": b.Types}[w.ID]
		if strings.Join(w.Types, ",") != strings.Join(want, ",") {
			t.Errorf("listed %s with types %v, want %v", w.ID, w.Types, want)
		}
	}
	if len(listed) != 2 {
		t.Errorf("listed %d workers, want 2", len(listed))
	}
	steps := []struct {
		name string
		do   func() error
		want map[string]workers.TypeSeen
	}{
		{"both registered", func() error { return nil }, map[string]workers.TypeSeen{
			"greet": {true, start}, "shared": {true, start}, "echo": {true, start}}},
		{"a drains", func() error { clk.Add(time.Second); return reg.Heartbeat(ctx, a, 0, triagetype.WorkerDraining) }, map[string]workers.TypeSeen{
			"greet": {false, start.Add(time.Second)}, "shared": {true, start.Add(time.Second)}, "echo": {true, start}}},
		{"b dead, a still draining", func() error {
			clk.Add(3 * every)
			return reg.Heartbeat(ctx, a, 0, triagetype.WorkerDraining)
		}, map[string]workers.TypeSeen{
			"greet": {false, start.Add(31 * time.Second)}, "shared": {false, start.Add(31 * time.Second)}, "echo": {false, start}}},
		{"b expired", func() error { clk.Add(workers.DeadRetention); return reg.Heartbeat(ctx, a, 0, triagetype.WorkerActive) }, map[string]workers.TypeSeen{
			"greet": {true, start.Add(31*time.Second + workers.DeadRetention)}, "shared": {true, start.Add(31*time.Second + workers.DeadRetention)}}},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		got, err := reg.HandledTypes(ctx)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if len(got) != len(st.want) {
			t.Errorf("%s: HandledTypes = %v, want %v", st.name, got, st.want)
		}
		for typ, w := range st.want {
			if g := got[typ]; g.Live != w.Live || !g.LastHeartbeat.Equal(w.LastHeartbeat) {
				t.Errorf("%s: %s = %+v, want %+v", st.name, typ, g, w)
			}
		}
	}
}
