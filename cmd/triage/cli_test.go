package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/triagehq/triage/triagetype"
)

// fakeAPI is a small stand-in for the triage API: canned answers per
// route, and a record of every request, so the tests check what the CLI
// sends as well as what it prints.
type fakeAPI struct {
	mu   sync.Mutex
	reqs []string // "METHOD /path?query body"
	// throttled counts batch items of type "throttle" already refused once.
	throttled map[string]bool
}

const fakeTask = `{"id":"%s","type":"echo","payload":{"x":1},"priority":"low","effective_priority":"%s","status":"%s","attempts":%d,"max_attempts":3,"timeout_seconds":300,"created_at":"2026-01-02T03:04:05Z","trace_id":"t"%s}`

func task(id, status string) string {
	extra := ""
	switch status {
	case "completed":
		extra = `,"result":{"x":1}`
	case "dead_letter":
		extra = `,"error":{"message":"boom","retriable":false}`
	case "executing":
		extra = `,"progress":{"percent":40,"message":"rows","attempt":2,"updated_at":"2026-01-02T03:04:05Z"},"checkpoint":{"row":4}`
	}
	return fmt.Sprintf(fakeTask, id, "low", status, 1, extra)
}

func apiError(w http.ResponseWriter, status int, code, field, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": code, "message": msg, "field": field}})
	_, _ = w.Write(b)
}

