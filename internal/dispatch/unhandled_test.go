package dispatch_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/app/consumerapp"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/internal/workers"
	"github.com/triagehq/triage/triagetype"
)

// A consumer without a handler for a task's type (`triage dev`'s, beside a
// developer's own worker) never spends the task's attempts on it: while a
// live worker advertises the type, or for UnhandledAfter since the task was
// queued, it hands the message back, and the task stays queued with no
// attempt counted; once no live worker has advertised the type for
// UnhandledAfter, it dead-letters the task and says why. On the emulators,
// through the real registry.
func TestUnhandledTypeWaitsForItsWorker(t *testing.T) {
	t.Parallel() // its own stack; waits, not timing, make it slow
	tests := []struct {
		name           string
		advertised     bool          // a live worker advertises "greet" (registered, not yet polling)
		unhandledAfter time.Duration // the "dev" consumer's
		wantDead       bool          // dead-lettered by the "dev" consumer
	}{
		{name: "a live worker advertises the type: handed back", advertised: true, unhandledAfter: time.Second},
		{name: "no worker yet, within UnhandledAfter: handed back", unhandledAfter: time.Minute},
		{name: "no worker for UnhandledAfter: dead-lettered with the reason", unhandledAfter: 2 * time.Second, wantDead: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := stacktest.New(t)
			a := env.App(t, nil)
			ctx := context.Background()
			if tt.advertised {
				// The worker's registry item, as its consumer writes it when
				// Run starts, before its first receive.
				in := workers.Instance{ID: "user-worker", Kind: triagetype.WorkerKindWorker, Capacity: 1, Types: []string{"greet"}}
				if err := a.Workers.Register(ctx, in); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = a.Workers.Deregister(context.WithoutCancel(ctx), in.ID) })
			}
			ids := submit(t, a, "greet", triagetype.High, 5, `{}`)

			echo := handler.Func(func(_ context.Context, r handler.Request) (json.RawMessage, error) { return r.Payload, nil })
			opt := stacktest.FastDispatch()
			opt.UnhandledAfter = tt.unhandledAfter
			stopDev := stacktest.Run(t, consumerapp.New(a, stacktest.Registry("echo", echo), opt, dispatch.Deps{Kind: triagetype.WorkerKindDev}))
			if tt.wantDead {
				for _, id := range ids {
					got := stacktest.WaitStatus(t, a.Store, id, triagetype.DeadLetter, 30*time.Second)
					if got.Error == nil || !strings.Contains(got.Error.Message, `no handler registered for task type: "greet"; no live worker has advertised the type for 2s`) {
						t.Errorf("task %s dead-lettered with %+v, want the reason", id, got.Error)
					}
				}
				return
			}
			// Long enough for every message to be received and handed back
			// at least once (each is hidden 2-5 s at a time).
			time.Sleep(6 * time.Second)
			for _, id := range ids {
				if got := storedTask(t, a, id); got.Status != triagetype.Queued || got.Attempts != 0 {
					t.Errorf("task %s beside a consumer without its handler: %s, %d attempts; want queued, none", id, got.Status, got.Attempts)
				}
			}
			// The worker that runs the type takes them, each on its first attempt.
			greet := handler.Func(func(context.Context, handler.Request) (json.RawMessage, error) { return json.RawMessage(`"hi"`), nil })
			wopt := stacktest.FastDispatch()
			stacktest.Run(t, consumerapp.New(a, stacktest.Registry("greet", greet), wopt, dispatch.Deps{WorkerID: "user-worker"}))
			// Each message is a race between the two consumers each time it
			// shows again; the claim is that the user's worker wins it in the
			// end, each task on its first attempt, not how soon: the wait is
			// only a cap for a broken run.
			for _, id := range ids {
				got := stacktest.WaitStatus(t, a.Store, id, triagetype.Completed, 2*time.Minute)
				if got.Attempts != 1 || len(got.History) != 1 || got.History[0].WorkerID != "user-worker" {
					t.Errorf("task %s completed on attempt %d, history %+v; want one attempt, by the user's worker", id, got.Attempts, got.History)
				}
			}
			stopDev()
		})
	}
}

// storedTask reads task id from the table.
func storedTask(t *testing.T, a *app.App, id string) *task.Task {
	t.Helper()
	got, err := a.Store.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// The dispatch package's directory is the registry.
var _ dispatch.TypeDirectory = (*workers.Registry)(nil)
