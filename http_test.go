package triage_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/triagetype"
)

// The HTTP transport's requests and answers against a recording server;
// the tests of package direct run it against the real API.

type recorded struct {
	Method, Path, Query, Body string
	Header                    http.Header
}

type recorder struct {
	mu      sync.Mutex
	reqs    []recorded
	status  int
	body    string
	headers map[string]string
}

func (f *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, recorded{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, string(b), r.Header.Clone()})
	f.mu.Unlock()
	for k, v := range f.headers {
		w.Header().Set(k, v)
	}
	w.WriteHeader(f.status)
	_, _ = io.WriteString(w, f.body)
}

func (f *recorder) last(t *testing.T) recorded {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reqs) == 0 {
		t.Fatal("no request was sent")
	}
	return f.reqs[len(f.reqs)-1]
}

func serve(t *testing.T, status int, body string, opts ...triage.HTTPOption) (*recorder, *triage.Client) {
	t.Helper()
	f := &recorder{status: status, body: body}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, triage.NewClient(triage.HTTP(srv.URL+"/", "tok", opts...))
}

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

const taskJSON = `{"id":"01J0000000000000000000000A","type":"echo","payload":{"x":1},"priority":"high","effective_priority":"high","status":"queued","attempts":0,"max_attempts":3,"timeout_seconds":300,"created_at":"2026-01-02T03:04:05Z","trace_id":"t"}`

