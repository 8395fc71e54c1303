package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/api"
	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/app/apiapp"
	"github.com/triagehq/triage/internal/app/consumerapp"
	"github.com/triagehq/triage/internal/auth"
	"github.com/triagehq/triage/internal/cleanup"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/handler/demo"
	"github.com/triagehq/triage/triagetype"
)

// fix2 is a fixture that keeps the app, for tests that also run a consumer.
type fix2 struct {
	*fixture
	app *app.App
}

func newFix2(t *testing.T, extra map[string]string, opt api.Options) *fix2 {
	t.Helper()
	env := stacktest.New(t)
	a := env.App(t, extra)
	toks, err := auth.Parse("adm:admin,sub:submit,ro:read")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(apiapp.Handler(a, toks, opt))
	t.Cleanup(srv.Close)
	return &fix2{fixture: &fixture{srv: srv, env: env}, app: a}
}

func (f *fix2) consume(t *testing.T) (stop func()) {
	t.Helper()
	reg := handler.NewRegistry()
	demo.Register(reg)
	// UnhandledAfter: a type with no handler is dead-lettered at once, as
	// TestDLQListAndReplay wants (no other worker will come for it).
	c := consumerapp.New(f.app, reg, dispatch.Options{PollWait: time.Second, EmptyBackoff: 100 * time.Millisecond, Lease: 5 * time.Second, LeaseMargin: time.Second, DrainTimeout: 2 * time.Second, UnhandledAfter: time.Nanosecond}, dispatch.Deps{})
	return stacktest.Run(t, c)
}

func (f *fix2) waitStatus(t *testing.T, id, want string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, got := f.do(t, "GET", "/api/v1/tasks/"+id, "adm", "")
		if got["status"] == want {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s is %v, want %s", id, got["status"], want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func submitID(t *testing.T, f *fixture, body string) string {
	t.Helper()
	code, got := f.do(t, "POST", "/api/v1/tasks", "adm", body)
	if code != 201 {
		t.Fatalf("submit %s = %d %v", body, code, got)
	}
	return got["id"].(string)
}

func TestBatchSubmit(t *testing.T) {
	f := newFix2(t, nil, api.Options{})
	code, body := f.do(t, "POST", "/api/v1/tasks/batch", "sub", `{"tasks":[
		{"type":"echo","priority":"high"},
		{"type":"echo","priority":"nope"},
		{"type":"echo","idempotency_key":"b1"},
		{"type":"echo","idempotency_key":"b1"}]}`)
	if code != 200 {
		t.Fatalf("batch = %d %v", code, body)
	}
	res := body["results"].([]any)
	status := func(i int) float64 { return res[i].(map[string]any)["status"].(float64) }
	if len(res) != 4 || status(0) != 201 || status(1) != 400 || status(2) != 201 || status(3) != 200 {
		t.Fatalf("results %v", res)
	}
	if e := res[1].(map[string]any)["error"].(map[string]any); e["field"] != "tasks[1].priority" {
		t.Fatalf("item error %v", e)
	}
	t2 := res[2].(map[string]any)["task"].(map[string]any)
	t3 := res[3].(map[string]any)["task"].(map[string]any)
	if t2["id"] != t3["id"] {
		t.Fatalf("same idempotency key in one batch gave %v and %v", t2["id"], t3["id"])
	}
	many := `{"tasks":[` + strings.TrimSuffix(strings.Repeat(`{"type":"echo"},`, 101), ",") + `]}`
	for _, b := range []string{`{"tasks":[]}`, many} {
		code, body = f.do(t, "POST", "/api/v1/tasks/batch", "sub", b)
		if e, _ := body["error"].(map[string]any); code != 400 || e["field"] != "tasks" {
			t.Fatalf("batch of %d bytes = %d %v", len(b), code, body)
		}
	}
	if code, _ := f.do(t, "POST", "/api/v1/tasks/batch", "ro", `{"tasks":[{"type":"x"}]}`); code != 403 {
		t.Fatalf("read token batch = %d", code)
	}
}

func TestIdempotencyRaceOverHTTP(t *testing.T) {
	f := newFix2(t, nil, api.Options{})
	const n = 20
	var wg sync.WaitGroup
	codes := make([]int, n)
	ids := make([]any, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, b := f.do(t, "POST", "/api/v1/tasks", "sub", `{"type":"echo","idempotency_key":"race-1"}`)
			codes[i], ids[i] = c, b["id"]
		}()
	}
	wg.Wait()
	created := 0
	for i := range n {
		if codes[i] == 201 {
			created++
		} else if codes[i] != 200 {
			t.Fatalf("submit %d: status %d", i, codes[i])
		}
		if ids[i] != ids[0] {
			t.Fatalf("submit %d got task %v, submit 0 got %v", i, ids[i], ids[0])
		}
	}
	if created != 1 {
		t.Fatalf("%d submits created a task, want exactly 1", created)
	}
	_, list := f.do(t, "GET", "/api/v1/tasks?type=echo", "ro", "")
	if got := len(list["tasks"].([]any)); got != 1 {
		t.Fatalf("%d echo tasks exist, want 1", got)
	}
}

