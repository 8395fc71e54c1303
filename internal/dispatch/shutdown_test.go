package dispatch_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/app/consumerapp"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/task"
)

// A consumer told to stop while it long-polls lets the poll finish and
// makes what it brought visible again at once, instead of cutting the
// request (which could lose the answer and hide its messages for the whole
// visibility timeout, 7 s with these options): the next consumer runs the task at once.
func TestStopMidPollReleasesWhatItReceived(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	ran := make(chan string, 1)
	reg := stacktest.Registry("late", handler.Func(func(ctx context.Context, r handler.Request) (json.RawMessage, error) {
		ran <- r.ID
		return nil, nil
	}))
	opt := stacktest.FastDispatch()
	opt.PollWait = 4 * time.Second // a long poll in flight when the stop comes
	first := consumerapp.New(a, stacktest.Registry("late", handler.Func(func(context.Context, handler.Request) (json.RawMessage, error) {
		t.Error("the stopping consumer ran a task")
		return nil, nil
	})), opt, dispatch.Deps{})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- first.Run(ctx) }()
	time.Sleep(1500 * time.Millisecond) // the idle consumer is long-polling now
	cancel()
	tk := submitOne(t, a, task.Request{Type: "late", Priority: "high"}) // lands in the poll
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	stacktest.Run(t, consumerapp.New(a, reg, stacktest.FastDispatch(), dispatch.Deps{}))
	select {
	case id := <-ran:
		if id != tk.ID {
			t.Fatalf("ran %s, want %s", id, tk.ID)
		}
		took := time.Since(sent)
		t.Logf("the next consumer ran it %v after the first stopped", took.Round(time.Millisecond))
		// Hidden, it would come back only after the visibility timeout:
		// lease 5 s + 2 × 1 s margin here (measured 7.1 s before the fix).
		if took > 4*time.Second {
			t.Fatalf("the task came back %v after the stop: it was hidden, not released", took)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the task stayed hidden after the consumer that received it stopped")
	}
}