func reply(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func (f *fakeAPI) handler() http.Handler {
	mux := http.NewServeMux()
	tasks := map[string]string{
		"done":   "completed",
		"queued": "queued",
		"dead":   "dead_letter",
		"gone":   "cancelled",
		"busy":   "executing",
	}
	mux.HandleFunc("GET /api/v1/tasks/{id}", func(w http.ResponseWriter, r *http.Request) {
		st, ok := tasks[r.PathValue("id")]
		if !ok {
			apiError(w, 404, triagetype.CodeNotFound, "id", "no task with id "+r.PathValue("id"))
			return
		}
		reply(w, 200, task(r.PathValue("id"), st))
	})
	mux.HandleFunc("POST /api/v1/tasks", func(w http.ResponseWriter, r *http.Request) {
		var req map[string]any
		_ = json.NewDecoder(r.Body).Decode(&req)
		if req["type"] == "bad" {
			apiError(w, 400, triagetype.CodeInvalidField, "priority", "priority: unknown priority")
			return
		}
		reply(w, 201, task("new1", "queued"))
	})
	mux.HandleFunc("POST /api/v1/tasks/batch", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Tasks []map[string]any `json:"tasks"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		var results []string
		for i, t := range req.Tasks {
			key, _ := t["idempotency_key"].(string)
			switch {
			case t["type"] == "unauthorized":
				apiError(w, 401, triagetype.CodeUnauthorized, "", "missing or invalid bearer token")
				return
			case t["type"] == "bad":
				results = append(results, fmt.Sprintf(`{"index":%d,"status":400,"error":{"code":"invalid_field","message":"priority: unknown priority","field":"tasks[%d].priority"}}`, i, i))
			case t["type"] == "throttle" && !f.refuse(key):
				results = append(results, fmt.Sprintf(`{"index":%d,"status":429,"error":{"code":"too_many_requests","message":"slow down"}}`, i))
			case strings.HasPrefix(key, "dup"):
				results = append(results, fmt.Sprintf(`{"index":%d,"status":200,"task":%s}`, i, task("id-"+key, "queued")))
			default:
				results = append(results, fmt.Sprintf(`{"index":%d,"status":201,"task":%s}`, i, task("id-"+key, "queued")))
			}
		}
		reply(w, 200, `{"results":[`+strings.Join(results, ",")+`]}`)
	})
	mux.HandleFunc("GET /api/v1/tasks", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("cursor") {
		case "":
			if r.URL.Query().Get("status") == "nope" {
				apiError(w, 400, triagetype.CodeInvalidField, "status", "status: unknown status")
				return
			}
			reply(w, 200, `{"tasks":[`+task("a1", "queued")+`,`+task("a2", "completed")+`],"next_cursor":"c1"}`)
		case "c1":
			reply(w, 200, `{"tasks":[`+task("a3", "dead_letter")+`]}`)
		}
	})
	mux.HandleFunc("POST /api/v1/tasks/{id}/cancel", func(w http.ResponseWriter, r *http.Request) {
		switch tasks[r.PathValue("id")] {
		case "":
			apiError(w, 404, triagetype.CodeNotFound, "id", "no task")
		case "queued":
			reply(w, 200, task(r.PathValue("id"), "cancelled"))
		case "executing":
			reply(w, 200, strings.Replace(task(r.PathValue("id"), "executing"), `"trace_id"`, `"cancel_requested":true,"trace_id"`, 1))
		default:
			apiError(w, 409, triagetype.CodeConflict, "", "task "+r.PathValue("id")+" is "+tasks[r.PathValue("id")])
		}
	})
	mux.HandleFunc("POST /api/v1/tasks/{id}/retry", func(w http.ResponseWriter, r *http.Request) {
		if tasks[r.PathValue("id")] != "dead_letter" {
			apiError(w, 409, triagetype.CodeConflict, "", "not dead")
			return
		}
		reply(w, 200, task(r.PathValue("id"), "queued"))
	})
	mux.HandleFunc("DELETE /api/v1/tasks/{id}", func(w http.ResponseWriter, r *http.Request) {
		switch tasks[r.PathValue("id")] {
		case "":
			apiError(w, 404, triagetype.CodeNotFound, "id", "no task")
		case "queued":
			apiError(w, 409, triagetype.CodeConflict, "", "not terminal")
		default:
			w.WriteHeader(204)
		}
	})
	mux.HandleFunc("DELETE /api/v1/tasks", func(w http.ResponseWriter, r *http.Request) {
		if _, err := time.Parse(time.RFC3339, r.URL.Query().Get("older_than")); err != nil {
			apiError(w, 400, triagetype.CodeInvalidField, "older_than", "older_than: bad")
			return
		}
		reply(w, 202, `{"id":"01C","older_than":"`+r.URL.Query().Get("older_than")+`","state":"running","deleted":0}`)
	})
	polls := 0
	mux.HandleFunc("GET /api/v1/cleanups/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != "01C" {
			apiError(w, 404, triagetype.CodeNotFound, "id", "no cleanup")
			return
		}
		if polls++; polls < 2 {
			reply(w, 200, `{"id":"01C","state":"running","deleted":7}`)
			return
		}
		reply(w, 200, `{"id":"01C","state":"done","deleted":42}`)
	})
	mux.HandleFunc("GET /api/v1/stats", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, `{"queues":{"high":{"depth":3,"in_flight":1,"delayed":0,"dlq_depth":2,"oldest_age_seconds":75.4},"medium":{"depth":0,"in_flight":0,"delayed":0,"dlq_depth":0,"oldest_age_seconds":0},"low":{"depth":10,"in_flight":0,"delayed":4,"dlq_depth":0,"oldest_age_seconds":0.25}},
"statuses":{"scheduled":0,"queued":13,"executing":1,"retrying":0,"completed":50,"cancelled":0,"dead_letter":2},
"types":{"echo":{"queued":13,"completed":50},"fail":{"dead_letter":2,"executing":1}},
"throughput":{"completed_last_minute":9,"failed_last_minute":1},"workers":{"active":1,"draining":1,"dead":1,"capacity":12,"used":5},
"keys":{"top":[{"key":"acme","running":2,"starts_per_second":0.5,"finishes_per_second":0.4},{"key":"free","running":1,"starts_per_second":3,"finishes_per_second":3}],"other_running":2,
"limits":[{"controls":{"key":"acme","paused":false,"max_concurrency":2},"running":2},{"controls":{"type":"call","key":"beta","paused":false,"rate_limit_per_second":0.5},"running":0,"rate_use":{"starts":1,"limit":1,"window_seconds":2}}],
"other_limits":3,"other_limits_running":1},"generated_at":"2026-01-02T03:04:05Z"}`)
	})
	mux.HandleFunc("GET /api/v1/workers", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, `{"workers":[
{"id":"w-old","kind":"worker","state":"dead","started_at":"2026-01-02T02:00:00Z","last_heartbeat_at":"2026-01-02T03:03:00Z","heartbeat_seconds":10,"capacity":16,"busy":2},
{"id":"w-mid","kind":"lambda","state":"draining","started_at":"2026-01-02T03:00:00Z","last_heartbeat_at":"2026-01-02T03:04:01Z","heartbeat_seconds":10,"capacity":4,"busy":4,"keys":{"acme":2,"b":1,"c":1,"d":1},"keys_other":2},
{"id":"w-new","kind":"dev","state":"active","started_at":"2026-01-02T03:04:00Z","last_heartbeat_at":"2026-01-02T03:04:03Z","heartbeat_seconds":10,"capacity":8,"busy":1}],
"generated_at":"2026-01-02T03:04:05Z"}`)
	})
	pause := func(paused bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			typ := r.URL.Query().Get("type")
			b, _ := json.Marshal(map[string]any{"type": typ, "paused": paused})
			if typ == "" {
				b, _ = json.Marshal(map[string]any{"paused": paused})
			}
			reply(w, 200, string(b))
		}
	}
	mux.HandleFunc("POST /api/v1/control/pause", pause(true))
	mux.HandleFunc("POST /api/v1/control/resume", pause(false))
	mux.HandleFunc("GET /api/v1/control", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, `{"controls":[{"paused":false},{"type":"echo","paused":true,"rate_limit_per_second":2.5,"max_concurrency":4}]}`)
	})
	mux.HandleFunc("PUT /api/v1/control/types/{type}", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Rate float64 `json:"rate_limit_per_second"`
			Conc int     `json:"max_concurrency"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		b, _ := json.Marshal(map[string]any{"type": r.PathValue("type"), "paused": false, "rate_limit_per_second": req.Rate, "max_concurrency": req.Conc})
		reply(w, 200, string(b))
	})
	mux.HandleFunc("GET /api/v1/dlq", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("priority") == "medium" {
			reply(w, 200, `{"messages":[]}`)
			return
		}
		reply(w, 200, `{"messages":[{"priority":"low","message_id":"m-1","task_id":"dead","type":"fail","reason":"handler failed: boom","body":"{\"id\":\"dead\",\"v\":3,\"p\":\"low\"}","sent_at":"2026-01-02T03:04:05Z","receive_count":1},{"priority":"high","message_id":"m-2","reason":"unparseable body","body":"garbage","sent_at":"2026-01-02T03:04:06Z","receive_count":5}]}`)
	})
	mux.HandleFunc("POST /api/v1/dlq/replay", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, `{"replayed":3,"skipped":1}`)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		line := r.Method + " " + r.URL.Path
		if r.URL.RawQuery != "" {
			line += "?" + r.URL.RawQuery
		}
		if len(body) > 0 {
			line += " " + string(body)
		}
		f.mu.Lock()
		f.reqs = append(f.reqs, line)
		f.mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer tok" {
			apiError(w, 401, triagetype.CodeUnauthorized, "", "missing or invalid bearer token")
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// refuse reports whether key was already throttled once, marking it.
func (f *fakeAPI) refuse(key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.throttled == nil {
		f.throttled = map[string]bool{}
	}
	seen := f.throttled[key]
	f.throttled[key] = true
	return seen
}