// TestSubmitOptions checks the body each option produces.
func TestSubmitOptions(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name    string
		payload any
		opts    []triage.SubmitOption
		body    string
	}{
		{"bare", nil, nil, `{"type":"echo"}`},
		{"struct payload", struct {
			X int `json:"x"`
		}{1}, nil, `{"type":"echo","payload":{"x":1}}`},
		{"raw payload", json.RawMessage(`[1, 2]`), nil, `{"type":"echo","payload":[1,2]}`},
		{"bytes payload", []byte(`"s"`), nil, `{"type":"echo","payload":"s"}`},
		{"every option", nil, []triage.SubmitOption{
			triage.WithPriority(triage.Low), triage.WithMaxAttempts(7), triage.WithTimeout(1001 * time.Millisecond),
			triage.WithRunAt(at), triage.WithIdempotencyKey("k"), triage.WithTraceID("tr"),
			triage.WithKey("tenant-1"),
		}, `{"type":"echo","key":"tenant-1","priority":"low","max_attempts":7,"timeout_seconds":2,"run_at":"2026-01-02T03:04:05Z","idempotency_key":"k","trace_id":"tr"}`},
		{"delay replaces run_at", nil, []triage.SubmitOption{triage.WithRunAt(at), triage.WithDelay(90 * time.Second)}, `{"type":"echo","delay_seconds":90}`},
		{"run_at replaces delay", nil, []triage.SubmitOption{triage.WithDelay(time.Second), triage.WithRunAt(at)}, `{"type":"echo","run_at":"2026-01-02T03:04:05Z"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, c := serve(t, http.StatusCreated, taskJSON)
			tk, created, err := c.Submit(ctx(t), "echo", tt.payload, tt.opts...)
			if err != nil || !created || tk.ID != "01J0000000000000000000000A" || tk.Status != triage.Queued {
				t.Fatalf("Submit = %+v, %v, %v", tk, created, err)
			}
			r := f.last(t)
			if r.Method != "POST" || r.Path != "/api/v1/tasks" || !jsonEqual(t, r.Body, tt.body) {
				t.Errorf("sent %s %s %s, want POST /api/v1/tasks %s", r.Method, r.Path, r.Body, tt.body)
			}
		})
	}
}

func jsonEqual(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		t.Fatalf("not JSON: %s or %s", a, b)
	}
	return reflect.DeepEqual(x, y)
}

// TestSubmitChecksLocally: a bad field fails before anything is sent,
// with the deployment's own answer.
func TestSubmitChecksLocally(t *testing.T) {
	tests := []struct {
		name    string
		typ     string
		payload any
		opts    []triage.SubmitOption
		is      error
		field   string
	}{
		{"no type", "", nil, nil, triage.ErrBadRequest, "type"},
		{"priority", "echo", nil, []triage.SubmitOption{triage.WithPriority("urgent")}, triage.ErrBadRequest, "priority"},
		{"payload not JSON", "echo", json.RawMessage(`{`), nil, triage.ErrBadRequest, "payload"},
		{"payload too large", "echo", make([]byte, triage.MaxPayloadBytes+1), nil, triage.ErrTooLarge, "payload"},
		{"negative delay", "echo", nil, []triage.SubmitOption{triage.WithDelay(-time.Millisecond)}, triage.ErrBadRequest, "delay_seconds"},
		{"zero timeout", "echo", nil, []triage.SubmitOption{triage.WithTimeout(0)}, triage.ErrBadRequest, "timeout_seconds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, c := serve(t, http.StatusCreated, taskJSON)
			_, _, err := c.Submit(ctx(t), tt.typ, tt.payload, tt.opts...)
			var e *triage.Error
			if !errors.Is(err, tt.is) || !errors.As(err, &e) || e.Field != tt.field {
				t.Fatalf("err = %v, want %v naming %s", err, tt.is, tt.field)
			}
			if len(f.reqs) != 0 {
				t.Fatalf("sent %d requests", len(f.reqs))
			}
		})
	}
	if _, err := triage.NewRequest("echo", make(chan int)); err == nil {
		t.Error("NewRequest encoded a channel")
	}
}

// TestPaths checks the request of every other method.
func TestPaths(t *testing.T) {
	older := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	tests := []struct {
		name         string
		resp         string
		call         func(context.Context, *triage.Client) error
		method, path string
		query, body  string
	}{
		{"get", taskJSON, func(ctx context.Context, c *triage.Client) error { _, err := c.Get(ctx, "a/b"); return err }, "GET", "/api/v1/tasks/a%2Fb", "", ""},
		{"list", `{"tasks":[]}`, func(ctx context.Context, c *triage.Client) error {
			_, err := c.List(ctx, triage.ListParams{Type: "echo", Status: triage.Queued, Priority: triage.Low, Limit: 7, Cursor: "c"})
			return err
		}, "GET", "/api/v1/tasks", "cursor=c&limit=7&priority=low&status=queued&type=echo", ""},
		{"cancel", taskJSON, func(ctx context.Context, c *triage.Client) error { _, err := c.Cancel(ctx, "01X"); return err }, "POST", "/api/v1/tasks/01X/cancel", "", ""},
		{"retry", taskJSON, func(ctx context.Context, c *triage.Client) error { _, err := c.Retry(ctx, "01X"); return err }, "POST", "/api/v1/tasks/01X/retry", "", ""},
		{"delete", "", func(ctx context.Context, c *triage.Client) error { return c.Delete(ctx, "01X") }, "DELETE", "/api/v1/tasks/01X", "", ""},
		{"signal", taskJSON, func(ctx context.Context, c *triage.Client) error {
			_, err := c.Signal(ctx, "01M8ESRJ6HFKSSREDYE328VSDQ", "approval", map[string]bool{"ok": true})
			return err
		}, "POST", "/api/v1/tasks/01M8ESRJ6HFKSSREDYE328VSDQ/signals/approval", "", `{"ok":true}`},
		{"cleanup", `{"id":"01C","state":"running"}`, func(ctx context.Context, c *triage.Client) error { _, err := c.StartCleanup(ctx, older); return err }, "DELETE", "/api/v1/tasks", "older_than=2026-01-02T02%3A04%3A05Z", ""},
		{"cleanup status", `{"id":"01C","state":"done"}`, func(ctx context.Context, c *triage.Client) error { _, err := c.GetCleanup(ctx, "01C"); return err }, "GET", "/api/v1/cleanups/01C", "", ""},
		{"batch", `{"results":[{"index":0,"status":201,"task":` + taskJSON + `}]}`, func(ctx context.Context, c *triage.Client) error {
			_, err := c.SubmitBatch(ctx, []triage.SubmitRequest{{Type: "echo"}})
			return err
		}, "POST", "/api/v1/tasks/batch", "", `{"tasks":[{"type":"echo"}]}`},
		{"stats", `{"queues":{}}`, func(ctx context.Context, c *triage.Client) error { _, err := c.GetStats(ctx); return err }, "GET", "/api/v1/stats", "", ""},
		{"pause", `{}`, func(ctx context.Context, c *triage.Client) error { _, err := c.PauseType(ctx, "echo"); return err }, "POST", "/api/v1/control/pause", "type=echo", ""},
		{"resume all", `{}`, func(ctx context.Context, c *triage.Client) error { _, err := c.ResumeType(ctx, ""); return err }, "POST", "/api/v1/control/resume", "", ""},
		{"limits", `{}`, func(ctx context.Context, c *triage.Client) error {
			_, err := c.SetLimits(ctx, "echo", triagetype.LimitsRequest{})
			return err
		}, "PUT", "/api/v1/control/types/echo", "", `{"rate_limit_per_second":0,"max_concurrency":0}`},
		{"controls", `{"controls":[]}`, func(ctx context.Context, c *triage.Client) error { _, err := c.ListControls(ctx); return err }, "GET", "/api/v1/control", "", ""},
		{"dlq", `{"messages":[]}`, func(ctx context.Context, c *triage.Client) error {
			_, err := c.ListDLQ(ctx, triage.Low, 10)
			return err
		}, "GET", "/api/v1/dlq", "limit=10&priority=low", ""},
		{"replay", `{"replayed":1}`, func(ctx context.Context, c *triage.Client) error {
			_, err := c.ReplayDLQ(ctx, triagetype.ReplayRequest{Type: "echo"})
			return err
		}, "POST", "/api/v1/dlq/replay", "", `{"type":"echo"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, c := serve(t, http.StatusOK, tt.resp)
			if err := tt.call(ctx(t), c); err != nil {
				t.Fatal(err)
			}
			r := f.last(t)
			if r.Method != tt.method || r.Path != tt.path || r.Query != tt.query {
				t.Errorf("sent %s %s?%s, want %s %s?%s", r.Method, r.Path, r.Query, tt.method, tt.path, tt.query)
			}
			if (tt.body == "" && r.Body != "") || (tt.body != "" && !jsonEqual(t, r.Body, tt.body)) {
				t.Errorf("body %s, want %s", r.Body, tt.body)
			}
			if r.Header.Get("Authorization") != "Bearer tok" {
				t.Errorf("Authorization = %q", r.Header.Get("Authorization"))
			}
		})
	}
}