// TestPaginationWalksEveryTaskOnce walks 11 pages of each listing (315
// tasks, 30 a page: the last page short) and sees every task once.
func TestPaginationWalksEveryTaskOnce(t *testing.T) {
	f := newFix2(t, nil, api.Options{})
	const n, limit = 315, 30
	want := map[string]bool{}
	for start := 0; start < n; start += 100 {
		var items []string
		for i := start; i < min(start+100, n); i++ {
			items = append(items, fmt.Sprintf(`{"type":"page","priority":"%s"}`, triagetype.Priorities()[i%3]))
		}
		code, body := f.do(t, "POST", "/api/v1/tasks/batch", "sub", `{"tasks":[`+strings.Join(items, ",")+`]}`)
		if code != 200 {
			t.Fatalf("batch = %d", code)
		}
		for _, r := range body["results"].([]any) {
			want[r.(map[string]any)["task"].(map[string]any)["id"].(string)] = true
		}
	}
	for _, query := range []string{"type=page", "status=queued", "", "priority=medium"} {
		seen := map[string]int{}
		cursor := ""
		pages := 0
		for {
			path := fmt.Sprintf("/api/v1/tasks?limit=%d&%s", limit, query)
			if cursor != "" {
				path += "&cursor=" + cursor
			}
			code, body := f.do(t, "GET", path, "ro", "")
			if code != 200 {
				t.Fatalf("%s: %d %v", path, code, body)
			}
			pages++
			for _, tk := range body["tasks"].([]any) {
				seen[tk.(map[string]any)["id"].(string)]++
			}
			next, _ := body["next_cursor"].(string)
			if next == "" {
				break
			}
			cursor = next
			if pages > n/limit+1 {
				t.Fatalf("%s: more than %d pages", query, n/limit+1)
			}
		}
		expect := n
		if query == "priority=medium" {
			expect = n / 3
		}
		dups := 0
		for id, c := range seen {
			if c != 1 {
				dups++
			}
			if !want[id] {
				t.Fatalf("%s: unknown task %s", query, id)
			}
		}
		t.Logf("%q: %d tasks in %d pages", query, len(seen), pages)
		if len(seen) != expect || dups != 0 {
			t.Fatalf("%q: walked %d distinct tasks (%d seen more than once), want %d each once", query, len(seen), dups, expect)
		}
	}
}

func TestListErrors(t *testing.T) {
	f := newFix2(t, nil, api.Options{})
	for q, field := range map[string]string{"status=done": "status", "priority=urgent": "priority", "limit=0": "limit", "limit=5000": "limit", "cursor=garbage": "cursor"} {
		code, body := f.do(t, "GET", "/api/v1/tasks?"+q, "ro", "")
		if e, _ := body["error"].(map[string]any); code != 400 || e["field"] != field {
			t.Errorf("?%s = %d %v, want 400 naming %s", q, code, body, field)
		}
	}
	if code, _ := f.do(t, "GET", "/api/v1/tasks", "", ""); code != 401 {
		t.Errorf("list without token = %d", code)
	}
}

