package devserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/events"
	"github.com/triagehq/triage/internal/handler/webhook"
)

// collector keeps the events one subscriber received, de-duplicated by
// id (delivery is at least once), in arrival order per task.
type collector struct {
	mu     sync.Mutex
	seen   map[string]bool
	byTask map[string][]events.Event
	bad    []string
}

func newCollector() *collector {
	return &collector{seen: map[string]bool{}, byTask: map[string][]events.Event{}}
}

func (c *collector) add(e events.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen[e.ID] {
		return
	}
	c.seen[e.ID] = true
	c.byTask[e.TaskID] = append(c.byTask[e.TaskID], e)
}

func (c *collector) fail(msg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bad = append(c.bad, msg)
}

// tasks is how many tasks the collector has events of.
func (c *collector) tasks() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byTask)
}

// summary lists each task's event types, for a failure message.
func (c *collector) summary() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var parts []string
	for id, es := range c.byTask {
		var ts []string
		for _, e := range es {
			ts = append(ts, string(e.Type))
		}
		parts = append(parts, id+": "+strings.Join(ts, ","))
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

// errors are the stream's read failures so far.
func (c *collector) errors() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.bad...)
}

func (c *collector) types(id string) []events.Type {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []events.Type
	for _, e := range c.byTask[id] {
		out = append(out, e.Type)
	}
	return out
}

func (c *collector) events(id string) []events.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.byTask[id])
}

// readSSE parses a text/event-stream into c until the body ends.
func readSSE(body io.Reader, c *collector) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var id, typ, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data != "" {
				var e events.Event
				if err := json.Unmarshal([]byte(data), &e); err != nil || e.ID != id || string(e.Type) != typ {
					c.fail(fmt.Sprintf("frame id %q event %q data %s", id, typ, data))
				} else {
					c.add(e)
				}
			}
			id, typ, data = "", "", ""
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			typ = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		}
	}
}