// An empty id or type would change the route; it is refused locally, as
// the server refuses a malformed one.
func TestEmptyPathParameters(t *testing.T) {
	f, c := serve(t, http.StatusOK, taskJSON)
	calls := map[string]func() error{
		"id": func() error { _, err := c.Get(ctx(t), ""); return err },
		"type": func() error {
			_, err := c.SetLimits(ctx(t), "", triagetype.LimitsRequest{RateLimitPerSecond: 1, MaxConcurrency: 1})
			return err
		},
	}
	for field, call := range calls {
		var e *triage.Error
		if err := call(); !errors.Is(err, triage.ErrBadRequest) || !errors.As(err, &e) || e.Field != field {
			t.Errorf("empty %s: %v", field, err)
		}
	}
	if len(f.reqs) != 0 {
		t.Errorf("sent %d requests", len(f.reqs))
	}
}

func TestTokenHeader(t *testing.T) {
	f, c := serve(t, http.StatusOK, taskJSON, triage.WithTokenHeader(), triage.WithHTTPClient(&http.Client{Timeout: time.Second}))
	if _, err := c.Get(ctx(t), "01X"); err != nil {
		t.Fatal(err)
	}
	if h := f.last(t).Header; h.Get(triage.TokenHeader) != "tok" || h.Get("Authorization") != "" {
		t.Errorf("headers %v", h)
	}
}

