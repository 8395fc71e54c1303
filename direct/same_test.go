package direct_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/direct"
	"github.com/triagehq/triage/internal/api"
	"github.com/triagehq/triage/internal/app/apiapp"
	"github.com/triagehq/triage/internal/auth"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triageconfig"
	"github.com/triagehq/triage/worker"
)

// The tests in this file run the same calls through both transports, on
// the emulators: the HTTP transport against the real API handler (as
// `triage dev` and the Lambda function serve it) and the direct transport
// on the same table and queues. They compare answers and errors field by
// field, which is what "the same either way" means.

// deployment is one table and its queues, with a client on each transport.
type deployment struct {
	env    *stacktest.Env
	http   *triage.Client
	direct *triage.Client
}

// newDeployment bootstraps fresh resources; settings are TRIAGE_* values
// both the API and the direct transport read.
func newDeployment(t *testing.T, settings map[string]string) *deployment {
	t.Helper()
	env := stacktest.New(t)
	toks, err := auth.Parse("adm:admin")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(apiapp.Handler(env.App(t, settings), toks, api.Options{}))
	t.Cleanup(srv.Close)
	tr, err := direct.New(ctx(t), env.AWS, direct.Options{Config: envConfig(t, env.Getenv(settings))})
	if err != nil {
		t.Fatal(err)
	}
	return &deployment{env: env, http: triage.NewClient(triage.HTTP(srv.URL, "adm")), direct: triage.NewClient(tr)}
}

type namedClient struct {
	name string
	c    *triage.Client
	// other is the other transport, for crossing over.
	other *triage.Client
}

func (d *deployment) both() []namedClient {
	return []namedClient{{"http", d.http, d.direct}, {"direct", d.direct, d.http}}
}

// asError returns err as an *triage.Error, failing t when it is not one.
func asError(t *testing.T, err error) *triage.Error {
	t.Helper()
	var e *triage.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v (%T), want a *triage.Error", err, err)
	}
	return e
}

// sameJSON fails t when a and b do not encode alike.
func sameJSON(t *testing.T, what string, a, b any) {
	t.Helper()
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	if string(x) != string(y) {
		t.Errorf("%s differ:\n  http   %s\n  direct %s", what, x, y)
	}
}

func TestSameSubmit(t *testing.T) {
	d := newDeployment(t, nil)
	c := ctx(t)
	for _, nc := range d.both() {
		t.Run(nc.name, func(t *testing.T) {
			key := "same-" + nc.name
			tk, created, err := nc.c.Submit(c, "echo", map[string]int{"x": 1},
				triage.WithPriority(triage.High), triage.WithIdempotencyKey(key), triage.WithMaxAttempts(5),
				triage.WithTimeout(1500*time.Millisecond), triage.WithTraceID("trace-"+nc.name))
			if err != nil || !created {
				t.Fatalf("Submit = %v, created %v, %v", tk, created, err)
			}
			if tk.Status != triage.Queued || tk.Priority != triage.High || tk.EffectivePriority != triage.High || tk.MaxAttempts != 5 ||
				tk.TimeoutSeconds != 2 || string(tk.Payload) != `{"x":1}` || tk.TraceID != "trace-"+nc.name || tk.IdempotencyKey != key || tk.EnqueuedAt == nil {
				t.Fatalf("task = %+v", tk)
			}
			// The same key returns the first task (HTTP's 200 instead of
			// 201), through this transport and through the other one.
			for _, c2 := range []*triage.Client{nc.c, nc.other} {
				again, created, err := c2.Submit(c, "echo", nil, triage.WithPriority(triage.Low), triage.WithIdempotencyKey(key))
				if err != nil || created || again.ID != tk.ID || again.Priority != triage.High {
					t.Fatalf("resubmit = %+v, created %v, %v; want task %s, created false", again, created, err, tk.ID)
				}
			}
			// Both transports read the task back identically.
			viaHTTP, err := d.http.Get(c, tk.ID)
			if err != nil {
				t.Fatal(err)
			}
			viaDirect, err := d.direct.Get(c, tk.ID)
			if err != nil {
				t.Fatal(err)
			}
			sameJSON(t, "tasks read back", viaHTTP, viaDirect)
			sameJSON(t, "the submitted task and the one read back", tk, viaDirect)

			// A task due beyond SQS's longest delay starts scheduled.
			at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
			sched, _, err := nc.c.Submit(c, "echo", nil, triage.WithRunAt(at))
			if err != nil || sched.Status != triage.Scheduled || !sched.RunAt.Equal(at) || sched.EnqueuedAt != nil {
				t.Fatalf("scheduled submit = %+v, %v", sched, err)
			}
		})
	}
}