func (f *fakeAPI) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.reqs...)
}

// run executes the CLI against a fresh fake API and returns stdout,
// stderr, the exit code and the requests the API saw.
func run(t *testing.T, stdin string, args ...string) (string, string, int, []string) {
	t.Helper()
	f := &fakeAPI{}
	srv := httptest.NewServer(f.handler())
	t.Cleanup(srv.Close)
	var out, errOut bytes.Buffer
	_, root := newRoot(&out, &errOut)
	root.SetArgs(append([]string{"--url", srv.URL, "--token", "tok"}, args...))
	root.SetIn(strings.NewReader(stdin))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := root.ExecuteContext(ctx)
	if err != nil {
		fmt.Fprintln(&errOut, "triage:", err)
	}
	return out.String(), errOut.String(), exitCode(err), f.requests()
}

// ndjson writes lines to a temporary file and returns its path.
func ndjson(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tasks.ndjson")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func manyLines(n int, format string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(format, i)
	}
	return out
}

func TestCommands(t *testing.T) {
	big := ndjson(t, manyLines(250, `{"type":"echo","idempotency_key":"k%d"}`)...)
	mixed := ndjson(t,
		`{"type":"echo","idempotency_key":"k1"}`,
		``,
		`{"type":"bad","idempotency_key":"k2"}`,
		`{"type":"echo","idempotency_key":"dup3"}`,
	)
	tests := []struct {
		name     string
		stdin    string
		args     []string
		code     int
		out      []string // substrings of stdout
		exactOut string   // when set, stdout must equal it
		emptyOut bool     // stdout must be empty
		errOut   []string // substrings of stderr
		reqs     []string // substrings of the requests, in order
		nReqs    int      // when set, the number of requests
	}{
		{name: "get", args: []string{"get", "done"}, code: 0,
			out: []string{"id:        done", "status:    completed", `result:    {"x":1}`}, reqs: []string{"GET /api/v1/tasks/done"}},
		{name: "get running", args: []string{"get", "busy"}, code: 0,
			out: []string{"status:    executing", "progress:  40% rows (attempt 2, 2026-01-02 03:04:05)", "checkpoint: 9 bytes"}},
		{name: "get unknown", args: []string{"get", "nope"}, code: exitNotFound, errOut: []string{"404 not_found"}},
		{name: "get without id", args: []string{"get"}, code: exitUsage, nReqs: -1},
		{name: "unknown command", args: []string{"frobnicate"}, code: exitUsage, errOut: []string{`unknown command "frobnicate"`}},
		{name: "bad flag", args: []string{"list", "--nope"}, code: exitUsage},
		{name: "bad token", args: []string{"--token", "wrong", "get", "done"}, code: exitAuth},

		{name: "submit", args: []string{"submit", "--type", "echo", "--payload", `{"x":1}`, "--priority", "high", "--max-attempts", "5"}, code: 0,
			out: []string{"created new1 (queued, low)"}, reqs: []string{`POST /api/v1/tasks {"type":"echo","payload":{"x":1},"priority":"high","max_attempts":5}`}},
		{name: "submit ids", args: []string{"submit", "--type", "echo", "--ids"}, exactOut: "new1\n"},
		{name: "submit rejected", args: []string{"submit", "--type", "bad"}, code: exitUsage, errOut: []string{"field priority"}},
		{name: "submit no type", args: []string{"submit"}, code: exitUsage, nReqs: -1},
		{name: "submit bad payload", args: []string{"submit", "--type", "echo", "--payload", "{"}, code: exitUsage, nReqs: -1},
		{name: "submit file and type", args: []string{"submit", "--file", "x", "--type", "echo"}, code: exitUsage, errOut: []string{"--type cannot be combined with --file"}},

		{name: "submit file in chunks", args: []string{"submit", "--file", big}, code: 0,
			exactOut: "submitted 250 tasks: 250 created, 0 existing, 0 failed\n", nReqs: 3,
			reqs: []string{"POST /api/v1/tasks/batch"}},
		{name: "submit file ids in input order", args: []string{"submit", "--file", big, "--ids"}, code: 0,
			exactOut: strings.Join(manyLines(250, "id-k%d"), "\n") + "\n",
			errOut:   []string{"submitted 250 tasks: 250 created"}},
		{name: "submit file partly failed", args: []string{"submit", "--file", mixed}, code: exitError,
			out:    []string{"submitted 3 tasks: 1 created, 1 existing, 1 failed"},
			errOut: []string{"line 3: 400 invalid_field: priority: unknown priority", "1 of 3 tasks failed"}},
		{name: "submit file partly failed ids", args: []string{"submit", "--file", mixed, "--ids"}, code: exitError,
			exactOut: "id-k1\nid-dup3\n"},
		{name: "submit file json", args: []string{"submit", "--file", mixed, "--json"}, code: exitError,
			out: []string{`"created": 1`, `"existing": 1`, `"failed": 1`, `"line": 3`, `"field": "priority"`, `"line": 4`, `"status": 200`}},
		{name: "submit stdin", stdin: "{\"type\":\"echo\",\"idempotency_key\":\"s1\"}\n{\"type\":\"echo\",\"idempotency_key\":\"s2\"}\n",
			args: []string{"submit", "--file", "-", "--ids"}, exactOut: "id-s1\nid-s2\n"},
		{name: "submit file retries throttled items", args: []string{"submit", "--file", ndjson(t, `{"type":"throttle","idempotency_key":"t1"}`, `{"type":"echo","idempotency_key":"e1"}`)},
			code: 0, out: []string{"2 created"}, nReqs: 2,
			reqs: []string{`{"tasks":[{"type":"throttle","idempotency_key":"t1"},{"type":"echo","idempotency_key":"e1"}]}`, `{"tasks":[{"type":"throttle","idempotency_key":"t1"}]}`}},
		{name: "submit file bad lines send nothing", args: []string{"submit", "--file", ndjson(t, `{"type":"echo"}`, `{"type":`, `{"type":"echo","colour":"red"}`, `{"payload":1}`)},
			code: exitUsage, nReqs: -1, errOut: []string{"nothing was sent", "line 2:", `line 3: json: unknown field "colour"`, `line 4: "type" is required`}},
		{name: "submit file unauthorized stops", args: []string{"submit", "--file", ndjson(t, `{"type":"unauthorized"}`)}, code: exitAuth},
		{name: "submit empty file", args: []string{"submit", "--file", ndjson(t)}, code: exitUsage},
		{name: "submit missing file", args: []string{"submit", "--file", "/nonexistent/x.ndjson"}, code: exitUsage},

		{name: "wait completed", args: []string{"wait", "done"}, code: 0, out: []string{"status:    completed"}},
		{name: "wait dead", args: []string{"wait", "dead"}, code: exitIncomplete, out: []string{"error:     boom"}},
		{name: "wait several", args: []string{"wait", "done", "dead"}, code: exitIncomplete,
			out: []string{"ID", "done", "completed", "dead", "dead_letter", "boom", "1 of 2 completed"}},
		{name: "wait stdin", stdin: "done\ndone gone\n", args: []string{"wait", "-"}, code: exitIncomplete,
			out: []string{"2 of 3 completed", "cancelled"}, reqs: []string{"/tasks/done", "/tasks/done", "/tasks/gone"}},
		{name: "wait stdin empty", stdin: "\n", args: []string{"wait", "-"}, code: exitUsage},
		{name: "wait unknown", args: []string{"wait", "nope"}, code: exitNotFound},
		{name: "wait json", args: []string{"wait", "done", "gone", "--json"}, code: exitIncomplete, out: []string{`"status": "cancelled"`}},

		{name: "list one page", args: []string{"list", "--type", "echo", "--status", "queued", "--priority", "low", "--limit", "2"}, code: 0,
			out:    []string{"ID", "TYPE", "STATUS", "a1", "a2", "2026-01-02 03:04:05", "1/3"},
			errOut: []string{"more tasks: add --cursor c1"},
			reqs:   []string{"GET /api/v1/tasks?limit=2&priority=low&status=queued&type=echo"}},
		{name: "list all", args: []string{"list", "--all"}, code: 0, out: []string{"a1", "a2", "a3"}, nReqs: 2,
			reqs: []string{"GET /api/v1/tasks?limit=100", "GET /api/v1/tasks?cursor=c1&limit=100"}},
		{name: "list all json", args: []string{"list", "--all", "--json"}, code: 0, out: []string{`"id": "a3"`, `"tasks": [`}},
		{name: "list bad status", args: []string{"list", "--status", "nope"}, code: exitUsage, errOut: []string{"field status"}},
		{name: "list bad limit", args: []string{"list", "--limit", "0"}, code: exitUsage, nReqs: -1},

		{name: "cancel", args: []string{"cancel", "queued"}, exactOut: "cancelled queued\n", reqs: []string{"POST /api/v1/tasks/queued/cancel"}},
		{name: "cancel executing", args: []string{"cancel", "busy"}, out: []string{"cancel requested for busy (executing)"}},
		{name: "cancel terminal", args: []string{"cancel", "done"}, code: exitConflict, errOut: []string{"409 conflict"}},
		{name: "cancel unknown", args: []string{"cancel", "nope"}, code: exitNotFound},
		{name: "retry", args: []string{"retry", "dead"}, out: []string{"retrying dead: queued on low, attempts reset"}, reqs: []string{"POST /api/v1/tasks/dead/retry"}},
		{name: "retry not dead", args: []string{"retry", "queued"}, code: exitConflict},
		{name: "delete", args: []string{"delete", "done"}, exactOut: "deleted done\n", reqs: []string{"DELETE /api/v1/tasks/done"}},
		{name: "delete json", args: []string{"delete", "done", "--json"}, out: []string{`"deleted": true`}},
		{name: "delete not terminal", args: []string{"delete", "queued"}, code: exitConflict},
		{name: "delete unknown", args: []string{"delete", "nope"}, code: exitNotFound},
		{name: "cleanup time", args: []string{"cleanup", "--older-than", "2026-01-02T00:00:00+01:00"}, code: 0,
			exactOut: "cleanup 01C started: deleting tasks that finished before 2026-01-01T23:00:00Z\ncleanup 01C running: 0 tasks deleted\n",
			reqs:     []string{"DELETE /api/v1/tasks?older_than=2026-01-01T23%3A00%3A00Z"}},
		{name: "cleanup age", args: []string{"cleanup", "--older-than", "7d", "--json"}, code: 0, out: []string{`"state": "running"`}, reqs: []string{"DELETE /api/v1/tasks?older_than="}},
		{name: "cleanup wait", args: []string{"cleanup", "--older-than", "7d", "--wait"}, code: 0, out: []string{"cleanup 01C done: 42 tasks deleted"},
			reqs: []string{"DELETE /api/v1/tasks?older_than=", "GET /api/v1/cleanups/01C"}},
		{name: "cleanup status", args: []string{"cleanup", "--status", "nope"}, code: exitNotFound},
		{name: "cleanup both", args: []string{"cleanup", "--status", "01C", "--older-than", "7d"}, code: exitUsage, nReqs: -1},
		{name: "cleanup missing", args: []string{"cleanup"}, code: exitUsage, nReqs: -1},
		{name: "cleanup bad", args: []string{"cleanup", "--older-than", "yesterday"}, code: exitUsage, nReqs: -1},

		{name: "stats", args: []string{"stats"}, code: 0,
			out: []string{"QUEUE", "high    3", "1m15s", "250ms", "STATUS", "queued       13", "TYPE", "echo", "fail", "DEAD_LETTER", "last minute: 9 completed, 1 failed"}},
		{name: "stats json", args: []string{"stats", "--json"}, out: []string{`"dlq_depth": 2`}},
		{name: "stats workers", args: []string{"stats"}, out: []string{"workers: 1 active, 1 draining, 1 dead; 5 of 12 slots busy"}},
		{name: "stats keys", args: []string{"stats"}, out: []string{"KEY", "STARTS/S", "acme          2        0.5       0.4", "(other keys)  2", "KEYED LIMIT", "key=acme", "call key=beta",
			"1 of 1 in 2s", "(3 more)"}},
		{name: "workers", args: []string{"workers"}, code: 0, reqs: []string{"GET /api/v1/workers"},
			out: []string{"ID", "LAST HEARTBEAT", "w-old  worker  dead      2/16", "1m5s ago", "w-mid  lambda  draining  4/4", "4s ago",
				"w-new  dev     active    1/8   2026-01-02 03:04:00  2s ago", "KEYS", "acme:2 b:1 c:1 +3", "workers: 1 active, 1 draining, 1 dead; 5 of 12 slots busy"}},
		{name: "workers json", args: []string{"workers", "--json"}, out: []string{`"state": "draining"`, `"heartbeat_seconds": 10`}},
		{name: "workers args", args: []string{"workers", "extra"}, code: exitUsage, nReqs: -1},
		{name: "pause", args: []string{"pause"}, exactOut: "paused all task types\n", reqs: []string{"POST /api/v1/control/pause"}},
		{name: "pause type", args: []string{"pause", "--type", "echo"}, exactOut: "paused task type echo\n", reqs: []string{"POST /api/v1/control/pause?type=echo"}},
		{name: "resume type json", args: []string{"resume", "--type", "echo", "--json"}, out: []string{`"paused": false`}, reqs: []string{"POST /api/v1/control/resume?type=echo"}},
		{name: "limits list", args: []string{"limits"}, out: []string{"TYPE", "(global)", "echo", "2.5", "4"}, reqs: []string{"GET /api/v1/control"}},
		{name: "limits set both", args: []string{"limits", "fail", "--rate", "1.5", "--max-concurrency", "2"}, out: []string{"fail", "1.5", "2"},
			reqs: []string{"GET /api/v1/control", `PUT /api/v1/control/types/fail {"rate_limit_per_second":1.5,"max_concurrency":2}`}},
		{name: "limits keeps the other", args: []string{"limits", "echo", "--max-concurrency", "8"},
			reqs: []string{`PUT /api/v1/control/types/echo {"rate_limit_per_second":2.5,"max_concurrency":8}`}},
		{name: "limits show type", args: []string{"limits", "echo"}, out: []string{"echo", "true", "2.5"}, nReqs: 1},
		{name: "limits without type", args: []string{"limits", "--rate", "1"}, code: exitUsage, nReqs: -1},
		{name: "dlq list", args: []string{"dlq", "list", "--priority", "low", "--limit", "5"},
			out:  []string{"PRIORITY", "m-1", "dead", "fail", "handler failed: boom", "m-2", "unparseable body"},
			reqs: []string{"GET /api/v1/dlq?limit=5&priority=low"}},
		{name: "dlq list empty", args: []string{"dlq", "list", "--priority", "medium"}, emptyOut: true, errOut: []string{"no messages"}},
		{name: "dlq list json", args: []string{"dlq", "list", "--json"}, out: []string{`"message_id": "m-2"`}},
		{name: "dlq replay", args: []string{"dlq", "replay", "--priority", "high", "--type", "echo", "--limit", "10"},
			exactOut: "replayed 3 tasks, skipped 1 message\n",
			reqs:     []string{`POST /api/v1/dlq/replay {"priority":"high","type":"echo","limit":10}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code, reqs := run(t, tt.stdin, tt.args...)
			if code != tt.code {
				t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, out, errOut)
			}
			if tt.exactOut != "" || tt.emptyOut {
				if out != tt.exactOut {
					t.Errorf("stdout = %q, want %q", out, tt.exactOut)
				}
			}
			for _, s := range tt.out {
				if !strings.Contains(out, s) {
					t.Errorf("stdout lacks %q:\n%s", s, out)
				}
			}
			for _, s := range tt.errOut {
				if !strings.Contains(errOut, s) {
					t.Errorf("stderr lacks %q:\n%s", s, errOut)
				}
			}
			switch {
			case tt.nReqs == -1 && len(reqs) != 0:
				t.Errorf("sent %d requests, want none: %v", len(reqs), reqs)
			case tt.nReqs > 0 && len(reqs) != tt.nReqs:
				t.Errorf("sent %d requests, want %d: %v", len(reqs), tt.nReqs, reqs)
			}
			i := 0
			for _, want := range tt.reqs {
				for i < len(reqs) && !strings.Contains(reqs[i], want) {
					i++
				}
				if i == len(reqs) {
					t.Errorf("no request (in order) containing %q; requests:\n%s", want, strings.Join(reqs, "\n"))
					break
				}
				i++
			}
		})
	}
}

func TestProgressBar(t *testing.T) {
	for _, tt := range []struct {
		n, total int
		want     string
	}{
		{0, 1000, "[          ] 0/1000"},
		{512, 1000, "[#####     ] 512/1000"},
		{1000, 1000, "[##########] 1000/1000"},
	} {
		if got := progressBar(tt.n, tt.total, 10); got != tt.want {
			t.Errorf("progressBar(%d, %d) = %q, want %q", tt.n, tt.total, got, tt.want)
		}
	}
	// Not a terminal: nothing is drawn.
	var b bytes.Buffer
	p := newProgress(&b, 10)
	p.add(5)
	p.done()
	if b.Len() != 0 {
		t.Fatalf("progress drew %q on a buffer", b.String())
	}
}

func TestParseOlderThan(t *testing.T) {
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"72h":                  now.Add(-72 * time.Hour),
		"7d":                   now.Add(-7 * 24 * time.Hour),
		"90m":                  now.Add(-90 * time.Minute),
		"2026-01-02T03:04:05Z": time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	} {
		got, err := parseOlderThan(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("parseOlderThan(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-5h", "0s", "xd", "soon"} {
		if _, err := parseOlderThan(in, now); err == nil {
			t.Errorf("parseOlderThan(%q) accepted", in)
		}
	}
}