// TestErrors checks that each error status matches its sentinel and only
// it, keeps the body's code, message and field, and reads Retry-After.
func TestErrors(t *testing.T) {
	sentinels := []error{triage.ErrBadRequest, triage.ErrUnauthorized, triage.ErrForbidden, triage.ErrNotFound, triage.ErrConflict,
		triage.ErrTooLarge, triage.ErrTooMany, triage.ErrUnavailable, triage.ErrInternal}
	tests := []struct {
		status     int
		body       string
		retryAfter string
		want       error
		field      string
		wait       time.Duration
	}{
		{400, `{"error":{"code":"invalid_field","message":"priority: unknown","field":"priority"}}`, "", triage.ErrBadRequest, "priority", 0},
		{401, `{"error":{"code":"unauthorized","message":"no"}}`, "", triage.ErrUnauthorized, "", 0},
		{403, `{"error":{"code":"forbidden","message":"no"}}`, "", triage.ErrForbidden, "", 0},
		{404, `{"error":{"code":"not_found","message":"no task","field":"id"}}`, "", triage.ErrNotFound, "id", 0},
		{409, `{"error":{"code":"conflict","message":"finished"}}`, "", triage.ErrConflict, "", 0},
		{413, `{"error":{"code":"too_large","message":"big"}}`, "", triage.ErrTooLarge, "", 0},
		{429, `{"error":{"code":"too_many_requests","message":"later"}}`, "5", triage.ErrTooMany, "", 5 * time.Second},
		{429, `{"error":{"code":"too_many_requests","message":"later"}}`, time.Now().Add(time.Minute).UTC().Format(http.TimeFormat), triage.ErrTooMany, "", time.Minute},
		{500, `{"error":{"code":"internal","message":"oops"}}`, "", triage.ErrInternal, "", 0},
		{503, `{"error":{"code":"unavailable","message":"queue"}}`, "1", triage.ErrUnavailable, "", time.Second},
		{502, `<html>bad gateway</html>`, "", nil, "", 0},
	}
	for _, tt := range tests {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			f, c := serve(t, tt.status, tt.body)
			if tt.retryAfter != "" {
				f.headers = map[string]string{"Retry-After": tt.retryAfter}
			}
			_, err := c.Get(ctx(t), "01X")
			var e *triage.Error
			var body struct {
				Error struct{ Code string } `json:"error"`
			}
			_ = json.Unmarshal([]byte(tt.body), &body)
			if !errors.As(err, &e) || e.Status != tt.status || e.Field != tt.field || e.Code != body.Error.Code || e.Message == "" {
				t.Fatalf("err = %#v", err)
			}
			if e.RetryAfter > tt.wait || e.RetryAfter < tt.wait-2*time.Second {
				t.Errorf("RetryAfter = %v, want %v", e.RetryAfter, tt.wait)
			}
			for _, s := range sentinels {
				if errors.Is(err, s) != (s == tt.want) {
					t.Errorf("errors.Is(%v, %v) = %v", err, s, !(s == tt.want))
				}
			}
			if tt.want == nil && e.Message != "<html>bad gateway</html>" {
				t.Errorf("a body that is not the API's kept as %q", e.Message)
			}
		})
	}
}

// An *Error with a Cause matches both its sentinel and the cause.
func TestErrorCause(t *testing.T) {
	cause := errors.New("throttled")
	err := error(&triage.Error{Status: 503, Code: triagetype.CodeUnavailable, Message: "try again", Cause: cause})
	if !errors.Is(err, triage.ErrUnavailable) || !errors.Is(err, cause) || !strings.Contains(err.Error(), "503 unavailable: try again") {
		t.Fatalf("err = %v", err)
	}
}

func TestListAllStopsAndRefusesRepeatedCursors(t *testing.T) {
	f, c := serve(t, http.StatusOK, `{"tasks":[{"id":"a"},{"id":"b"}],"next_cursor":"same"}`)
	err := c.ListAll(ctx(t), triage.ListParams{}, func(*triage.Task) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "repeated cursor") || len(f.reqs) != 2 {
		t.Fatalf("err = %v after %d requests", err, len(f.reqs))
	}
	f.body = `{"tasks":[{"id":"a"},{"id":"b"}]}`
	var ids []string
	if err := c.ListAll(ctx(t), triage.ListParams{}, func(tk *triage.Task) error {
		ids = append(ids, tk.ID)
		return triage.ErrStop
	}); err != nil || len(ids) != 1 {
		t.Fatalf("ErrStop: ids %v, err %v", ids, err)
	}
}

func TestBatchResultCountMismatch(t *testing.T) {
	_, c := serve(t, http.StatusOK, `{"results":[]}`)
	if _, err := c.SubmitBatch(ctx(t), []triage.SubmitRequest{{Type: "echo"}}); err == nil {
		t.Fatal("no error for fewer results than tasks")
	}
}