func TestCancelRetryDelete(t *testing.T) {
	f := newFix2(t, nil, api.Options{})
	queued := submitID(t, f.fixture, `{"type":"echo"}`)
	if code, body := f.do(t, "POST", "/api/v1/tasks/"+queued+"/cancel", "sub", ""); code != 403 {
		t.Fatalf("cancel with a submit token = %d %v", code, body)
	}
	code, body := f.do(t, "POST", "/api/v1/tasks/"+queued+"/cancel", "adm", "")
	if code != 200 || body["status"] != "cancelled" {
		t.Fatalf("cancel = %d %v", code, body)
	}
	if code, _ := f.do(t, "POST", "/api/v1/tasks/"+queued+"/cancel", "adm", ""); code != 409 {
		t.Fatalf("second cancel = %d, want 409", code)
	}
	if code, _ := f.do(t, "POST", "/api/v1/tasks/01ARZ3NDEKTSV4RRFFQ69G5FAV/cancel", "adm", ""); code != 404 {
		t.Fatalf("cancel unknown = %d", code)
	}
	// Retry applies to dead letters only.
	if code, _ := f.do(t, "POST", "/api/v1/tasks/"+queued+"/retry", "adm", ""); code != 409 {
		t.Fatalf("retry cancelled = %d, want 409", code)
	}
	dead := submitID(t, f.fixture, `{"type":"fail","priority":"high","payload":{"times":1,"permanent":true}}`)
	running := submitID(t, f.fixture, `{"type":"sleep","priority":"high","payload":{"ms":20000},"timeout_seconds":60}`)
	f.consume(t)
	f.waitStatus(t, dead, "dead_letter")
	f.waitStatus(t, running, "executing")
	// An executing task gets a cancel request, which its worker honours.
	code, body = f.do(t, "POST", "/api/v1/tasks/"+running+"/cancel", "adm", "")
	if code != 200 || body["cancel_requested"] != true || body["status"] != "executing" {
		t.Fatalf("cancel executing = %d %v", code, body)
	}
	if code, _ := f.do(t, "DELETE", "/api/v1/tasks/"+running, "adm", ""); code != 409 {
		t.Fatalf("delete executing = %d, want 409", code)
	}
	f.waitStatus(t, running, "cancelled")
	code, body = f.do(t, "POST", "/api/v1/tasks/"+dead+"/retry", "adm", "")
	if code != 200 || body["status"] != "queued" || body["attempts"] != 0.0 || body["error"] != nil {
		t.Fatalf("retry = %d %v", code, body)
	}
	// It runs again: attempts restart at 1, so fail {times:1} fails again,
	// and the history now holds both runs.
	again := f.waitStatus(t, dead, "dead_letter")
	if h, _ := again["history"].([]any); again["attempts"] != 1.0 || len(h) != 2 {
		t.Fatalf("after retry: attempts %v history %v", again["attempts"], again["history"])
	}
	// Delete: terminal only.
	if code, _ := f.do(t, "DELETE", "/api/v1/tasks/"+queued, "adm", ""); code != 204 {
		t.Fatalf("delete cancelled = %d", code)
	}
	if code, _ := f.do(t, "GET", "/api/v1/tasks/"+queued, "adm", ""); code != 404 {
		t.Fatalf("get deleted = %d", code)
	}
	if code, _ := f.do(t, "DELETE", "/api/v1/tasks/"+queued, "adm", ""); code != 404 {
		t.Fatalf("delete again = %d", code)
	}
}

