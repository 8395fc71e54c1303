package dispatch_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/app/consumerapp"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/metrics"
	"github.com/triagehq/triage/internal/workers"
	"github.com/triagehq/triage/triagetype"
)

// handBacks counts the no_handler put-offs a consumer reports.
type handBacks struct{ n atomic.Int64 }

func (h *handBacks) Add(id metrics.ID, values []string, _ float64) {
	if id == metrics.PutOffs && len(values) == 1 && values[0] == string(metrics.PutOffNoHandler) {
		h.n.Add(1)
	}
}
func (*handBacks) Set(metrics.ID, []string, float64)     {}
func (*handBacks) Observe(metrics.ID, []string, float64) {}

// A busy `triage dev` consumer without a handler (running its own tasks)
// beside an idle worker that runs the type does not keep winning the race
// for the messages it hands back: once a message it handed back comes back
// to it, it steps aside from that queue as the message shows again, so the
// worker that can run it receives it. Counted, not timed: after the worker
// starts, the busy consumer hands the worker's tasks back at most half as
// many times as there are tasks (measured: 3 for 10, all done 7 s after
// the worker started; without the step aside, 9 for 10 and 25 s), and each
// completes on its first attempt, by the worker.
func TestHandBacksStepAsideForTheWorker(t *testing.T) {
	t.Parallel() // its own stack; waits, not timing, make it slow
	env := stacktest.New(t)
	a := env.App(t, nil)
	ctx := context.Background()
	const tasks = 10
	greets := submit(t, a, "greet", triagetype.High, tasks, `{}`)
	// The busy consumer's own work, for the whole test: it receives all the
	// time, and polls the high queue whenever its weights pick it.
	own := submit(t, a, "echo", triagetype.Medium, 400, `{}`)

	in := workers.Instance{ID: "user-worker", Kind: triagetype.WorkerKindWorker, Capacity: 1, Types: []string{"greet"}}
	if err := a.Workers.Register(ctx, in); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Workers.Deregister(context.WithoutCancel(ctx), in.ID) })

	counted := &handBacks{}
	echo := handler.Func(func(ctx context.Context, r handler.Request) (json.RawMessage, error) {
		time.Sleep(50 * time.Millisecond)
		return r.Payload, nil
	})
	opt := stacktest.FastDispatch()
	opt.Concurrency, opt.ReservedHigh = 4, 0
	stopDev := stacktest.Run(t, consumerapp.New(a, stacktest.Registry("echo", echo), opt, dispatch.Deps{Kind: triagetype.WorkerKindDev, Metrics: metrics.New(counted)}))
	defer stopDev()
	// Every greet message handed back at least once before the worker polls.
	deadline := time.Now().Add(time.Minute)
	for counted.n.Load() < tasks && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	before := counted.n.Load()

	var mu sync.Mutex
	ran := map[string]int{}
	greet := handler.Func(func(_ context.Context, r handler.Request) (json.RawMessage, error) {
		mu.Lock()
		ran[r.ID]++
		mu.Unlock()
		return json.RawMessage(`"hi"`), nil
	})
	wopt := stacktest.FastDispatch()
	wopt.Concurrency, wopt.ReservedHigh = 1, 0
	started := time.Now()
	stopWorker := stacktest.Run(t, consumerapp.New(a, stacktest.Registry("greet", greet), wopt, dispatch.Deps{WorkerID: "user-worker"}))
	defer stopWorker()
	for _, id := range greets {
		got := stacktest.WaitStatus(t, a.Store, id, triagetype.Completed, 3*time.Minute)
		if got.Attempts != 1 || len(got.History) != 1 || got.History[0].WorkerID != "user-worker" {
			t.Errorf("task %s: attempt %d, history %+v; want one attempt, by the user's worker", id, got.Attempts, got.History)
		}
	}
	after := counted.n.Load() - before
	took := time.Since(started)
	done := 0
	for _, id := range own {
		if storedTask(t, a, id).Status == triagetype.Completed {
			done++
		}
	}
	t.Logf("hand-backs: %d before the worker started, %d after, for %d tasks, all done %s after it started (the busy consumer's own tasks done meanwhile: %d of %d)",
		before, after, tasks, took.Round(time.Second), done, len(own))
	if after > tasks/2 {
		t.Errorf("the busy consumer handed the worker's tasks back %d times after the worker started; want at most %d", after, tasks/2)
	}
}