// greet is a typed payload: its Go type names its task type.
type greet struct {
	Name string `json:"name"`
}

func (greet) Kind() string { return "greet" }

// badKind names a type the API refuses.
type badKind struct{}

func (badKind) Kind() string { return "no#hash" }

// unencodable has a payload encoding/json cannot encode.
type unencodable struct{ C chan int }

func (unencodable) Kind() string { return "greet" }

// TestSubmitArgs: a typed submit sends the body Submit would, with the
// type taken from Kind; what cannot be sent fails before anything is.
func TestSubmitArgs(t *testing.T) {
	tests := []struct {
		name  string
		args  triage.Args
		opts  []triage.SubmitOption
		body  string // sent; "" when nothing may be
		is    error  // the local failure, if any
		field string
	}{
		{"kind and payload", greet{Name: "ada"}, nil, `{"type":"greet","payload":{"name":"ada"}}`, nil, ""},
		{"options", greet{}, []triage.SubmitOption{triage.WithPriority(triage.Low), triage.WithIdempotencyKey("k")},
			`{"type":"greet","payload":{"name":""},"priority":"low","idempotency_key":"k"}`, nil, ""},
		{"pointer args", &greet{Name: "bo"}, nil, `{"type":"greet","payload":{"name":"bo"}}`, nil, ""},
		{"nil args", nil, nil, "", triage.ErrBadRequest, "type"},
		{"kind the API refuses", badKind{}, nil, "", triage.ErrBadRequest, "type"},
		{"bad option", greet{}, []triage.SubmitOption{triage.WithPriority("urgent")}, "", triage.ErrBadRequest, "priority"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, c := serve(t, http.StatusCreated, taskJSON)
			_, created, err := c.SubmitArgs(ctx(t), tt.args, tt.opts...)
			if tt.is != nil {
				var e *triage.Error
				if !errors.Is(err, tt.is) || !errors.As(err, &e) || e.Field != tt.field || len(f.reqs) != 0 {
					t.Fatalf("err = %v after %d requests, want %v naming %s and nothing sent", err, len(f.reqs), tt.is, tt.field)
				}
				return
			}
			if err != nil || !created {
				t.Fatalf("SubmitArgs: created %v, %v", created, err)
			}
			if r := f.last(t); r.Path != "/api/v1/tasks" || !jsonEqual(t, r.Body, tt.body) {
				t.Errorf("sent %s %s, want %s", r.Path, r.Body, tt.body)
			}
		})
	}
	_, c := serve(t, http.StatusCreated, taskJSON)
	if _, _, err := c.SubmitArgs(ctx(t), unencodable{}); err == nil || errors.Is(err, triage.ErrBadRequest) {
		t.Errorf("an unencodable payload: %v, want the encoding error", err)
	}
}

// TestSubmitArgsBatch: a typed batch sends what SubmitBatch would; an
// item the deployment may refuse is sent for it to answer, one that
// cannot be sent fails the call first, naming its index.
func TestSubmitArgsBatch(t *testing.T) {
	f, c := serve(t, http.StatusOK, `{"results":[{"index":0,"status":201,"task":`+taskJSON+`},{"index":1,"status":400,"error":{"code":"invalid_field","message":"m","field":"tasks[1].priority"}}]}`)
	res, err := c.SubmitArgsBatch(ctx(t), []triage.ArgsItem{
		{Args: greet{Name: "ada"}},
		{Args: greet{Name: "bo"}, Opts: []triage.SubmitOption{triage.WithPriority("urgent")}},
	})
	if err != nil || !res[0].Created() || !errors.Is(res[1].Err(), triage.ErrBadRequest) {
		t.Fatalf("SubmitArgsBatch = %+v, %v", res, err)
	}
	want := `{"tasks":[{"type":"greet","payload":{"name":"ada"}},{"type":"greet","payload":{"name":"bo"},"priority":"urgent"}]}`
	if r := f.last(t); r.Path != "/api/v1/tasks/batch" || !jsonEqual(t, r.Body, want) {
		t.Errorf("sent %s %s, want %s", r.Path, r.Body, want)
	}
	for _, tt := range []struct {
		name  string
		items []triage.ArgsItem
		is    error
	}{
		{"nil args", []triage.ArgsItem{{Args: greet{}}, {}}, triage.ErrBadRequest}, // naming tasks[1].type
		{"unencodable", []triage.ArgsItem{{Args: greet{}}, {Args: unencodable{}}}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, c := serve(t, http.StatusOK, `{"results":[]}`)
			_, err := c.SubmitArgsBatch(ctx(t), tt.items)
			if err == nil || !strings.Contains(err.Error(), "tasks[1]") || (tt.is != nil && !errors.Is(err, tt.is)) || len(f.reqs) != 0 {
				t.Fatalf("err = %v after %d requests, want one naming tasks[1] and nothing sent", err, len(f.reqs))
			}
		})
	}
}