func TestCleanup(t *testing.T) {
	f := newFix2(t, nil, api.Options{})
	a := submitID(t, f.fixture, `{"type":"echo"}`)
	b := submitID(t, f.fixture, `{"type":"echo"}`)
	keep := submitID(t, f.fixture, `{"type":"echo"}`)
	for _, id := range []string{a, b} {
		f.do(t, "POST", "/api/v1/tasks/"+id+"/cancel", "adm", "")
	}
	cut := time.Now().Add(time.Second).UTC().Format(time.RFC3339)
	code, body := f.do(t, "DELETE", "/api/v1/tasks?older_than="+cut, "adm", "")
	id, _ := body["id"].(string)
	if code != 202 || body["state"] != "running" || id == "" {
		t.Fatalf("cleanup = %d %v; want 202 with a running job", code, body)
	}
	// One runs at a time; a read token cannot start one.
	if code, body := f.do(t, "DELETE", "/api/v1/tasks?older_than="+cut, "adm", ""); code != 409 || !strings.Contains(fmt.Sprint(body), id) {
		t.Fatalf("a second cleanup = %d %v; want 409 naming %s", code, body, id)
	}
	if code, _ := f.do(t, "DELETE", "/api/v1/tasks?older_than="+cut, "ro", ""); code != 403 {
		t.Fatalf("cleanup with a read token = %d; want 403", code)
	}
	// The promoter's runner does the work.
	if _, err := cleanup.NewRunner(f.app.Store, cleanup.Options{Owner: "test"}).Run(t.Context(), time.Minute); err != nil {
		t.Fatal(err)
	}
	if code, body := f.do(t, "GET", "/api/v1/cleanups/"+id, "ro", ""); code != 200 || body["state"] != "done" || body["deleted"] != 2.0 {
		t.Fatalf("cleanup status = %d %v; want done, 2 deleted", code, body)
	}
	for path, want := range map[string]int{"/api/v1/cleanups/01ZZZZZZZZZZZZZZZZZZZZZZZZ": 404, "/api/v1/cleanups/" + strings.Repeat("x", 2000): 400} {
		if code, _ := f.do(t, "GET", path, "ro", ""); code != want {
			t.Fatalf("GET %.40s = %d; want %d", path, code, want)
		}
	}
	for _, id := range []string{a, b} {
		if code, _ := f.do(t, "GET", "/api/v1/tasks/"+id, "adm", ""); code != 404 {
			t.Fatalf("cleaned-up task %s = %d; want 404", id, code)
		}
	}
	if code, _ := f.do(t, "GET", "/api/v1/tasks/"+keep, "adm", ""); code != 200 {
		t.Fatalf("a queued task was cleaned up: %d", code)
	}
	for q, want := range map[string]int{"": 400, "?older_than=yesterday": 400} {
		code, body := f.do(t, "DELETE", "/api/v1/tasks"+q, "adm", "")
		if e, _ := body["error"].(map[string]any); code != want || e["field"] != "older_than" {
			t.Fatalf("cleanup%s = %d %v", q, code, body)
		}
	}
}

func TestControlsEndpoints(t *testing.T) {
	f := newFix2(t, nil, api.Options{})
	code, body := f.do(t, "POST", "/api/v1/control/pause?type=mail", "adm", "")
	if code != 200 || body["paused"] != true || body["type"] != "mail" {
		t.Fatalf("pause = %d %v", code, body)
	}
	code, body = f.do(t, "PUT", "/api/v1/control/types/mail", "adm", `{"rate_limit_per_second":5,"max_concurrency":2}`)
	if code != 200 || body["rate_limit_per_second"] != 5.0 || body["max_concurrency"] != 2.0 || body["paused"] != true {
		t.Fatalf("limits = %d %v", code, body)
	}
	code, body = f.do(t, "POST", "/api/v1/control/resume?type=mail", "adm", "")
	if code != 200 || body["paused"] != false {
		t.Fatalf("resume = %d %v", code, body)
	}
	code, body = f.do(t, "GET", "/api/v1/control", "ro", "")
	if cs, _ := body["controls"].([]any); code != 200 || len(cs) != 2 {
		t.Fatalf("controls = %d %v", code, body)
	}
	for b, field := range map[string]string{`{"rate_limit_per_second":-1}`: "rate_limit_per_second", `{"max_concurrency":"x"}`: "max_concurrency", `{"burst":3}`: "burst"} {
		code, body := f.do(t, "PUT", "/api/v1/control/types/mail", "adm", b)
		if e, _ := body["error"].(map[string]any); code != 400 || e["field"] != field {
			t.Errorf("limits %s = %d %v", b, code, body)
		}
	}
	if code, _ := f.do(t, "POST", "/api/v1/control/pause", "ro", ""); code != 403 {
		t.Fatalf("pause with read token = %d", code)
	}
}