// errCase is a call that must fail the same way on both transports.
type errCase struct {
	name  string
	call  func(context.Context, *triage.Client) error
	is    error
	field string
}

func submitErr(typ string, payload any, opts ...triage.SubmitOption) func(context.Context, *triage.Client) error {
	return func(ctx context.Context, c *triage.Client) error {
		_, _, err := c.Submit(ctx, typ, payload, opts...)
		return err
	}
}

// TestSameErrors checks that each bad call fails on both transports with
// the same status, code, field and message, matching its sentinel.
func TestSameErrors(t *testing.T) {
	d := newDeployment(t, map[string]string{triageconfig.EnvTypes: "echo,fail"})
	c := ctx(t)
	queued, _, err := d.http.Submit(c, "echo", nil)
	if err != nil {
		t.Fatal(err)
	}
	cancelled, _, err := d.http.Submit(c, "echo", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.http.Cancel(c, cancelled.ID); err != nil {
		t.Fatal(err)
	}
	unknownID := task.NewID(time.Now())
	tooBig := json.RawMessage(`"` + strings.Repeat("a", triage.MaxPayloadBytes) + `"`)
	cases := []errCase{
		{"unknown priority", submitErr("echo", nil, triage.WithPriority("urgent")), triage.ErrBadRequest, "priority"},
		{"no type", submitErr("", nil), triage.ErrBadRequest, "type"},
		{"type with #", submitErr("a#b", nil), triage.ErrBadRequest, "type"},
		{"type the deployment does not run", submitErr("resize", nil), triage.ErrBadRequest, "type"},
		{"payload not JSON", submitErr("echo", json.RawMessage(`{nope`)), triage.ErrBadRequest, "payload"},
		{"payload too large", submitErr("echo", tooBig), triage.ErrTooLarge, "payload"},
		{"max attempts 0", submitErr("echo", nil, triage.WithMaxAttempts(0)), triage.ErrBadRequest, "max_attempts"},
		{"timeout over 12 h", submitErr("echo", nil, triage.WithTimeout(13*time.Hour)), triage.ErrBadRequest, "timeout_seconds"},
		{"negative delay", submitErr("echo", nil, triage.WithDelay(-time.Second)), triage.ErrBadRequest, "delay_seconds"},
		{"trace id with a space", submitErr("echo", nil, triage.WithTraceID("a b")), triage.ErrBadRequest, "trace_id"},
		{"empty batch", func(ctx context.Context, c *triage.Client) error {
			_, err := c.SubmitBatch(ctx, nil)
			return err
		}, triage.ErrBadRequest, "tasks"},
		{"batch over the limit", func(ctx context.Context, c *triage.Client) error {
			_, err := c.SubmitBatch(ctx, make([]triage.SubmitRequest, triage.MaxBatch+1))
			return err
		}, triage.ErrBadRequest, "tasks"},
		{"get a malformed id", func(ctx context.Context, c *triage.Client) error {
			_, err := c.Get(ctx, "not-an-id")
			return err
		}, triage.ErrBadRequest, "id"},
		{"get an unknown task", func(ctx context.Context, c *triage.Client) error {
			_, err := c.Get(ctx, unknownID)
			return err
		}, triage.ErrNotFound, "id"},
		{"cancel an unknown task", func(ctx context.Context, c *triage.Client) error {
			_, err := c.Cancel(ctx, unknownID)
			return err
		}, triage.ErrNotFound, "id"},
		{"cancel a cancelled task", func(ctx context.Context, c *triage.Client) error {
			_, err := c.Cancel(ctx, cancelled.ID)
			return err
		}, triage.ErrConflict, ""},
		{"retry a queued task", func(ctx context.Context, c *triage.Client) error {
			_, err := c.Retry(ctx, queued.ID)
			return err
		}, triage.ErrConflict, ""},
		{"delete a queued task", func(ctx context.Context, c *triage.Client) error {
			return c.Delete(ctx, queued.ID)
		}, triage.ErrConflict, ""},
		{"delete without an id", func(ctx context.Context, c *triage.Client) error {
			return c.Delete(ctx, "")
		}, triage.ErrBadRequest, "id"},
		{"list an unknown status", func(ctx context.Context, c *triage.Client) error {
			_, err := c.List(ctx, triage.ListParams{Status: "done"})
			return err
		}, triage.ErrBadRequest, "status"},
		{"list an unknown priority", func(ctx context.Context, c *triage.Client) error {
			_, err := c.List(ctx, triage.ListParams{Priority: "urgent"})
			return err
		}, triage.ErrBadRequest, "priority"},
		{"list a bad type", func(ctx context.Context, c *triage.Client) error {
			_, err := c.List(ctx, triage.ListParams{Type: "a#b"})
			return err
		}, triage.ErrBadRequest, "type"},
		{"list too many", func(ctx context.Context, c *triage.Client) error {
			_, err := c.List(ctx, triage.ListParams{Limit: triage.MaxListLimit + 1})
			return err
		}, triage.ErrBadRequest, "limit"},
		{"list from a forged cursor", func(ctx context.Context, c *triage.Client) error {
			_, err := c.List(ctx, triage.ListParams{Cursor: "forged"})
			return err
		}, triage.ErrBadRequest, "cursor"},
		{"pause a bad type", func(ctx context.Context, c *triage.Client) error {
			_, err := c.Pause(ctx, "a\nb")
			return err
		}, triage.ErrBadRequest, "type"},
		{"negative rate", func(ctx context.Context, c *triage.Client) error {
			_, err := c.SetLimits(ctx, "echo", -1, 0)
			return err
		}, triage.ErrBadRequest, "rate_limit_per_second"},
		{"concurrency over the limit", func(ctx context.Context, c *triage.Client) error {
			_, err := c.SetLimits(ctx, "echo", 0, 20000)
			return err
		}, triage.ErrBadRequest, "max_concurrency"},
		{"limits without a type", func(ctx context.Context, c *triage.Client) error {
			_, err := c.SetLimits(ctx, "", 1, 1)
			return err
		}, triage.ErrBadRequest, "type"},
		{"dlq of an unknown priority", func(ctx context.Context, c *triage.Client) error {
			_, err := c.DLQ(ctx, "urgent", 0)
			return err
		}, triage.ErrBadRequest, "priority"},
		{"dlq too many", func(ctx context.Context, c *triage.Client) error {
			_, err := c.DLQ(ctx, "", triage.MaxListLimit+1)
			return err
		}, triage.ErrBadRequest, "limit"},
		{"replay too many", func(ctx context.Context, c *triage.Client) error {
			_, err := c.ReplayDLQ(ctx, triage.ReplayRequest{Limit: 20000})
			return err
		}, triage.ErrBadRequest, "limit"},
		{"replay an unknown priority", func(ctx context.Context, c *triage.Client) error {
			_, err := c.ReplayDLQ(ctx, triage.ReplayRequest{Priority: "urgent"})
			return err
		}, triage.ErrBadRequest, "priority"},
		{"replay a type no task can have", func(ctx context.Context, c *triage.Client) error {
			_, err := c.ReplayDLQ(ctx, triage.ReplayRequest{Type: strings.Repeat("t", 100_000)})
			return err
		}, triage.ErrBadRequest, "type"},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			var got [2]*triage.Error
			for i, nc := range d.both() {
				err := tt.call(c, nc.c)
				if !errors.Is(err, tt.is) {
					t.Fatalf("%s: err = %v, want %v", nc.name, err, tt.is)
				}
				got[i] = asError(t, err)
				if got[i].Field != tt.field || (tt.field != "" && !strings.Contains(err.Error(), tt.field)) {
					t.Errorf("%s: %v does not name field %q", nc.name, err, tt.field)
				}
			}
			h, dr := *got[0], *got[1]
			dr.Cause = nil // only the direct transport has the underlying error
			if h != dr {
				t.Errorf("the transports disagree:\n  http   %+v\n  direct %+v", h, dr)
			}
		})
	}
}