// TestWait polls until the task is terminal; a task that ended without
// completing comes back with an error matching its sentinel.
func TestWait(t *testing.T) {
	ended := func(status, errJSON string) string {
		s := strings.Replace(taskJSON, `"queued"`, `"`+status+`"`, 1)
		if errJSON != "" {
			s = strings.Replace(s, `"trace_id":"t"`, `"trace_id":"t","error":`+errJSON, 1)
		}
		return s
	}
	tests := []struct {
		name     string
		final    string // the answer from the third read on
		status   int
		wantTask triage.Status // "": no task
		is       error         // nil: no error
		says     string
	}{
		{"completed", ended("completed", ""), 200, triage.Completed, nil, ""},
		{"dead-lettered", ended("dead_letter", `{"message":"no way (attempt 3 of 3, none left)","retriable":true}`), 200, triage.DeadLetter, triage.ErrDeadLettered, "no way"},
		{"cancelled by request", ended("cancelled", ""), 200, triage.Cancelled, triage.ErrCancelled, ""},
		{"cancelled by its handler", ended("cancelled", `{"message":"order refunded","retriable":false}`), 200, triage.Cancelled, triage.ErrCancelled, "order refunded"},
		{"deleted meanwhile", `{"error":{"code":"not_found","message":"no task"}}`, 404, "", triage.ErrNotFound, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			reads := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				reads++
				n := reads
				mu.Unlock()
				if n < 3 {
					_, _ = io.WriteString(w, taskJSON)
					return
				}
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.final)
			}))
			defer srv.Close()
			c := triage.NewClient(triage.HTTP(srv.URL, "tok"))
			tk, err := c.Wait(ctx(t), "01J0000000000000000000000A", time.Millisecond)
			if tt.is == nil && err != nil || tt.is != nil && !errors.Is(err, tt.is) || !strings.Contains(fmt.Sprint(err), tt.says) {
				t.Fatalf("Wait error = %v, want %v saying %q", err, tt.is, tt.says)
			}
			if tt.wantTask == "" && tk != nil || tt.wantTask != "" && (tk == nil || tk.Status != tt.wantTask) {
				t.Fatalf("Wait task = %+v, want status %q", tk, tt.wantTask)
			}
			if reads != 3 {
				t.Errorf("%d reads, want 3", reads)
			}
		})
	}
	t.Run("context ends first", func(t *testing.T) {
		_, c := serve(t, http.StatusOK, taskJSON)
		cx, cancel := context.WithTimeout(ctx(t), 20*time.Millisecond)
		defer cancel()
		tk, err := c.Wait(cx, "01J0000000000000000000000A", time.Millisecond)
		if !errors.Is(err, context.DeadlineExceeded) || tk == nil || tk.Status != triage.Queued {
			t.Fatalf("Wait = %+v, %v; want the last task read and the deadline", tk, err)
		}
	})
}