func TestDLQListAndReplay(t *testing.T) {
	f := newFix2(t, nil, api.Options{})
	var dead []string
	for range 3 {
		dead = append(dead, submitID(t, f.fixture, `{"type":"fail","priority":"low","payload":{"times":1,"permanent":true}}`))
	}
	other := submitID(t, f.fixture, `{"type":"other-fail","priority":"low"}`) // no handler: dead-lettered
	stop := f.consume(t)
	for _, id := range append(dead, other) {
		f.waitStatus(t, id, "dead_letter")
	}
	stop()
	code, body := f.do(t, "GET", "/api/v1/dlq?priority=low", "ro", "")
	msgs, _ := body["messages"].([]any)
	if code != 200 || len(msgs) != 4 {
		t.Fatalf("dlq list = %d %v", code, body)
	}
	m0 := msgs[0].(map[string]any)
	if m0["task_id"] == "" || m0["reason"] == "" || m0["priority"] != "low" {
		t.Fatalf("dlq message %v", m0)
	}
	// Listing does not consume.
	if _, body := f.do(t, "GET", "/api/v1/dlq", "ro", ""); len(body["messages"].([]any)) != 4 {
		t.Fatalf("second list: %v", body)
	}
	if code, body := f.do(t, "GET", "/api/v1/dlq?priority=urgent", "ro", ""); code != 400 {
		t.Fatalf("bad priority = %d %v", code, body)
	}
	// Replay while a consumer runs: the replayed tasks fail again at once
	// and land back in the DLQ, but one replay touches each task only once.
	stopAgain := f.consume(t)
	code, body = f.do(t, "POST", "/api/v1/dlq/replay", "adm", `{"type":"fail"}`)
	if code != 200 || body["replayed"] != 3.0 {
		t.Fatalf("replay = %d %v", code, body)
	}
	for _, id := range dead {
		f.waitStatus(t, id, "dead_letter")
	}
	stopAgain() // the second replay must stay queued: no consumer runs now
	code, body = f.do(t, "POST", "/api/v1/dlq/replay", "adm", `{"type":"fail"}`)
	if code != 200 || body["replayed"] != 3.0 {
		t.Fatalf("second replay = %d %v", code, body)
	}
	for _, id := range dead {
		_, got := f.do(t, "GET", "/api/v1/tasks/"+id, "adm", "")
		if got["status"] != "queued" || got["attempts"] != 0.0 {
			t.Fatalf("replayed task %v", got)
		}
	}
	if _, body := f.do(t, "GET", "/api/v1/dlq", "ro", ""); len(body["messages"].([]any)) != 1 {
		t.Fatalf("after replay the DLQ holds %v", body)
	}
	if code, _ := f.do(t, "POST", "/api/v1/dlq/replay", "ro", `{}`); code != 403 {
		t.Fatalf("replay with read token = %d", code)
	}
	if code, body := f.do(t, "POST", "/api/v1/dlq/replay", "adm", `{"limit":0}`); code != 400 {
		t.Fatalf("replay limit 0 = %d %v", code, body)
	}
}