// TestLifecycleEvents is issue #13's acceptance test for events: one SSE
// subscriber of `triage dev` and one signed webhook receive, for tasks
// that complete, retry then complete, retry then dead-letter, fail
// permanently, and are cancelled while running or while waiting, every
// event with its fields, in each task's order.
func TestLifecycleEvents(t *testing.T) {
	t.Parallel() // mostly waiting; its own prefix on the shared emulators
	env := stacktest.New(t)
	secret := "whsec-test"
	hooked := newCollector()
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := webhook.Verify([]byte(secret), r.Header.Get(webhook.HeaderTimestamp), body, r.Header.Get(webhook.HeaderSignature), time.Now(), 0); err != nil {
			hooked.fail("webhook signature: " + err.Error())
		}
		var e events.Event
		if err := json.Unmarshal(body, &e); err != nil || e.ID != r.Header.Get(events.HeaderEventID) {
			hooked.fail("webhook body " + string(body))
		}
		hooked.add(e)
	}))
	t.Cleanup(hook.Close)

	vars := map[string]string{
		"TRIAGE_ADDR": "127.0.0.1:0", "TRIAGE_TOKEN": "dev-test", "TRIAGE_PREFIX": env.Prefix,
		"TRIAGE_LEASE": "9s", "TRIAGE_RETRY_BACKOFF": "high=200ms:1s,medium=200ms:1s,low=200ms:1s",
		"TRIAGE_WEBHOOK_SECRET": secret, "TRIAGE_EVENT_WEBHOOKS": hook.URL,
	}
	base := startDev(t, vars)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	request := func(method, path, body string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer dev-test")
		return http.DefaultClient.Do(req)
	}
	do := func(method, path, body string, want int) map[string]any {
		t.Helper()
		resp, err := request(method, path, body)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		if resp.StatusCode != want {
			t.Fatalf("%s %s = %d %v, want %d", method, path, resp.StatusCode, out, want)
		}
		return out
	}
	do("GET", "/api/v1/events?type=task.exploded", "", 400)
	subscribe := func(query string) *collector {
		resp, err := request("GET", "/api/v1/events"+query, "")
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("GET /api/v1/events = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		c := newCollector()
		go func() { defer resp.Body.Close(); readSSE(resp.Body, c) }()
		return c
	}
	streamed := subscribe("")
	finished := subscribe("?type=task.completed,task.dead_lettered")

	submit := func(body string) string { return do("POST", "/api/v1/tasks", body, 201)["id"].(string) }
	ok := submit(`{"type":"echo","payload":{"x":1},"priority":"high"}`)
	flaky := submit(`{"type":"fail","payload":{"times":1},"priority":"medium"}`)
	exhausted := submit(`{"type":"fail","payload":{"times":5},"priority":"low","max_attempts":2}`)
	broken := submit(`{"type":"fail","payload":{"times":1,"permanent":true}}`)
	sleeper := submit(`{"type":"sleep","payload":{"ms":60000},"priority":"high"}`)
	waiting := submit(`{"type":"echo","delay_seconds":600}`)
	subscribedOne := subscribe("?task_id=" + waiting)
	do("POST", "/api/v1/tasks/"+waiting+"/cancel", "", 200)
	// Events come from the table's stream, which a loaded machine can
	// put tens of seconds behind (none of the sleep task's events had
	// arrived after 30 s in one clean-clone CI run; 27 s alone): the
	// bound is generous, what is asserted is the events and their order.
	deadline := time.Now().Add(90 * time.Second)
	for !slices.Contains(streamed.types(sleeper), events.Started) {
		if time.Now().After(deadline) {
			// Say whether the stream stalled for every task or only this
			// one fell behind, and where the task is by the API.
			t.Fatalf("the sleep task never started: %v; events streamed: %d of %d tasks (%s), stream errors %v; the task by the API: %v",
				streamed.types(sleeper), streamed.tasks(), 6, streamed.summary(), streamed.errors(), do("GET", "/api/v1/tasks/"+sleeper, "", 200)["status"])
		}
		time.Sleep(50 * time.Millisecond)
	}
	do("POST", "/api/v1/tasks/"+sleeper+"/cancel", "", 200)

	S, St, R, C, D, X := events.Submitted, events.Started, events.Retrying, events.Completed, events.DeadLettered, events.Cancelled
	want := map[string][]events.Type{
		ok:        {S, St, C},
		flaky:     {S, St, R, St, C},
		exhausted: {S, St, R, St, D},
		broken:    {S, St, D},
		sleeper:   {S, St, X},
		waiting:   {S, X},
	}
	for name, c := range map[string]*collector{"SSE": streamed, "webhook": hooked} {
		deadline := time.Now().Add(90 * time.Second)
		for id, w := range want {
			for !slices.Equal(c.types(id), w) {
				if time.Now().After(deadline) || len(c.types(id)) > len(w) {
					t.Fatalf("%s: task %s events %v, want %v\n%+v", name, id, c.types(id), w, c.events(id))
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		if len(c.bad) > 0 {
			t.Fatalf("%s: bad deliveries: %v", name, c.bad)
		}
		checkFields(t, name, c, want, map[string]string{ok: "echo", flaky: "fail", exhausted: "fail", broken: "fail", sleeper: "sleep", waiting: "echo"})
	}
	// The filtered subscribers got exactly their share.
	for id, w := range want {
		var ends []events.Type
		for _, typ := range w {
			if typ == C || typ == D {
				ends = append(ends, typ)
			}
		}
		if got := finished.types(id); !slices.Equal(got, ends) {
			t.Errorf("type-filtered subscriber: task %s got %v, want %v", id, got, ends)
		}
	}
	// It subscribed after the submit was written, maybe before the stream
	// consumer read it: it gets the cancel, maybe the submit, and nothing
	// of other tasks.
	if got := subscribedOne.types(waiting); !slices.Equal(got, []events.Type{X}) && !slices.Equal(got, []events.Type{S, X}) || len(subscribedOne.byTask) != 1 {
		t.Errorf("task-filtered subscriber got %v", subscribedOne.byTask)
	}
}

// checkFields checks what every event of every task carries.
func checkFields(t *testing.T, name string, c *collector, want map[string][]events.Type, types map[string]string) {
	t.Helper()
	for id := range want {
		evs := c.events(id)
		started := 0
		var last time.Time
		for i, e := range evs {
			where := fmt.Sprintf("%s: task %s event %d (%s)", name, id, i, e.Type)
			if e.TaskID != id || e.TaskType != types[id] || e.Priority == "" || e.EffectivePriority == "" || e.MaxAttempts == 0 {
				t.Errorf("%s: identity fields %+v", where, e)
			}
			if !strings.HasPrefix(e.ID, id+"-") || e.Time.Before(last) {
				t.Errorf("%s: id %q, time %v after %v", where, e.ID, e.Time, last)
			}
			last = e.Time
			switch e.Type {
			case events.Submitted:
				if e.Attempt != 0 || e.DurationMS != nil {
					t.Errorf("%s: %+v", where, e)
				}
			case events.Started:
				started++
				if e.Attempt != started || e.Status != "executing" {
					t.Errorf("%s: attempt %d status %s, want attempt %d executing", where, e.Attempt, e.Status, started)
				}
			case events.Retrying:
				if e.Attempt != started || e.Error == nil || !e.Error.Retriable || e.RetryAt == nil || e.DurationMS == nil {
					t.Errorf("%s: want attempt %d, a retriable error, retry_at and duration: %+v", where, started, e)
				}
			case events.Completed:
				if e.Attempt != started || e.DurationMS == nil || e.Error != nil {
					t.Errorf("%s: want attempt %d, a duration, no error: %+v", where, started, e)
				}
			case events.DeadLettered:
				if e.Attempt != started || e.Error == nil || e.DurationMS == nil {
					t.Errorf("%s: want attempt %d, an error and a duration: %+v", where, started, e)
				}
			case events.Cancelled:
				if (started > 0) != (e.DurationMS != nil) {
					t.Errorf("%s: duration %v after %d starts", where, e.DurationMS, started)
				}
			}
		}
	}
}