// TestAnswers checks that each method decodes the API's answer into the
// value it returns (TestPaths checks what it sends).
func TestAnswers(t *testing.T) {
	older := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		status int
		resp   string
		call   func(context.Context, *triage.Client) (any, error)
		want   any
	}{
		{"submit created", 201, taskJSON, func(ctx context.Context, c *triage.Client) (any, error) {
			tk, created, err := c.Submit(ctx, "echo", nil, triage.WithIdempotencyKey("k"))
			return words(tk.ID, created), err
		}, "01J0000000000000000000000A true"},
		{"submit existing", 200, taskJSON, func(ctx context.Context, c *triage.Client) (any, error) {
			_, created, err := c.Submit(ctx, "echo", nil, triage.WithIdempotencyKey("k"))
			return created, err
		}, false},
		{"batch", 200, `{"results":[{"index":0,"status":201,"task":` + taskJSON + `},{"index":1,"status":400,"error":{"code":"invalid_field","message":"bad","field":"tasks[1].priority"}}]}`,
			func(ctx context.Context, c *triage.Client) (any, error) {
				res, err := c.SubmitBatch(ctx, []triage.SubmitRequest{{Type: "echo"}, {Type: "echo", Priority: "urgent"}})
				if err != nil {
					return nil, err
				}
				var e *triage.Error
				e1 := res[1].Err()
				return words(res[0].Created(), res[0].Err() == nil, res[0].Task.ID, errors.Is(e1, triage.ErrBadRequest), errors.As(e1, &e) && e.Field == "tasks[1].priority"), nil
			}, "true true 01J0000000000000000000000A true true"},
		{"get", 200, taskJSON, func(ctx context.Context, c *triage.Client) (any, error) {
			tk, err := c.Get(ctx, "01X")
			return words(string(tk.Payload), tk.Priority, tk.EffectivePriority, tk.MaxAttempts), err
		}, `{"x":1} high high 3`},
		{"list", 200, `{"tasks":[` + taskJSON + `],"next_cursor":"c2"}`, func(ctx context.Context, c *triage.Client) (any, error) {
			p, err := c.List(ctx, triage.ListParams{})
			return words(len(p.Tasks), p.NextCursor), err
		}, "1 c2"},
		{"cancel", 200, strings.Replace(taskJSON, `"queued"`, `"cancelled"`, 1), func(ctx context.Context, c *triage.Client) (any, error) {
			tk, err := c.Cancel(ctx, "01X")
			return tk.Status, err
		}, triage.Cancelled},
		{"cleanup", 202, `{"id":"01C","older_than":"2026-01-02T02:04:05Z","state":"running","deleted":0}`, func(ctx context.Context, c *triage.Client) (any, error) {
			j, err := c.StartCleanup(ctx, older)
			return words(j.ID, j.State, j.OlderThan.Year()), err
		}, "01C running 2026"},
		{"cleanup status", 200, `{"id":"01C","state":"done","deleted":42}`, func(ctx context.Context, c *triage.Client) (any, error) {
			j, err := c.GetCleanup(ctx, "01C")
			return words(j.State, j.Deleted), err
		}, "done 42"},
		{"stats", 200, `{"queues":{"high":{"depth":3,"in_flight":1,"delayed":0,"dlq_depth":2,"oldest_age_seconds":1.5}},"statuses":{"queued":3},"types":{"echo":{"queued":3}},"throughput":{"completed_last_minute":9,"failed_last_minute":1},"generated_at":"2026-01-02T03:04:05Z"}`,
			func(ctx context.Context, c *triage.Client) (any, error) {
				s, err := c.GetStats(ctx)
				if err != nil {
					return nil, err
				}
				h := s.Queues[triage.High]
				return words(h.Depth, h.DLQDepth, h.OldestAgeSeconds, s.Statuses["queued"], s.Types["echo"]["queued"], s.Throughput.CompletedLastMinute, s.GeneratedAt.Year()), nil
			}, "3 2 1.5 3 3 9 2026"},
		{"set limits", 200, `{"type":"echo","paused":false,"rate_limit_per_second":2.5,"max_concurrency":4}`, func(ctx context.Context, c *triage.Client) (any, error) {
			s, err := c.SetLimits(ctx, "echo", triagetype.LimitsRequest{RateLimitPerSecond: 2.5, MaxConcurrency: 4})
			return words(s.Type, s.RateLimitPerSecond, s.MaxConcurrency), err
		}, "echo 2.5 4"},
		{"controls", 200, `{"controls":[{"paused":false},{"type":"echo","paused":true,"max_concurrency":2}]}`, func(ctx context.Context, c *triage.Client) (any, error) {
			cs, err := c.ListControls(ctx)
			return words(len(cs), cs[1].Type, cs[1].Paused, cs[1].MaxConcurrency), err
		}, "2 echo true 2"},
		{"dlq", 200, `{"messages":[{"priority":"low","message_id":"m1","task_id":"01X","type":"echo","reason":"boom","body":"{}","sent_at":"2026-01-02T03:04:05Z","receive_count":5}]}`,
			func(ctx context.Context, c *triage.Client) (any, error) {
				ms, err := c.ListDLQ(ctx, triage.Low, 10)
				return words(ms[0].MessageID, ms[0].TaskID, ms[0].ReceiveCount, ms[0].Reason), err
			}, "m1 01X 5 boom"},
		{"replay", 200, `{"replayed":3,"skipped":1}`, func(ctx context.Context, c *triage.Client) (any, error) {
			r, err := c.ReplayDLQ(ctx, triagetype.ReplayRequest{Priority: triage.High, Type: "echo", Limit: 5})
			return *r, err
		}, triagetype.ReplayResult{Replayed: 3, Skipped: 1}},
		{"delete", 204, "", func(ctx context.Context, c *triage.Client) (any, error) { return "ok", c.Delete(ctx, "01X") }, "ok"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, c := serve(t, tt.status, tt.resp)
			got, err := tt.call(ctx(t), c)
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %#v, %v; want %#v", got, err, tt.want)
			}
		})
	}
	t.Run("openapi", func(t *testing.T) {
		f := &recorder{status: 200, body: `{"openapi":"3.1.0"}`}
		srv := httptest.NewServer(f)
		defer srv.Close()
		b, err := triage.HTTP(srv.URL, "tok").OpenAPI(ctx(t))
		if err != nil || string(b) != `{"openapi":"3.1.0"}` || f.last(t).Path != "/api/v1/openapi.json" {
			t.Fatalf("OpenAPI = %s, %v (sent %s)", b, err, f.last(t).Path)
		}
	})
}