func TestBackpressure(t *testing.T) {
	f := newFix2(t, map[string]string{"TRIAGE_MAX_QUEUE_DEPTH": "3", "TRIAGE_MAX_QUEUE_DEPTH_HIGH": "5"}, api.Options{})
	for range 3 {
		submitID(t, f.fixture, `{"type":"echo","priority":"low"}`)
	}
	time.Sleep(1100 * time.Millisecond) // the depth cache refreshes
	req, _ := http.NewRequest("POST", f.srv.URL+"/api/v1/tasks", strings.NewReader(`{"type":"echo","priority":"low"}`))
	req.Header.Set("Authorization", "Bearer sub")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("over the limit: %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	// High keeps its own, higher limit.
	if code, body := f.do(t, "POST", "/api/v1/tasks", "sub", `{"type":"echo","priority":"high"}`); code != 201 {
		t.Fatalf("high submit = %d %v", code, body)
	}
}

func TestStatsMatchAKnownWorkload(t *testing.T) {
	f := newFix2(t, nil, api.Options{})
	ctx := context.Background()
	if _, err := f.app.Controls.SetPaused(ctx, "parked", true); err != nil {
		t.Fatal(err)
	}
	var echo, fail, parked []string
	for range 5 {
		echo = append(echo, submitID(t, f.fixture, `{"type":"echo","priority":"high"}`))
	}
	for range 3 {
		fail = append(fail, submitID(t, f.fixture, `{"type":"fail","priority":"low","payload":{"times":1,"permanent":true}}`))
	}
	for range 4 {
		parked = append(parked, submitID(t, f.fixture, `{"type":"parked","priority":"medium"}`))
	}
	later := time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339)
	sched := submitID(t, f.fixture, `{"type":"later","run_at":"`+later+`"}`)
	submitID(t, f.fixture, `{"type":"later","run_at":"`+later+`"}`)
	f.do(t, "POST", "/api/v1/tasks/"+sched+"/cancel", "adm", "")
	stop := f.consume(t)
	for _, id := range echo {
		f.waitStatus(t, id, "completed")
	}
	for _, id := range fail {
		f.waitStatus(t, id, "dead_letter")
	}
	stop()
	// The paused type's tasks were never started: each is still queued.
	for _, id := range parked {
		if _, got := f.do(t, "GET", "/api/v1/tasks/"+id, "adm", ""); got["status"] != "queued" || got["attempts"] != 0.0 {
			t.Errorf("parked task %s: status %v, attempts %v; want queued, 0", id, got["status"], got["attempts"])
		}
	}

	// The counters follow the table's stream: wait until they have caught up.
	stacktest.RunCounters(t, f.app)
	var code int
	var body map[string]any
	for deadline := time.Now().Add(20 * time.Second); ; {
		code, body = f.do(t, "GET", "/api/v1/stats", "ro", "")
		if code != 200 {
			t.Fatalf("stats = %d %v", code, body)
		}
		if sts, _ := body["statuses"].(map[string]any); sts["completed"] == 5.0 && sts["dead_letter"] == 3.0 && sts["queued"] == 4.0 && sts["cancelled"] == 1.0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	statuses := body["statuses"].(map[string]any)
	for st, want := range map[string]float64{"completed": 5, "dead_letter": 3, "queued": 4, "scheduled": 1, "cancelled": 1, "executing": 0, "retrying": 0} {
		if statuses[st] != want {
			t.Errorf("statuses[%s] = %v, want %v", st, statuses[st], want)
		}
	}
	types := body["types"].(map[string]any)
	for typ, want := range map[string]map[string]float64{"echo": {"completed": 5}, "fail": {"dead_letter": 3}, "parked": {"queued": 4}, "later": {"scheduled": 1, "cancelled": 1}} {
		got, _ := types[typ].(map[string]any)
		if len(got) != len(want) {
			t.Errorf("types[%s] = %v, want %v", typ, got, want)
		}
		for st, n := range want {
			if got[st] != n {
				t.Errorf("types[%s][%s] = %v, want %v", typ, st, got[st], n)
			}
		}
	}
	tp := body["throughput"].(map[string]any)
	if tp["completed_last_minute"] != 5.0 || tp["failed_last_minute"] != 3.0 {
		t.Errorf("throughput %v", tp)
	}
	q := body["queues"].(map[string]any)
	low, med, high := q["low"].(map[string]any), q["medium"].(map[string]any), q["high"].(map[string]any)
	if low["dlq_depth"] != 3.0 || high["dlq_depth"] != 0.0 || high["depth"] != 0.0 {
		t.Errorf("queues low %v high %v", low, high)
	}
	// The 4 parked tasks (their type is paused) are set aside in the table
	// without messages (package hold): still queued, not on the queue.
	if med["depth"].(float64)+med["in_flight"].(float64) > 4 {
		t.Errorf("medium queue %v: more than the 4 parked tasks (%v)", med, body)
	}
}

func TestOpenAPIServedWithoutAuth(t *testing.T) {
	f := newFix2(t, nil, api.Options{})
	resp, err := http.Get(f.srv.URL + "/api/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || resp.StatusCode != 200 {
		t.Fatalf("openapi: %d %v", resp.StatusCode, err)
	}
	if v, _ := doc["openapi"].(string); !strings.HasPrefix(v, "3.1") {
		t.Fatalf("openapi version %v", doc["openapi"])
	}
}
