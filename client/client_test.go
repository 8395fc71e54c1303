package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/triagehq/triage/client"
)

// recorded is one request the fake API saw.
type recorded struct {
	Method, Path string
	Query        url.Values
	Body         string
	Auth         string
}

// fakeAPI answers every request with a canned status, headers and body and
// records what it was sent.
type fakeAPI struct {
	mu     sync.Mutex
	reqs   []recorded
	status int
	header map[string]string
	body   string
	// respond, when set, chooses the answer per request instead.
	respond func(r recorded) (int, string)
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rec := recorded{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.Query(), Body: string(b), Auth: r.Header.Get("Authorization")}
	f.mu.Lock()
	f.reqs = append(f.reqs, rec)
	status, body := f.status, f.body
	f.mu.Unlock()
	if f.respond != nil {
		status, body = f.respond(rec)
	}
	for k, v := range f.header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func (f *fakeAPI) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

func newFake(t *testing.T, status int, body string) (*fakeAPI, *client.Client) {
	t.Helper()
	f := &fakeAPI{status: status, body: body}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	c := client.New(srv.URL+"/", "tok").WithHTTPClient(&http.Client{Timeout: 5 * time.Second})
	return f, c
}

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

const taskJSON = `{"id":"01J0000000000000000000000A","type":"echo","payload":{"x":1},"priority":"high","effective_priority":"high","status":"queued","attempts":0,"max_attempts":3,"timeout_seconds":300,"created_at":"2026-01-02T03:04:05Z","trace_id":"t"}`

func intp(v int) *int { return &v }

// TestRequests checks each method's method, path, query and body, and that
// it decodes the response.
func TestRequests(t *testing.T) {
	olderThan := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	tests := []struct {
		name      string
		status    int
		resp      string
		call      func(context.Context, *client.Client) (any, error)
		method    string
		path      string
		query     url.Values
		body      string // JSON, compared semantically; "" means no body
		wantValue any
	}{
		{
			name: "submit created", status: 201, resp: taskJSON,
			call: func(ctx context.Context, c *client.Client) (any, error) {
				tk, created, err := c.Submit(ctx, client.SubmitRequest{Type: "echo", Payload: json.RawMessage(`{"x":1}`), Priority: "high", MaxAttempts: intp(5), IdempotencyKey: "k"})
				if err != nil {
					return nil, err
				}
				return words(tk.ID, created), nil
			},
			method: "POST", path: "/api/v1/tasks",
			body:      `{"type":"echo","payload":{"x":1},"priority":"high","max_attempts":5,"idempotency_key":"k"}`,
			wantValue: "01J0000000000000000000000A true",
		},
		{
			name: "submit existing", status: 200, resp: taskJSON,
			call: func(ctx context.Context, c *client.Client) (any, error) {
				_, created, err := c.Submit(ctx, client.SubmitRequest{Type: "echo", IdempotencyKey: "k"})
				return created, err
			},
			method: "POST", path: "/api/v1/tasks", body: `{"type":"echo","idempotency_key":"k"}`, wantValue: false,
		},
		{
			name: "batch", status: 200,
			resp: `{"results":[{"index":0,"status":201,"task":` + taskJSON + `},{"index":1,"status":400,"error":{"code":"invalid_field","message":"bad","field":"tasks[1].priority"}}]}`,
			call: func(ctx context.Context, c *client.Client) (any, error) {
				res, err := c.SubmitBatch(ctx, []client.SubmitRequest{{Type: "echo"}, {Type: "echo", Priority: "urgent"}})
				if err != nil {
					return nil, err
				}
				var ce *client.Error
				e1 := res[1].Err()
				return words(res[0].Created(), res[0].Err() == nil, res[0].Task.ID, errors.Is(e1, client.ErrBadRequest), errors.As(e1, &ce) && ce.Field == "tasks[1].priority"), nil
			},
			method: "POST", path: "/api/v1/tasks/batch",
			body:      `{"tasks":[{"type":"echo"},{"type":"echo","priority":"urgent"}]}`,
			wantValue: "true true 01J0000000000000000000000A true true",
		},
		{
			name: "get", status: 200, resp: taskJSON,
			call: func(ctx context.Context, c *client.Client) (any, error) {
				tk, err := c.Get(ctx, "a/b")
				if err != nil {
					return nil, err
				}
				return string(tk.Payload), nil
			},
			method: "GET", path: "/api/v1/tasks/a%2Fb", wantValue: `{"x":1}`,
		},
		{
			name: "list with filters", status: 200, resp: `{"tasks":[` + taskJSON + `],"next_cursor":"c2"}`,
			call: func(ctx context.Context, c *client.Client) (any, error) {
				l, err := c.List(ctx, client.ListOptions{Type: "echo", Status: "queued", Priority: "low", Limit: 7, Cursor: "c1"})
				if err != nil {
					return nil, err
				}
				return words(len(l.Tasks), l.NextCursor), nil
			},
			method: "GET", path: "/api/v1/tasks",
			query:     url.Values{"type": {"echo"}, "status": {"queued"}, "priority": {"low"}, "limit": {"7"}, "cursor": {"c1"}},
			wantValue: "1 c2",
		},
		{
			name: "list without filters", status: 200, resp: `{"tasks":[]}`,
			call: func(ctx context.Context, c *client.Client) (any, error) {
				l, err := c.List(ctx, client.ListOptions{})
				if err != nil {
					return nil, err
				}
				return len(l.Tasks), nil
			},
			method: "GET", path: "/api/v1/tasks", query: url.Values{}, wantValue: 0,
		},
		{
			name: "cancel", status: 200, resp: strings.Replace(taskJSON, `"queued"`, `"cancelled"`, 1),
			call: func(ctx context.Context, c *client.Client) (any, error) {
				tk, err := c.Cancel(ctx, "01X")
				if err != nil {
					return nil, err
				}
				return string(tk.Status), nil // a triage.Status now
			},
			method: "POST", path: "/api/v1/tasks/01X/cancel", wantValue: "cancelled",
		},
		{
			name: "retry", status: 200, resp: taskJSON,
			call: func(ctx context.Context, c *client.Client) (any, error) {
				tk, err := c.Retry(ctx, "01X")
				if err != nil {
					return nil, err
				}
				return string(tk.Status), nil // a triage.Status now
			},
			method: "POST", path: "/api/v1/tasks/01X/retry", wantValue: "queued",
		},
		{
			name: "delete", status: 204, resp: "",
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return "ok", c.Delete(ctx, "01X")
			},
			method: "DELETE", path: "/api/v1/tasks/01X", wantValue: "ok",
		},
		{
			name: "cleanup", status: 200, resp: `{"deleted":42}`,
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.Cleanup(ctx, olderThan)
			},
			method: "DELETE", path: "/api/v1/tasks", query: url.Values{"older_than": {"2026-01-02T02:04:05Z"}}, wantValue: 42,
		},
		{
			name: "stats", status: 200,
			resp: `{"queues":{"high":{"depth":3,"in_flight":1,"delayed":0,"dlq_depth":2,"oldest_age_seconds":1.5}},"statuses":{"queued":3},"types":{"echo":{"queued":3}},"throughput":{"completed_last_minute":9,"failed_last_minute":1},"generated_at":"2026-01-02T03:04:05Z"}`,
			call: func(ctx context.Context, c *client.Client) (any, error) {
				s, err := c.Stats(ctx)
				if err != nil {
					return nil, err
				}
				return words(s.Queues["high"].Depth, s.Queues["high"].DLQDepth, s.Queues["high"].OldestAgeSeconds, s.Statuses["queued"], s.Types["echo"]["queued"], s.Throughput.CompletedLastMinute, s.GeneratedAt.Year()), nil
			},
			method: "GET", path: "/api/v1/stats", wantValue: "3 2 1.5 3 3 9 2026",
		},
		{
			name: "pause global", status: 200, resp: `{"paused":true}`,
			call: func(ctx context.Context, c *client.Client) (any, error) {
				s, err := c.Pause(ctx, "")
				if err != nil {
					return nil, err
				}
				return words(s.Type == "", s.Paused), nil
			},
			method: "POST", path: "/api/v1/control/pause", query: url.Values{}, wantValue: "true true",
		},
		{
			name: "resume type", status: 200, resp: `{"type":"echo","paused":false}`,
			call: func(ctx context.Context, c *client.Client) (any, error) {
				s, err := c.Resume(ctx, "echo")
				if err != nil {
					return nil, err
				}
				return words(s.Type, s.Paused), nil
			},
			method: "POST", path: "/api/v1/control/resume", query: url.Values{"type": {"echo"}}, wantValue: "echo false",
		},
		{
			name: "set limits", status: 200, resp: `{"type":"echo","paused":false,"rate_limit_per_second":2.5,"max_concurrency":4}`,
			call: func(ctx context.Context, c *client.Client) (any, error) {
				s, err := c.SetLimits(ctx, "echo", 2.5, 4)
				if err != nil {
					return nil, err
				}
				return words(s.RateLimitPerSecond, s.MaxConcurrency), nil
			},
			method: "PUT", path: "/api/v1/control/types/echo",
			body: `{"rate_limit_per_second":2.5,"max_concurrency":4}`, wantValue: "2.5 4",
		},
		{
			name: "set limits clears with zero", status: 200, resp: `{"type":"echo","paused":false}`,
			call: func(ctx context.Context, c *client.Client) (any, error) {
				_, err := c.SetLimits(ctx, "echo", 0, 0)
				return "ok", err
			},
			method: "PUT", path: "/api/v1/control/types/echo",
			body: `{"rate_limit_per_second":0,"max_concurrency":0}`, wantValue: "ok",
		},
		{
			name: "controls", status: 200, resp: `{"controls":[{"paused":false},{"type":"echo","paused":true,"max_concurrency":2}]}`,
			call: func(ctx context.Context, c *client.Client) (any, error) {
				cs, err := c.Controls(ctx)
				if err != nil {
					return nil, err
				}
				return words(len(cs), cs[1].Type, cs[1].Paused, cs[1].MaxConcurrency), nil
			},
			method: "GET", path: "/api/v1/control", wantValue: "2 echo true 2",
		},
		{
			name: "dlq", status: 200,
			resp: `{"messages":[{"priority":"low","message_id":"m1","task_id":"01X","type":"echo","reason":"boom","body":"{}","sent_at":"2026-01-02T03:04:05Z","receive_count":5}]}`,
			call: func(ctx context.Context, c *client.Client) (any, error) {
				ms, err := c.DLQ(ctx, "low", 10)
				if err != nil {
					return nil, err
				}
				return words(ms[0].MessageID, ms[0].TaskID, ms[0].ReceiveCount, ms[0].Reason), nil
			},
			method: "GET", path: "/api/v1/dlq", query: url.Values{"priority": {"low"}, "limit": {"10"}}, wantValue: "m1 01X 5 boom",
		},
		{
			name: "replay", status: 200, resp: `{"replayed":3,"skipped":1}`,
			call: func(ctx context.Context, c *client.Client) (any, error) {
				r, err := c.ReplayDLQ(ctx, client.ReplayRequest{Priority: "high", Type: "echo", Limit: 5})
				if err != nil {
					return nil, err
				}
				return *r, nil
			},
			method: "POST", path: "/api/v1/dlq/replay", body: `{"priority":"high","type":"echo","limit":5}`,
			wantValue: client.ReplayResult{Replayed: 3, Skipped: 1},
		},
		{
			name: "replay everything", status: 200, resp: `{"replayed":0,"skipped":0}`,
			call: func(ctx context.Context, c *client.Client) (any, error) {
				_, err := c.ReplayDLQ(ctx, client.ReplayRequest{})
				return "ok", err
			},
			method: "POST", path: "/api/v1/dlq/replay", body: `{}`, wantValue: "ok",
		},
		{
			name: "openapi", status: 200, resp: `{"openapi":"3.1.0"}`,
			call: func(ctx context.Context, c *client.Client) (any, error) {
				b, err := c.OpenAPI(ctx)
				return string(b), err
			},
			method: "GET", path: "/api/v1/openapi.json", wantValue: `{"openapi":"3.1.0"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, c := newFake(t, tt.status, tt.resp)
			got, err := tt.call(ctx(t), c)
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			if !reflect.DeepEqual(got, tt.wantValue) {
				t.Errorf("value = %#v, want %#v", got, tt.wantValue)
			}
			reqs := f.requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.Method != tt.method || r.Path != tt.path {
				t.Errorf("request %s %s, want %s %s", r.Method, r.Path, tt.method, tt.path)
			}
			if r.Auth != "Bearer tok" {
				t.Errorf("Authorization = %q", r.Auth)
			}
			if tt.query != nil && !reflect.DeepEqual(r.Query, tt.query) {
				t.Errorf("query = %v, want %v", r.Query, tt.query)
			}
			if tt.body == "" {
				if r.Body != "" {
					t.Errorf("body = %s, want none", r.Body)
				}
			} else if !jsonEqual(t, r.Body, tt.body) {
				t.Errorf("body = %s, want %s", r.Body, tt.body)
			}
		})
	}
}

// words joins values with spaces, like fmt.Sprintln without the newline.
func words(v ...any) string { return strings.TrimSuffix(fmt.Sprintln(v...), "\n") }

func jsonEqual(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		t.Fatalf("not JSON: %s", a)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatalf("not JSON: %s", b)
	}
	return reflect.DeepEqual(x, y)
}

// TestErrorMapping checks that every error status becomes an *Error that
// matches its sentinel, with the body's code, message and field.
func TestErrorMapping(t *testing.T) {
	tests := []struct {
		status int
		body   string
		header map[string]string
		want   error
		code   string
		field  string
		retry  time.Duration
	}{
		{400, `{"error":{"code":"invalid_field","message":"priority: unknown","field":"priority"}}`, nil, client.ErrBadRequest, "invalid_field", "priority", 0},
		{401, `{"error":{"code":"unauthorized","message":"no"}}`, nil, client.ErrUnauthorized, "unauthorized", "", 0},
		{403, `{"error":{"code":"forbidden","message":"no"}}`, nil, client.ErrForbidden, "forbidden", "", 0},
		{404, `{"error":{"code":"not_found","message":"no task","field":"id"}}`, nil, client.ErrNotFound, "not_found", "id", 0},
		{409, `{"error":{"code":"conflict","message":"terminal"}}`, nil, client.ErrConflict, "conflict", "", 0},
		{413, `{"error":{"code":"too_large","message":"big","field":"payload"}}`, nil, client.ErrTooLarge, "too_large", "payload", 0},
		{429, `{"error":{"code":"too_many_requests","message":"slow down"}}`, map[string]string{"Retry-After": "7"}, client.ErrTooMany, "too_many_requests", "", 7 * time.Second},
		{503, `{"error":{"code":"unavailable","message":"queue"}}`, map[string]string{"Retry-After": "1"}, client.ErrUnavailable, "unavailable", "", time.Second},
		{500, `{"error":{"code":"internal","message":"oops"}}`, nil, client.ErrInternal, "internal", "", 0},
		{502, `<html>bad gateway</html>`, nil, nil, "", "", 0},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			f, c := newFake(t, tt.status, tt.body)
			f.header = tt.header
			_, err := c.Get(ctx(t), "x")
			var e *client.Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v (%T), want *client.Error", err, err)
			}
			if e.Status != tt.status || e.Code != tt.code || e.Field != tt.field || e.RetryAfter != tt.retry || e.Message == "" {
				t.Errorf("error = %+v", e)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.want)
			}
			if tt.want == nil && e.Message != "<html>bad gateway</html>" {
				t.Errorf("non-JSON body kept as %q", e.Message)
			}
			for _, other := range []error{client.ErrNotFound, client.ErrConflict, client.ErrTooMany} {
				if other != tt.want && errors.Is(err, other) {
					t.Errorf("%d also matches %v", tt.status, other)
				}
			}
		})
	}
}

func TestRetryAfterHTTPDate(t *testing.T) {
	f, c := newFake(t, 429, `{"error":{"code":"too_many_requests","message":"later"}}`)
	f.header = map[string]string{"Retry-After": time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)}
	_, _, err := c.Submit(ctx(t), client.SubmitRequest{Type: "echo"})
	var e *client.Error
	if !errors.As(err, &e) || e.RetryAfter < 80*time.Second || e.RetryAfter > 91*time.Second {
		t.Fatalf("err = %v (retry after %v), want about 90s", err, e.RetryAfter)
	}
}

// TestListAll walks three pages, passing each next_cursor on, and stops
// early on ErrStop.
func TestListAll(t *testing.T) {
	pages := map[string]string{
		"":   `{"tasks":[{"id":"a"},{"id":"b"}],"next_cursor":"c1"}`,
		"c1": `{"tasks":[{"id":"c"}],"next_cursor":"c2"}`,
		"c2": `{"tasks":[{"id":"d"}]}`,
	}
	f, c := newFake(t, 200, "")
	f.respond = func(r recorded) (int, string) { return 200, pages[r.Query.Get("cursor")] }
	var ids []string
	err := c.ListAll(ctx(t), client.ListOptions{Status: "queued", Limit: 2}, func(tk *client.Task) error {
		ids = append(ids, tk.ID)
		return nil
	})
	if err != nil || strings.Join(ids, "") != "abcd" {
		t.Fatalf("ids = %v, err = %v", ids, err)
	}
	for i, r := range f.requests() {
		if r.Query.Get("status") != "queued" || r.Query.Get("limit") != "2" {
			t.Errorf("request %d lost the filter: %v", i, r.Query)
		}
	}

	ids = nil
	err = c.ListAll(ctx(t), client.ListOptions{}, func(tk *client.Task) error {
		ids = append(ids, tk.ID)
		if tk.ID == "c" {
			return client.ErrStop
		}
		return nil
	})
	if err != nil || strings.Join(ids, "") != "abc" {
		t.Fatalf("stopped walk: ids = %v, err = %v", ids, err)
	}

	boom := errors.New("boom")
	if err := c.ListAll(ctx(t), client.ListOptions{}, func(*client.Task) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("callback error = %v, want boom", err)
	}
}

func TestListAllRepeatedCursor(t *testing.T) {
	f, c := newFake(t, 200, "")
	f.respond = func(recorded) (int, string) { return 200, `{"tasks":[{"id":"a"}],"next_cursor":"same"}` }
	err := c.ListAll(ctx(t), client.ListOptions{}, func(*client.Task) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "repeated cursor") {
		t.Fatalf("err = %v", err)
	}
	if n := len(f.requests()); n != 2 {
		t.Fatalf("%d requests, want 2", n)
	}
}

func TestListAllError(t *testing.T) {
	_, c := newFake(t, 400, `{"error":{"code":"invalid_field","message":"status: unknown","field":"status"}}`)
	err := c.ListAll(ctx(t), client.ListOptions{Status: "nope"}, func(*client.Task) error { return nil })
	var e *client.Error
	if !errors.Is(err, client.ErrBadRequest) || !errors.As(err, &e) || e.Field != "status" {
		t.Fatalf("err = %v", err)
	}
}

func TestWait(t *testing.T) {
	var n atomic.Int32
	f, c := newFake(t, 200, "")
	f.respond = func(recorded) (int, string) {
		if n.Add(1) < 3 {
			return 200, taskJSON
		}
		return 200, strings.Replace(taskJSON, `"queued"`, `"completed"`, 1)
	}
	tk, err := c.Wait(ctx(t), "01X", time.Millisecond)
	if err != nil || tk.Status != "completed" || n.Load() != 3 {
		t.Fatalf("wait = %v, %v after %d polls", tk, err, n.Load())
	}
}

func TestBatchResultCountMismatch(t *testing.T) {
	_, c := newFake(t, 200, `{"results":[]}`)
	if _, err := c.SubmitBatch(ctx(t), []client.SubmitRequest{{Type: "echo"}}); err == nil {
		t.Fatal("no error for a response with fewer results than tasks")
	}
}
