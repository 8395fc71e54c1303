package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/app/consumerapp"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Snooze runs the task again later without spending an attempt; Cancel
// ends it cancelled with the handler's reason and no retry; middleware
// sees every attempt of both.
func TestSnoozeCancelAndMiddleware(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	// max_attempts 1: a snooze that spent an attempt would dead-letter it.
	snoozy := submitOne(t, a, task.Request{Type: "snoozy", Priority: "high", MaxAttempts: intp(1)})
	quitter := submitOne(t, a, task.Request{Type: "quitter", Priority: "high", MaxAttempts: intp(5)})

	var mu sync.Mutex
	seen := map[string][]int{} // task id -> attempt numbers middleware saw
	var snoozedAt []time.Time
	reg := handler.NewRegistry()
	reg.Use(func(ctx context.Context, r handler.Request, next handler.Func) (json.RawMessage, error) {
		mu.Lock()
		seen[r.ID] = append(seen[r.ID], r.Attempt)
		mu.Unlock()
		return next(ctx, r)
	})
	_ = reg.Register("snoozy", handler.Func(func(ctx context.Context, r handler.Request) (json.RawMessage, error) {
		mu.Lock()
		defer mu.Unlock()
		if len(snoozedAt) < 2 {
			snoozedAt = append(snoozedAt, time.Now())
			return nil, handler.Snooze(time.Second)
		}
		return json.RawMessage(`"awake"`), nil
	}))
	_ = reg.Register("quitter", handler.Func(func(context.Context, handler.Request) (json.RawMessage, error) {
		return nil, handler.Cancel(errors.New("the order is gone"))
	}))
	stacktest.Run(t, consumerapp.New(a, reg, stacktest.FastDispatch(), dispatch.Deps{}))

	done := stacktest.WaitStatus(t, a.Store, snoozy.ID, triagetype.Completed, 30*time.Second)
	if done.Attempts != 1 || string(done.Result) != `"awake"` || len(done.History) != 3 {
		t.Fatalf("snoozed task: attempts %d result %s history %d; want 1, awake, 3 entries", done.Attempts, done.Result, len(done.History))
	}
	if done.History[0].Error != "snoozed for 1s" {
		t.Fatalf("history[0].Error = %q", done.History[0].Error)
	}
	var outcomes []string
	for _, a := range done.History {
		outcomes = append(outcomes, a.Outcome)
	}
	if want := []string{triagetype.AttemptSnoozed, triagetype.AttemptSnoozed, triagetype.AttemptCompleted}; !slices.Equal(outcomes, want) {
		t.Fatalf("attempt outcomes %v, want %v", outcomes, want)
	}
	cancelled := stacktest.WaitStatus(t, a.Store, quitter.ID, triagetype.Cancelled, 30*time.Second)
	if cancelled.Attempts != 1 || cancelled.Error == nil || cancelled.Error.Message != "the order is gone" || cancelled.Error.Retriable {
		t.Fatalf("cancelled task: attempts %d error %+v", cancelled.Attempts, cancelled.Error)
	}
	time.Sleep(1500 * time.Millisecond) // a retry of the cancelled task would have started
	mu.Lock()
	defer mu.Unlock()
	if got := seen[snoozy.ID]; len(got) != 3 || got[0] != 1 || got[2] != 1 {
		t.Fatalf("middleware saw snoozy's attempts %v, want [1 1 1]", got)
	}
	if got := seen[quitter.ID]; len(got) != 1 {
		t.Fatalf("middleware saw the cancelled task %d times, want once", len(got))
	}
	if gap := snoozedAt[1].Sub(snoozedAt[0]); gap < 900*time.Millisecond {
		t.Fatalf("the snooze of 1 s came back after %v", gap)
	}
}