// TestSameBatch submits the same batch through both transports: each item
// gets the status, task or error a single submit would have.
func TestSameBatch(t *testing.T) {
	d := newDeployment(t, nil)
	c := ctx(t)
	var got [2][]triage.BatchResult
	for i, nc := range d.both() {
		ok, err := triage.NewRequest("echo", json.RawMessage(`{"n":1}`), triage.WithIdempotencyKey("batch-"+nc.name))
		if err != nil {
			t.Fatal(err)
		}
		late, _ := triage.NewRequest("echo", nil, triage.WithPriority(triage.Low))
		late.RunAt, late.DelaySeconds = new(time.Now().Add(time.Minute)), new(60) // both: invalid
		rs := []triage.SubmitRequest{
			ok,
			{Type: "echo", Priority: "urgent"},
			ok, // the same key again: the first task, not created
			late,
			{Type: "echo", Payload: json.RawMessage(`"` + strings.Repeat("a", triage.MaxPayloadBytes) + `"`)},
		}
		res, err := nc.c.SubmitBatch(c, rs)
		if err != nil {
			t.Fatalf("%s: SubmitBatch: %v", nc.name, err)
		}
		got[i] = res
		if !res[0].Created() || res[0].Err() != nil || res[2].Created() || res[2].Err() != nil || res[2].Task.ID != res[0].Task.ID {
			t.Errorf("%s: the repeated key: %+v then %+v", nc.name, res[0], res[2])
		}
		for j, want := range map[int]struct {
			is    error
			field string
		}{1: {triage.ErrBadRequest, "tasks[1].priority"}, 3: {triage.ErrBadRequest, "tasks[3].run_at"}, 4: {triage.ErrTooLarge, "tasks[4].payload"}} {
			err := res[j].Err()
			if e := asError(t, err); !errors.Is(err, want.is) || e.Field != want.field {
				t.Errorf("%s: item %d: %v, want %v naming %s", nc.name, j, err, want.is, want.field)
			}
		}
		// The other transport sees the key as used.
		again, created, err := nc.other.Submit(c, "echo", nil, triage.WithIdempotencyKey("batch-"+nc.name))
		if err != nil || created || again.ID != res[0].Task.ID {
			t.Errorf("%s: resubmit through the other transport = %v, %v, %v", nc.name, again, created, err)
		}
	}
	for j := range got[0] {
		h, dr := got[0][j], got[1][j]
		if h.Index != dr.Index || h.Status != dr.Status || !reflect.DeepEqual(h.Error, dr.Error) {
			t.Errorf("item %d: http %+v, direct %+v", j, h, dr)
		}
	}
}

