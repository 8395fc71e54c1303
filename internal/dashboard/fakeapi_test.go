package dashboard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/triagehq/triage/triagetype"
)

// fakeAPI is a hand-written stand-in for the /api/v1 routes the dashboard
// calls, with the shapes of the API spec (a field error's message starts with
// the field's name, as internal/api writes it). It checks the bearer token and
// records what the page sent.
type fakeAPI struct {
	token string

	mu         sync.Mutex
	tasks      []*fakeTask // newest first
	submits    []fakeSubmit
	cancels    []string
	listLimits []string
	badTokens  int
	seq        int
	// eventStreams counts GET /api/v1/events requests with the right token.
	eventStreams int
}

type fakeTask struct {
	ID                string          `json:"id"`
	Type              string          `json:"type"`
	Payload           json.RawMessage `json:"payload,omitempty"`
	Priority          string          `json:"priority"`
	EffectivePriority string          `json:"effective_priority"`
	Status            string          `json:"status"`
	Attempts          int             `json:"attempts"`
	MaxAttempts       int             `json:"max_attempts"`
	TimeoutSeconds    int             `json:"timeout_seconds"`
	CreatedAt         time.Time       `json:"created_at"`
	TraceID           string          `json:"trace_id"`
	Error             *fakeTaskError  `json:"error,omitempty"`
}

type fakeTaskError struct {
	Message   string `json:"message"`
	Retriable bool   `json:"retriable"`
}

