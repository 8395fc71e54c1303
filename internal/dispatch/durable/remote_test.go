package durable_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/durable"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/handler/webhook"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triageconfig"
	"github.com/triagehq/triage/triagetype"
	"github.com/triagehq/triage/worker"
)

// A webhook handler uses steps and a sleep through the protocol: it
// records two steps (one per request, each side effect run once), sleeps
// 2 s holding nothing, then finishes with the steps' results replayed
// from the request.
func TestWebhookStepsAndSleep(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	secret := []byte("durable-webhook-secret")
	var mu sync.Mutex
	effects := map[string]int{}
	var calls []time.Time
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		if err := webhook.Verify(secret, r.Header.Get(webhook.HeaderTimestamp), body, r.Header.Get(webhook.HeaderSignature), time.Now(), 0); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		var req struct {
			ID string `json:"id"`
			durable.Records
		}
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, time.Now())
		done := map[string]durable.RemoteStep{}
		for _, st := range req.Steps {
			done[st.Name] = st
		}
		reply := func(v any) { _ = json.NewEncoder(w).Encode(v) }
		for i, name := range []string{"charge", "reserve"} {
			if _, ok := done[name]; !ok {
				effects[name]++ // the side effect: runs once per task
				reply(map[string]any{durable.ResponseField: map[string]any{"steps": []any{map[string]any{"name": name, "result": (i + 1) * 100}}}})
				return
			}
		}
		if _, ok := done["nap"]; !ok {
			reply(map[string]any{durable.ResponseField: map[string]any{"sleep": map[string]any{"name": "nap", "seconds": 2}}})
			return
		}
		reply(map[string]any{"charge": done["charge"].Result, "reserve": done["reserve"].Result})
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)

	w := newWorker(t, env, map[string]string{
		triageconfig.EnvRoutes:        "hook=" + srv.URL + "/run",
		triageconfig.EnvWebhookSecret: string(secret),
	})
	start(t, w)
	tk := submit(t, a, "hook", map[string]string{"order": "o-1"})
	asleep := waitFor(t, a, tk.ID, 20*time.Second, "sleeping", func(tk *task.Task) bool { return tk.Suspend != nil })
	if asleep.Status != triagetype.Retrying || asleep.Attempts != 0 || len(asleep.Steps) != 3 {
		t.Fatalf("asleep: status %s attempts %d steps %+v; want retrying, no attempt spent, 3 records", asleep.Status, asleep.Attempts, asleep.Steps)
	}
	done := stacktest.WaitStatus(t, a.Store, tk.ID, triagetype.Completed, 30*time.Second)
	if string(done.Result) != `{"charge":100,"reserve":200}` {
		t.Fatalf("result %s", done.Result)
	}
	mu.Lock()
	defer mu.Unlock()
	if effects["charge"] != 1 || effects["reserve"] != 1 {
		t.Fatalf("side effects %v; want each once", effects)
	}
	// Two steps and the sleep in the first attempt's three requests, the
	// finish in the resumed attempt's one, at least 2 s later.
	if len(calls) != 4 || calls[3].Sub(calls[2]) < 1900*time.Millisecond {
		t.Fatalf("calls at %v; want 4, the last 2 s after the third", calls)
	}
	if done.Attempts != 1 || len(done.Steps) != 3 || done.Steps[2].Outcome() != "slept" {
		t.Fatalf("attempts %d steps %+v", done.Attempts, done.Steps)
	}
}

// A webhook handler submits a child task through the protocol (a child
// directive) and gets its outcome as the record "child:<name>".
func TestWebhookChild(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	secret := []byte("durable-webhook-secret")
	var mu sync.Mutex
	calls := 0
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req durable.Records
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		mu.Lock()
		calls++
		mu.Unlock()
		for _, st := range req.Steps {
			if st.Name == durable.ChildSignal("sq") {
				var o durable.ChildOutcome
				if err := json.Unmarshal(st.Result, &o); err != nil {
					http.Error(w, err.Error(), 400)
					return
				}
				_ = json.NewEncoder(w).Encode(map[string]any{"child": o.ID, "status": o.Status, "square": o.Result})
				return
			}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{durable.ResponseField: map[string]any{
			"child": map[string]any{"name": "sq", "request": map[string]any{"type": "square", "payload": map[string]int{"n": 4}, "priority": "high"}}}})
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	w := newWorker(t, env, map[string]string{
		triageconfig.EnvRoutes:        "hook=" + srv.URL,
		triageconfig.EnvWebhookSecret: string(secret),
	})
	var squares atomic.Int32
	must(t, w.Handle("square", func(ctx context.Context, tk *worker.Task) (any, error) {
		var in struct{ N int }
		if err := tk.Decode(&in); err != nil {
			return nil, worker.Permanent(err)
		}
		squares.Add(1)
		return in.N * in.N, nil
	}))
	start(t, w)
	p := submit(t, a, "hook", nil)
	done := stacktest.WaitStatus(t, a.Store, p.ID, triagetype.Completed, 40*time.Second)
	child, err := a.Store.ByIdempotencyKey(context.Background(), durable.ChildKey(p.ID, "sq"))
	must(t, err)
	want := `{"child":"` + child.ID + `","square":16,"status":"completed"}`
	if string(done.Result) != want || squares.Load() != 1 || done.Attempts != 1 {
		t.Fatalf("result %s, squares %d, attempts %d; want %s, 1, 1", done.Result, squares.Load(), done.Attempts, want)
	}
}