// TestSameBackpressure fills the low queue to its depth limit: a low
// submit is then refused with ErrTooMany and a Retry-After on both
// transports, a batch item too, while high (with its own, higher limit)
// still gets in.
func TestSameBackpressure(t *testing.T) {
	d := newDeployment(t, map[string]string{triageconfig.EnvMaxDepth: "2"})
	c := ctx(t)
	for range 2 {
		if _, _, err := d.http.Submit(c, "echo", nil, triage.WithPriority(triage.Low)); err != nil {
			t.Fatal(err)
		}
	}
	// Depths are read at most once a second; let the API's reading expire.
	time.Sleep(1100 * time.Millisecond)
	var refusals [2]*triage.Error
	for i, nc := range d.both() {
		_, _, err := nc.c.Submit(c, "echo", nil, triage.WithPriority(triage.Low), triage.WithIdempotencyKey("bp-"+nc.name))
		if !errors.Is(err, triage.ErrTooMany) {
			t.Fatalf("%s: low submit over the limit: %v, want ErrTooMany", nc.name, err)
		}
		e := asError(t, err)
		if e.RetryAfter != 5*time.Second || e.Code != "too_many_requests" {
			t.Errorf("%s: refusal %+v, want Retry-After 5s", nc.name, e)
		}
		refusals[i] = e
		if _, _, err := nc.c.Submit(c, "echo", nil, triage.WithPriority(triage.High)); err != nil {
			t.Errorf("%s: high submit: %v, want it admitted", nc.name, err)
		}
		low, _ := triage.NewRequest("echo", nil, triage.WithPriority(triage.Low))
		high, _ := triage.NewRequest("echo", nil, triage.WithPriority(triage.High))
		res, err := nc.c.SubmitBatch(c, []triage.SubmitRequest{low, high})
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(res[0].Err(), triage.ErrTooMany) || !res[1].Created() {
			t.Errorf("%s: batch results %+v, %+v; want 429 then 201", nc.name, res[0], res[1])
		}
	}
	if refusals[0].Message != refusals[1].Message {
		t.Errorf("refusals differ: %q and %q", refusals[0].Message, refusals[1].Message)
	}
}