type fakeSubmit struct {
	Type        string          `json:"type"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	Priority    string          `json:"priority,omitempty"`
	MaxAttempts *int            `json:"max_attempts,omitempty"`
}

func newFakeAPI(token string) *fakeAPI {
	now := time.Now().UTC()
	return &fakeAPI{
		token: token,
		tasks: []*fakeTask{
			{ID: "01JTESTTASK0000000000000AA", Type: "echo", Payload: json.RawMessage(`{"x":1}`), Priority: "high", EffectivePriority: "high",
				Status: "queued", MaxAttempts: 3, TimeoutSeconds: 300, CreatedAt: now.Add(-30 * time.Second), TraceID: "trace-a"},
			{ID: "01JTESTTASK0000000000000BB", Type: "sleep", Payload: json.RawMessage(`{"ms":500}`), Priority: "low", EffectivePriority: "medium",
				Status: "executing", Attempts: 1, MaxAttempts: 5, TimeoutSeconds: 300, CreatedAt: now.Add(-11 * time.Minute), TraceID: "trace-b"},
			{ID: "01JTESTTASK0000000000000CC", Type: "fail", Payload: json.RawMessage(`{"times":9}`), Priority: "medium", EffectivePriority: "medium",
				Status: "dead_letter", Attempts: 3, MaxAttempts: 3, TimeoutSeconds: 300, CreatedAt: now.Add(-2 * time.Hour), TraceID: "trace-c",
				Error: &fakeTaskError{Message: "boom", Retriable: true}},
		},
	}
}

// routes mounts the dashboard as the API server does, and the fake API.
func (f *fakeAPI) routes(dash http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	for _, p := range Routes() {
		mux.Handle(p, dash)
	}
	api := http.NewServeMux()
	api.HandleFunc("GET /api/v1/stats", f.stats)
	api.HandleFunc("GET /api/v1/tasks", f.list)
	api.HandleFunc("POST /api/v1/tasks", f.submit)
	api.HandleFunc("GET /api/v1/tasks/{id}", f.get)
	api.HandleFunc("POST /api/v1/tasks/{id}/cancel", f.cancel)
	api.HandleFunc("GET /api/v1/events", f.events)
	api.HandleFunc("GET /api/v1/control", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"controls": []map[string]any{{"paused": false}}})
	})
	api.HandleFunc("POST /api/v1/control/pause", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusForbidden, triagetype.CodeForbidden, "the token lacks the admin scope", "")
	})
	mux.Handle("/api/v1/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+f.token {
			f.mu.Lock()
			f.badTokens++
			f.mu.Unlock()
			writeError(w, http.StatusUnauthorized, triagetype.CodeUnauthorized, "missing or invalid bearer token", "")
			return
		}
		api.ServeHTTP(w, r)
	}))
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, message, field string) {
	e := map[string]string{"code": code, "message": message}
	if field != "" {
		e["field"] = field
	}
	writeJSON(w, status, map[string]any{"error": e})
}

func (f *fakeAPI) stats(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"queues": map[string]any{
			"high": map[string]any{"depth": 7, "in_flight": 2, "delayed": 1, "dlq_depth": 0, "oldest_age_seconds": 12.5,
				"waits": 40, "wait_p50_seconds": 0.016, "wait_p99_seconds": 2.048},
			"medium": map[string]any{"depth": 3, "in_flight": 0, "delayed": 0, "dlq_depth": 0, "oldest_age_seconds": 0},
			"low":    map[string]any{"depth": 11, "in_flight": 1, "delayed": 5, "dlq_depth": 4, "oldest_age_seconds": 754},
		},
		"statuses":     map[string]int{"scheduled": 1, "queued": 21, "executing": 3, "retrying": 2, "completed": 130, "cancelled": 6, "dead_letter": 4},
		"types":        map[string]any{"echo": map[string]int{"queued": 21}},
		"throughput":   map[string]int{"completed_last_minute": 42, "failed_last_minute": 5},
		"generated_at": time.Now().UTC().Format(time.RFC3339),
	})
}

func (f *fakeAPI) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listLimits = append(f.listLimits, q.Get("limit"))
	out := []*fakeTask{}
	for _, t := range f.tasks {
		if (q.Get("status") == "" || q.Get("status") == t.Status) &&
			(q.Get("priority") == "" || q.Get("priority") == t.EffectivePriority) &&
			(q.Get("type") == "" || q.Get("type") == t.Type) {
			out = append(out, t)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"tasks": out})
}

func (f *fakeAPI) submit(w http.ResponseWriter, r *http.Request) {
	var s fakeSubmit
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		writeError(w, http.StatusBadRequest, triagetype.CodeInvalidJSON, "the body is not a valid task: "+err.Error(), "")
		return
	}
	switch {
	case s.Type == "":
		writeError(w, http.StatusBadRequest, triagetype.CodeInvalidField, "type: is required", "type")
		return
	case s.MaxAttempts != nil && (*s.MaxAttempts < 1 || *s.MaxAttempts > 100):
		writeError(w, http.StatusBadRequest, triagetype.CodeInvalidField, "max_attempts: must be between 1 and 100", "max_attempts")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	t := &fakeTask{
		ID: "01JTESTNEW" + strconv.Itoa(1000000+f.seq) + "0000000000", Type: s.Type, Payload: s.Payload,
		Priority: s.Priority, EffectivePriority: s.Priority, Status: "queued", MaxAttempts: 3,
		TimeoutSeconds: 300, CreatedAt: time.Now().UTC(), TraceID: "trace-new",
	}
	if s.MaxAttempts != nil {
		t.MaxAttempts = *s.MaxAttempts
	}
	f.submits = append(f.submits, s)
	f.tasks = append([]*fakeTask{t}, f.tasks...)
	writeJSON(w, http.StatusCreated, t)
}

func (f *fakeAPI) find(id string) *fakeTask {
	for _, t := range f.tasks {
		if t.ID == id {
			return t
		}
	}
	return nil
}

func (f *fakeAPI) get(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.find(r.PathValue("id"))
	if t == nil {
		writeError(w, http.StatusNotFound, triagetype.CodeNotFound, "no such task", "")
		return
	}
	writeJSON(w, http.StatusOK, t)
}

func (f *fakeAPI) cancel(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := r.PathValue("id")
	f.cancels = append(f.cancels, id)
	t := f.find(id)
	switch {
	case t == nil:
		writeError(w, http.StatusNotFound, triagetype.CodeNotFound, "no such task", "")
	case t.Status == "completed" || t.Status == "cancelled" || t.Status == "dead_letter":
		writeError(w, http.StatusConflict, triagetype.CodeConflict, "the task is "+t.Status, "")
	default:
		t.Status = "cancelled"
		writeJSON(w, http.StatusOK, t)
	}
}

// snapshot returns copies of what the page sent.
func (f *fakeAPI) snapshot() (submits []fakeSubmit, cancels, limits []string, badTokens int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeSubmit(nil), f.submits...), append([]string(nil), f.cancels...),
		append([]string(nil), f.listLimits...), f.badTokens
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// lockedBuffer collects Chromium's output from its own goroutine.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// events streams one lifecycle event, then keeps the stream open (as the
// API's SSE endpoint does) until the page goes or 40 s pass.
func (f *fakeAPI) events(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.eventStreams++
	f.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": triage events\n\nid: 01JTESTTASK0000000000000AA-2\nevent: task.started\ndata: {\"type\":\"task.started\",\"task_id\":\"01JTESTTASK0000000000000AA\"}\n\n")
	w.(http.Flusher).Flush()
	select {
	case <-r.Context().Done():
	case <-time.After(40 * time.Second):
	}
}
