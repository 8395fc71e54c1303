package worker_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/app/promoterapp"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/promote"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triageconfig"
	"github.com/triagehq/triage/triagetype"
	"github.com/triagehq/triage/worker"
)

// TestHandlersSeePromotion: two low tasks wait until the promoter (with
// thresholds of a second) has moved them to medium and then to high; the
// worker's Go handler and its webhook route, run by the real consumer,
// then see both priorities: the one submitted (low) and the one they run
// at (high).
func TestHandlersSeePromotion(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	var mu sync.Mutex
	seen := map[string][2]string{} // task type -> {priority, effective}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Priority          string `json:"priority"`
			EffectivePriority string `json:"effective_priority"`
		}
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &body); err != nil {
			t.Errorf("webhook body %s: %v", b, err)
		}
		mu.Lock()
		seen["hook"] = [2]string{body.Priority, body.EffectivePriority}
		mu.Unlock()
		_, _ = io.WriteString(w, "{}")
	}))
	defer hook.Close()

	var ids []string
	for _, typ := range []string{"go", "hook"} {
		r := task.Request{Type: typ, Priority: "low"}
		tk, _, err := a.Enqueuer.Submit(context.Background(), r.NewTask(a.Store.Now(), 0))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, tk.ID)
	}
	p := promoterapp.New(a, promote.Options{LowAfter: time.Second, MediumAfter: time.Second})
	for _, to := range []triagetype.Priority{triagetype.Medium, triagetype.High} {
		time.Sleep(1100 * time.Millisecond)
		rep, err := p.RunOnce(context.Background())
		if err != nil || rep.Promoted[to] != 2 {
			t.Fatalf("promotion to %s: %+v, %v", to, rep, err)
		}
	}

	cfg, err := triageconfig.Decode(env.Getenv(map[string]string{
		"TRIAGE_ROUTES": "hook=" + hook.URL, "TRIAGE_WEBHOOK_SECRET": "s",
	}))
	if err != nil {
		t.Fatal(err)
	}
	w := worker.New(worker.Options{Config: &cfg, Logger: quiet})
	if err := w.Handle("go", func(_ context.Context, tk *worker.Task) (any, error) {
		mu.Lock()
		seen["go"] = [2]string{string(tk.Priority), string(tk.EffectivePriority)}
		mu.Unlock()
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	for _, id := range ids {
		if tk := stacktest.WaitStatus(t, a.Store, id, triagetype.Completed, 30*time.Second); tk.Priority != triagetype.Low || tk.EffectivePriority != triagetype.High {
			t.Fatalf("task %s ran as %s/%s, want submitted low, promoted to high", id, tk.Priority, tk.EffectivePriority)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, typ := range []string{"go", "hook"} {
		if got := seen[typ]; got != [2]string{"low", "high"} {
			t.Errorf("%s handler saw priority %q, effective %q; want low, high", typ, got[0], got[1])
		}
	}
}