// TestSameLifecycle lists, cancels, deletes and cleans up tasks made by
// one transport through the other.
func TestSameLifecycle(t *testing.T) {
	d := newDeployment(t, nil)
	c := ctx(t)
	for _, nc := range d.both() {
		t.Run(nc.name, func(t *testing.T) {
			typ := "life-" + nc.name
			var ids []string
			for range 3 {
				tk, _, err := nc.other.Submit(c, typ, nil)
				if err != nil {
					t.Fatal(err)
				}
				ids = append([]string{tk.ID}, ids...) // newest first, as listed
			}
			page, err := nc.c.List(c, triage.ListParams{Type: typ, Limit: 2})
			if err != nil || len(page.Tasks) != 2 || page.NextCursor == "" {
				t.Fatalf("first page = %+v, %v", page, err)
			}
			var otherPage *triage.TaskPage
			if otherPage, err = nc.other.List(c, triage.ListParams{Type: typ, Limit: 2}); err != nil {
				t.Fatal(err)
			}
			sameJSON(t, "pages", otherPage.Tasks, page.Tasks)
			var all []string
			err = nc.c.ListAll(c, triage.ListParams{Type: typ, Status: triage.Queued, Limit: 2}, func(tk *triage.Task) error {
				all = append(all, tk.ID)
				return nil
			})
			if err != nil || strings.Join(all, ",") != strings.Join(ids, ",") {
				t.Fatalf("ListAll = %v, %v; want %v", all, err, ids)
			}

			tk, err := nc.c.Cancel(c, ids[0])
			if err != nil || tk.Status != triage.Cancelled || tk.CompletedAt == nil {
				t.Fatalf("Cancel = %+v, %v", tk, err)
			}
			if err := nc.c.Delete(c, ids[0]); err != nil {
				t.Fatalf("Delete of a cancelled task: %v", err)
			}
			if _, err := nc.other.Get(c, ids[0]); !errors.Is(err, triage.ErrNotFound) {
				t.Fatalf("Get after Delete: %v, want ErrNotFound", err)
			}
			if _, err := nc.c.Cancel(c, ids[1]); err != nil {
				t.Fatal(err)
			}
			n, err := nc.c.Cleanup(c, time.Now().Add(time.Minute))
			if err != nil || n < 1 {
				t.Fatalf("Cleanup = %d, %v; want the cancelled task deleted", n, err)
			}
			if _, err := nc.other.Get(c, ids[1]); !errors.Is(err, triage.ErrNotFound) {
				t.Fatalf("Get after Cleanup: %v, want ErrNotFound", err)
			}
		})
	}
}

var quiet = slog.New(slog.NewJSONHandler(io.Discard, nil))

