package waiting_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/app/consumerapp"
	"github.com/triagehq/triage/internal/control"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/triagetype"
)

// TestRetryAfterHoldsTheKey: a handler's Retry-After for its key holds
// every task of that key until then, tasks submitted after it included,
// spends no attempt, and leaves other keys running.
func TestRetryAfterHoldsTheKey(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	ctx := context.Background()
	var asked atomic.Bool
	var until atomic.Int64
	h := handler.Func(func(ctx context.Context, r handler.Request) (json.RawMessage, error) {
		if r.Key == "partner" && asked.CompareAndSwap(false, true) {
			u := time.Now().Add(5 * time.Second)
			until.Store(u.UnixNano())
			return nil, handler.RetryAfter(u, handler.ScopeKey)
		}
		return nil, nil
	})
	stacktest.Run(t, consumerapp.New(a, stacktest.Registry("call", h), stacktest.FastDispatch(), dispatch.Deps{}))
	asker := submitKeyed(t, a, "call", "partner", 1)[0]
	waitFor(t, "the Retry-After", time.Minute, func() bool {
		s, err := a.Controls.GetScope(ctx, control.KeyScope("partner"))
		return err == nil && s.WaitUntil != nil
	})
	held := stacktest.WaitStatus(t, a.Store, asker, triagetype.Queued, time.Minute)
	if held.Held != "key#partner" || held.Attempts != 0 {
		t.Fatalf("asker after its Retry-After: held %q, attempts %d; want held in key#partner with no attempt spent", held.Held, held.Attempts)
	}
	later := submitKeyed(t, a, "call", "partner", 5)
	others := submitKeyed(t, a, "call", "other", 5)
	for _, id := range append(append([]string{asker}, later...), others...) {
		stacktest.WaitStatus(t, a.Store, id, triagetype.Completed, 2*time.Minute)
	}
	u := time.Unix(0, until.Load())
	for _, id := range append([]string{asker}, later...) {
		tk, err := a.Store.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if tk.StartedAt.Before(u) {
			t.Errorf("partner task %s started at %v, before the Retry-After's end %v", id, tk.StartedAt, u)
		}
		if id == asker && (tk.Attempts != 1 || len(tk.History) != 2 || !strings.HasPrefix(tk.History[0].Error, "retry after")) {
			t.Errorf("asker: attempts %d, history %+v; want 1 attempt counted and the Retry-After in its history", tk.Attempts, tk.History)
		}
	}
	early := 0
	for _, id := range others {
		if tk, _ := a.Store.Get(ctx, id); tk.StartedAt.Before(u) {
			early++
		}
	}
	t.Logf("other key: %d of 5 started during partner's 5 s wait", early)
}