// TestListAll walks three pages, passing each next_cursor on with the
// filters kept, and stops at a callback's error or the server's.
func TestListAll(t *testing.T) {
	pages := map[string]string{
		"":   `{"tasks":[{"id":"a"},{"id":"b"}],"next_cursor":"c1"}`,
		"c1": `{"tasks":[{"id":"c"}],"next_cursor":"c2"}`,
		"c2": `{"tasks":[{"id":"d"}]}`,
	}
	var mu sync.Mutex
	var queries []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		queries = append(queries, r.URL.RawQuery)
		mu.Unlock()
		if r.URL.Query().Get("status") == "nope" {
			w.WriteHeader(400)
			_, _ = io.WriteString(w, `{"error":{"code":"invalid_field","message":"status: unknown","field":"status"}}`)
			return
		}
		_, _ = io.WriteString(w, pages[r.URL.Query().Get("cursor")])
	}))
	defer srv.Close()
	c := triage.NewClient(triage.HTTP(srv.URL, "tok"))

	var ids []string
	collect := func(tk *triage.Task) error { ids = append(ids, tk.ID); return nil }
	if err := c.ListAll(ctx(t), triage.ListParams{Status: triage.Queued, Limit: 2}, collect); err != nil || strings.Join(ids, "") != "abcd" {
		t.Fatalf("ids %v, err %v", ids, err)
	}
	for i, q := range queries {
		if !strings.Contains(q, "status=queued") || !strings.Contains(q, "limit=2") {
			t.Errorf("page %d lost the filters: %s", i, q)
		}
	}
	boom := errors.New("boom")
	if err := c.ListAll(ctx(t), triage.ListParams{}, func(*triage.Task) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("a callback's error: %v, want boom", err)
	}
	var e *triage.Error
	if err := c.ListAll(ctx(t), triage.ListParams{Status: "nope"}, collect); !errors.Is(err, triage.ErrBadRequest) || !errors.As(err, &e) || e.Field != "status" {
		t.Errorf("the server's error: %v, want ErrBadRequest naming status", err)
	}
}

// words joins values with spaces, like fmt.Sprintln without the newline.
func words(v ...any) string { return strings.TrimSuffix(fmt.Sprintln(v...), "\n") }