// TestSameOperations covers the operator calls: controls set through one
// transport read the same through both, stats agree, and a dead-lettered
// task is listed alike, retried through one and replayed through the other.
func TestSameOperations(t *testing.T) {
	d := newDeployment(t, nil)
	c := ctx(t)

	if _, err := d.direct.Pause(c, "echo"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.http.SetLimits(c, "echo", 2.5, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := d.direct.Pause(c, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := d.http.Resume(c, ""); err != nil {
		t.Fatal(err)
	}
	var controls [2][]triage.ControlSettings
	for i, nc := range d.both() {
		cs, err := nc.c.Controls(c)
		if err != nil {
			t.Fatal(err)
		}
		controls[i] = cs
	}
	want := []triage.ControlSettings{{Paused: false}, {Type: "echo", Paused: true, RateLimitPerSecond: 2.5, MaxConcurrency: 3}}
	if !reflect.DeepEqual(controls[0], want) || !reflect.DeepEqual(controls[1], want) {
		t.Errorf("controls: http %+v, direct %+v; want %+v", controls[0], controls[1], want)
	}

	// Two tasks that fail for good land in the high DLQ.
	wcfg, err := triageconfig.Decode(d.env.Getenv(nil))
	if err != nil {
		t.Fatal(err)
	}
	w := worker.New(worker.Options{Config: &wcfg, Logger: quiet})
	w.Handle("doomed", func(context.Context, *worker.Task) (any, error) {
		return nil, worker.Permanent(errors.New("no way"))
	})
	wctx, stop := context.WithCancel(c)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	var doomed []string
	for _, nc := range d.both() {
		tk, _, err := nc.c.Submit(c, "doomed", nil, triage.WithPriority(triage.High))
		if err != nil {
			t.Fatal(err)
		}
		doomed = append(doomed, tk.ID)
	}
	for _, id := range doomed {
		dead, err := d.http.Wait(c, id, 50*time.Millisecond)
		if !errors.Is(err, triage.ErrDeadLettered) || dead.Status != triage.DeadLetter || dead.Error == nil || !strings.Contains(dead.Error.Message, "no way") {
			t.Fatalf("Wait = %+v, %v; want dead_letter and ErrDeadLettered", dead, err)
		}
	}
	// The running worker is registered; both transports list it alike
	// (but for what a heartbeat between the two reads may change).
	var ws [2]*triage.WorkerList
	for i, nc := range d.both() {
		if ws[i], err = nc.c.Workers(c); err != nil {
			t.Fatal(err)
		}
		ws[i].GeneratedAt = time.Time{}
		for j := range ws[i].Workers {
			ws[i].Workers[j].LastHeartbeatAt, ws[i].Workers[j].Busy = time.Time{}, 0
		}
	}
	if len(ws[0].Workers) != 1 || ws[0].Workers[0].Kind != "worker" || ws[0].Workers[0].State != triage.WorkerActive {
		t.Errorf("workers = %+v, want the one running worker, active", ws[0])
	}
	sameJSON(t, "worker listings", ws[0], ws[1])
	stop()
	if err := <-done; err != nil {
		t.Errorf("worker: %v", err)
	}

	var msgs [2][]triage.DLQMessage
	var st [2]*triage.Stats
	for i, nc := range d.both() {
		if msgs[i], err = nc.c.DLQ(c, triage.High, 0); err != nil {
			t.Fatal(err)
		}
		for j := range msgs[i] {
			msgs[i][j].ReceiveCount = 0 // every listing raises it
		}
		if st[i], err = nc.c.Stats(c); err != nil {
			t.Fatal(err)
		}
		st[i].GeneratedAt = time.Time{}
	}
	if len(msgs[0]) != 2 {
		t.Fatalf("DLQ = %+v, want the doomed tasks' messages", msgs[0])
	}
	sameJSON(t, "DLQ listings", msgs[0], msgs[1])
	sameJSON(t, "stats", st[0], st[1])
	if st[0].Queues[triage.High].DLQDepth != 2 {
		t.Errorf("stats: high DLQ depth %d, want 2", st[0].Queues[triage.High].DLQDepth)
	}

	// The first is retried by hand, which takes its DLQ message with it
	// (one DLQ message per dead task); the replay then puts back the
	// second, the only one left.
	retried, err := d.direct.Retry(c, doomed[0])
	if err != nil || retried.Status != triage.Queued || retried.Attempts != 0 || retried.Error != nil {
		t.Fatalf("Retry = %+v, %v", retried, err)
	}
	for _, nc := range d.both() {
		if ms, err := nc.c.DLQ(c, triage.High, 0); err != nil || len(ms) != 1 || ms[0].TaskID != doomed[1] {
			t.Fatalf("%s: DLQ after the retry = %+v, %v; want the second task's message only", nc.name, ms, err)
		}
	}
	r, err := d.http.ReplayDLQ(c, triage.ReplayRequest{Priority: triage.High, Type: "doomed"})
	if err != nil || r.Replayed != 1 || r.Skipped != 0 {
		t.Fatalf("ReplayDLQ = %+v, %v; want 1 replayed, none skipped", r, err)
	}
	for i, nc := range d.both() {
		if _, err := nc.c.Retry(c, doomed[i]); !errors.Is(err, triage.ErrConflict) {
			t.Errorf("%s: Retry of a queued task = %v, want ErrConflict", nc.name, err)
		}
		if ms, err := nc.c.DLQ(c, "", 0); err != nil || len(ms) != 0 {
			t.Errorf("%s: DLQ after replay = %+v, %v; want empty", nc.name, ms, err)
		}
	}
}

// TestLimitsMatchTheAPI keeps the public limits and the API's own
// constants equal until the API imports them.
func TestLimitsMatchTheAPI(t *testing.T) {
	if triage.MaxBatch != api.MaxBatch || triage.MaxListLimit != api.MaxListLimit {
		t.Fatalf("triage.MaxBatch %d, MaxListLimit %d; the API's %d, %d", triage.MaxBatch, triage.MaxListLimit, api.MaxBatch, api.MaxListLimit)
	}
}

// A payload over the inline limit is kept in the bucket by either
// transport, and both read it back whole; list pages give its size only.
func TestSameLargePayload(t *testing.T) {
	d := newDeployment(t, nil)
	c := ctx(t)
	big := map[string]string{"blob": strings.Repeat("p", 20<<10)}
	want, _ := json.Marshal(big)
	for _, nc := range d.both() {
		t.Run(nc.name, func(t *testing.T) {
			tk, _, err := nc.c.Submit(c, "echo", big)
			if err != nil {
				t.Fatal(err)
			}
			if tk.PayloadSize != len(want) {
				t.Fatalf("submit answer payload_size %d, want %d", tk.PayloadSize, len(want))
			}
			for _, reader := range []*triage.Client{nc.c, nc.other} {
				got, err := reader.Get(c, tk.ID)
				if err != nil || string(got.Payload) != string(want) || got.PayloadSize != len(want) {
					t.Fatalf("Get: %d bytes, payload_size %d, err %v", len(got.Payload), got.PayloadSize, err)
				}
			}
			page, err := nc.c.List(c, triage.ListParams{Limit: 1})
			if err != nil || len(page.Tasks) != 1 || page.Tasks[0].ID != tk.ID || len(page.Tasks[0].Payload) > 4 || page.Tasks[0].PayloadSize != len(want) {
				t.Fatalf("list row: %+v, err %v", page, err)
			}
		})
	}
}

// greeting is a typed payload: its Kind is the task type on both ends.
type greeting struct {
	Name string `json:"name"`
}

func (greeting) Kind() string { return "greeting" }

// TestSameTypedSubmit submits typed tasks, single and batch, through both
// transports, and runs them with a worker registered for the same Args:
// the type is named once, by Kind, and each end reads it from there.
func TestSameTypedSubmit(t *testing.T) {
	d := newDeployment(t, nil)
	c := ctx(t)
	var ids []string
	for _, nc := range d.both() {
		tk, created, err := nc.c.SubmitArgs(c, greeting{Name: nc.name}, triage.WithPriority(triage.High), triage.WithIdempotencyKey("typed-"+nc.name))
		if err != nil || !created || tk.Type != "greeting" || string(tk.Payload) != `{"name":"`+nc.name+`"}` || tk.Priority != triage.High {
			t.Fatalf("%s: SubmitArgs = %+v, %v, %v", nc.name, tk, created, err)
		}
		// The key is the same key whichever transport sees it again.
		again, created, err := nc.other.SubmitArgs(c, greeting{Name: "other"}, triage.WithIdempotencyKey("typed-"+nc.name))
		if err != nil || created || again.ID != tk.ID {
			t.Fatalf("%s: typed resubmit through the other transport = %+v, %v, %v", nc.name, again, created, err)
		}
		res, err := nc.c.SubmitArgsBatch(c, []triage.ArgsItem{
			{Args: greeting{Name: nc.name + "-1"}},
			{Args: greeting{Name: nc.name + "-2"}, Opts: []triage.SubmitOption{triage.WithPriority("urgent")}},
			{Args: greeting{Name: nc.name + "-3"}, Opts: []triage.SubmitOption{triage.WithPriority(triage.Low)}},
		})
		if err != nil {
			t.Fatalf("%s: SubmitArgsBatch: %v", nc.name, err)
		}
		if e := asError(t, res[1].Err()); !errors.Is(e, triage.ErrBadRequest) || e.Field != "tasks[1].priority" {
			t.Errorf("%s: the bad item: %v, want ErrBadRequest naming tasks[1].priority", nc.name, e)
		}
		if !res[0].Created() || !res[2].Created() || res[0].Task.Type != "greeting" || res[2].Task.Priority != triage.Low {
			t.Fatalf("%s: batch results %+v", nc.name, res)
		}
		ids = append(ids, tk.ID, res[0].Task.ID, res[2].Task.ID)
	}

	wcfg, err := triageconfig.Decode(d.env.Getenv(nil))
	if err != nil {
		t.Fatal(err)
	}
	w := worker.New(worker.Options{Config: &wcfg, Logger: quiet})
	if err := worker.AddWorker(w, func(_ context.Context, j *worker.Job[greeting]) (any, error) {
		return "hello " + j.Args.Name, nil
	}); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(c)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	}()
	for _, id := range ids {
		tk, err := d.direct.Wait(c, id, 50*time.Millisecond)
		if err != nil || tk.Status != triage.Completed || !strings.HasPrefix(string(tk.Result), `"hello `) {
			t.Fatalf("Wait(%s) = %+v, %v; want completed by the greeting worker", id, tk, err)
		}
	}
}

// TestSameWait: Wait ends with the task on both transports, and with an
// error matching ErrDeadLettered or ErrCancelled when the task ended
// without completing, whoever ended it (its handler, its attempts running
// out, a cancel request).
func TestSameWait(t *testing.T) {
	d := newDeployment(t, nil)
	c := ctx(t)
	wcfg, err := triageconfig.Decode(d.env.Getenv(nil))
	if err != nil {
		t.Fatal(err)
	}
	w := worker.New(worker.Options{Config: &wcfg, Logger: quiet})
	handlers := map[string]worker.HandlerFunc{
		"wait-ok":     func(context.Context, *worker.Task) (any, error) { return "done", nil },
		"wait-doomed": func(context.Context, *worker.Task) (any, error) { return nil, worker.Permanent(errors.New("no way")) },
		"wait-flaky":  func(context.Context, *worker.Task) (any, error) { return nil, errors.New("flaked") },
		"wait-refunded": func(context.Context, *worker.Task) (any, error) {
			return nil, worker.Cancel(errors.New("order refunded"))
		},
	}
	for typ, h := range handlers {
		if err := w.Handle(typ, h); err != nil {
			t.Fatal(err)
		}
	}
	wctx, stop := context.WithCancel(c)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	}()
	tests := []struct {
		typ    string
		opts   []triage.SubmitOption
		cancel bool // cancel it before it runs
		status triage.Status
		is     error
		says   string
	}{
		{typ: "wait-ok", status: triage.Completed},
		{typ: "wait-doomed", status: triage.DeadLetter, is: triage.ErrDeadLettered, says: "no way"},
		{typ: "wait-flaky", opts: []triage.SubmitOption{triage.WithMaxAttempts(1)}, status: triage.DeadLetter, is: triage.ErrDeadLettered, says: "flaked (attempt 1 of 1, none left)"},
		{typ: "wait-refunded", status: triage.Cancelled, is: triage.ErrCancelled, says: "order refunded"},
		{typ: "wait-ok", opts: []triage.SubmitOption{triage.WithDelay(time.Hour)}, cancel: true, status: triage.Cancelled, is: triage.ErrCancelled},
	}
	for _, nc := range d.both() {
		for _, tt := range tests {
			t.Run(nc.name+"/"+tt.typ+"/"+string(tt.status), func(t *testing.T) {
				tk, _, err := nc.c.Submit(c, tt.typ, nil, tt.opts...)
				if err != nil {
					t.Fatal(err)
				}
				if tt.cancel {
					if _, err := nc.other.Cancel(c, tk.ID); err != nil {
						t.Fatal(err)
					}
				}
				got, err := nc.c.Wait(c, tk.ID, 50*time.Millisecond)
				if got == nil || got.ID != tk.ID || got.Status != tt.status {
					t.Fatalf("Wait task = %+v, want %s", got, tt.status)
				}
				if tt.is == nil && err != nil || tt.is != nil && !errors.Is(err, tt.is) || !strings.Contains(fmt.Sprint(err), tt.says) {
					t.Fatalf("Wait error = %v, want %v saying %q", err, tt.is, tt.says)
				}
				other := []error{triage.ErrDeadLettered, triage.ErrCancelled}
				for _, s := range other {
					if s != tt.is && errors.Is(err, s) {
						t.Errorf("Wait error %v also matches %v", err, s)
					}
				}
			})
		}
	}
}
