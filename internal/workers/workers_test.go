package workers_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/internal/workers"
	"github.com/triagehq/triage/triagetype"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		runChild()
		return
	}
	stacktest.Main(m)
}

// clock is a settable time source shared by a registry under test.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func byID(ws []triagetype.WorkerInfo) map[string]triagetype.WorkerInfo {
	m := map[string]triagetype.WorkerInfo{}
	for _, w := range ws {
		m[w.ID] = w
	}
	return m
}

// A worker's state in a listing follows its heartbeats: active or
// draining as it last said, dead once DeadAfterBeats intervals pass
// without one, and gone once its item expired, on the real table
// through the real SDK.
func TestRegistryLifecycle(t *testing.T) {
	env := stacktest.New(t)
	ctx := ctxT(t)
	clk := &clock{now: time.Now().Add(-time.Hour).Truncate(time.Second)}
	reg := workers.New(env.DynamoDB, env.Spec.Table.Name, spec.DefaultShards, workers.WithClock(clk.Now))
	every := 10 * time.Second
	a := workers.Instance{ID: "w-a", Kind: triagetype.WorkerKindWorker, Capacity: 8, Every: every}
	b := workers.Instance{ID: "w-b", Kind: triagetype.WorkerKindLambda, Capacity: 4, Every: every}
	for _, in := range []workers.Instance{a, b} {
		if err := reg.Register(ctx, in); err != nil {
			t.Fatal(err)
		}
		clk.Add(time.Second)
	}
	type want struct {
		state triagetype.WorkerState
		busy  int
	}
	steps := []struct {
		name string
		do   func() error
		want map[string]want // absent: not listed
	}{
		{"both registered", func() error { return nil },
			map[string]want{"w-a": {triagetype.WorkerActive, 0}, "w-b": {triagetype.WorkerActive, 0}}},
		{"a heartbeats busy", func() error { return reg.Heartbeat(ctx, a, 3, triagetype.WorkerActive) },
			map[string]want{"w-a": {triagetype.WorkerActive, 3}, "w-b": {triagetype.WorkerActive, 0}}},
		{"b drains", func() error { return reg.Heartbeat(ctx, b, 1, triagetype.WorkerDraining) },
			map[string]want{"w-a": {triagetype.WorkerActive, 3}, "w-b": {triagetype.WorkerDraining, 1}}},
		{"just within 3 intervals of b's heartbeat", func() error {
			clk.Add(3 * every)
			return reg.Heartbeat(ctx, a, 2, triagetype.WorkerActive)
		}, map[string]want{"w-a": {triagetype.WorkerActive, 2}, "w-b": {triagetype.WorkerDraining, 1}}},
		{"b missed 3 heartbeats", func() error {
			clk.Add(time.Second)
			return reg.Heartbeat(ctx, a, 2, triagetype.WorkerActive)
		}, map[string]want{"w-a": {triagetype.WorkerActive, 2}, "w-b": {triagetype.WorkerDead, 1}}},
		{"b expired after the retention", func() error {
			clk.Add(workers.DeadRetention)
			return reg.Heartbeat(ctx, a, 0, triagetype.WorkerActive)
		}, map[string]want{"w-a": {triagetype.WorkerActive, 0}}},
		{"a leaves", func() error { return reg.Deregister(ctx, a.ID) }, map[string]want{}},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		ws, err := reg.List(ctx)
		if err != nil {
			t.Fatalf("%s: list: %v", st.name, err)
		}
		got := byID(ws)
		if len(got) != len(st.want) {
			t.Errorf("%s: listed %v, want %v", st.name, ws, st.want)
		}
		for id, w := range st.want {
			g, ok := got[id]
			if !ok || g.State != w.state || g.Busy != w.busy {
				t.Errorf("%s: %s = %+v, want state %s busy %d", st.name, id, g, w.state, w.busy)
			}
		}
	}
}

// A heartbeat for an instance with no item writes nothing and says so,
// so the beacon registers again rather than leave an item no listing
// can find (it would lack its index entry).
func TestHeartbeatWithoutItem(t *testing.T) {
	env := stacktest.New(t)
	ctx := ctxT(t)
	reg := workers.New(env.DynamoDB, env.Spec.Table.Name, spec.DefaultShards)
	in := workers.Instance{ID: "ghost", Kind: triagetype.WorkerKindWorker, Capacity: 1}
	if err := reg.Heartbeat(ctx, in, 0, triagetype.WorkerActive); !errors.Is(err, workers.ErrNotRegistered) {
		t.Fatalf("heartbeat of an unregistered worker: %v, want ErrNotRegistered", err)
	}
	out, err := env.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(env.Spec.Table.Name),
		Key:       map[string]types.AttributeValue{spec.AttrPK: &types.AttributeValueMemberS{Value: "WORKER#ghost"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if out.Item != nil {
		t.Fatalf("the failed heartbeat wrote %v", out.Item)
	}
}

// Workers and tasks share the by-created index under different partition
// values: listing workers reads no task, and listing tasks finds no worker.
func TestWorkersAndTasksShareNoIndexKey(t *testing.T) {
	env := stacktest.New(t)
	ctx := ctxT(t)
	a := env.App(t, nil)
	for i := range 20 {
		if err := a.Workers.Register(ctx, workers.Instance{ID: "w" + string(rune('a'+i)), Kind: triagetype.WorkerKindWorker, Capacity: 2}); err != nil {
			t.Fatal(err)
		}
	}
	var created []string
	for range 5 {
		now := a.Store.Now().UTC()
		tk, _, err := a.Store.Create(ctx, &task.Task{
			ID: task.NewID(now), Type: "echo", Priority: triagetype.High, EffectivePriority: triagetype.High,
			Status: triagetype.Queued, MaxAttempts: 3, TimeoutSeconds: 30, CreatedAt: now, WaitingSince: now,
			Version: 1, DispatchVersion: 1,
		})
		if err != nil {
			t.Fatal(err)
		}
		created = append(created, tk.ID)
	}
	ws, err := a.Workers.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 20 {
		t.Errorf("listed %d workers, want 20", len(ws))
	}
	for i := 1; i < len(ws); i++ {
		if ws[i].StartedAt.Before(ws[i-1].StartedAt) {
			t.Errorf("workers not oldest first: %v before %v", ws[i-1], ws[i])
		}
	}
	tasks, _, err := a.Store.List(ctx, store.ListFilter{}, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != len(created) {
		t.Errorf("task list has %d entries, want the %d tasks", len(tasks), len(created))
	}
}

// SummarizeWorkers counts every state and sums slots over live workers
// only: a dead worker runs nothing.
func TestSummarizeWorkers(t *testing.T) {
	w := func(st triagetype.WorkerState, capacity, busy int) triagetype.WorkerInfo {
		return triagetype.WorkerInfo{State: st, Capacity: capacity, Busy: busy}
	}
	tests := []struct {
		name string
		ws   []triagetype.WorkerInfo
		want triagetype.WorkerStats
	}{
		{"none", nil, triagetype.WorkerStats{}},
		{"active and draining", []triagetype.WorkerInfo{w(triagetype.WorkerActive, 8, 3), w(triagetype.WorkerDraining, 4, 4)},
			triagetype.WorkerStats{Active: 1, Draining: 1, Capacity: 12, Used: 7}},
		{"dead excluded from slots", []triagetype.WorkerInfo{w(triagetype.WorkerActive, 8, 1), w(triagetype.WorkerDead, 16, 16)},
			triagetype.WorkerStats{Active: 1, Dead: 1, Capacity: 8, Used: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := triagetype.SummarizeWorkers(tt.ws); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
