package direct_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
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
	"github.com/triagehq/triage/triagetype"
	"github.com/triagehq/triage/worker"
)

// TestTransportsAgree runs each scenario of the table through the HTTP
// transport (against the real API handler, as `triage dev` and the Lambda
// function serve it) and then through the direct transport, on the same
// emulated table and queues. The two answers, value and error (status,
// code, field, message, Retry-After), must be equal once ids, times and
// each transport's own tag are masked, and must hold what the scenario
// wants. A scenario's other client is the other transport, for crossing
// over (a key used on one is used on both).
func TestTransportsAgree(t *testing.T) {
	deps := map[string]*deployment{}
	for _, sc := range scenarios {
		d := deps[sc.env]
		if d == nil {
			d = newDeployment(t, sc.env) // for the whole test, not a scenario
			deps[sc.env] = d
		}
		t.Run(sc.name, func(t *testing.T) {
			var got [2]string
			for i, r := range []run{{c: d.http, other: d.direct, tag: "tr-http"}, {c: d.direct, other: d.http, tag: "tr-direct"}} {
				r.ctx, r.d = ctx(t), d
				v, err := sc.do(&r)
				got[i] = normalize(t, v, err)
			}
			if got[0] != got[1] {
				t.Errorf("the transports disagree:\n  http   %s\n  direct %s", got[0], got[1])
			}
			for _, w := range sc.want {
				if !strings.Contains(got[0], w) {
					t.Errorf("answer %s\n  lacks %s", got[0], w)
				}
			}
		})
	}
}

// A scenario is one call (or a few) and what its answer must hold.
type scenario struct {
	name string
	env  string // the deployment: "" plain, "types" with TRIAGE_TYPES, "work" with a worker, "depth" with MaxDepth 2
	want []string
	do   func(r *run) (any, error)
}

// A run is a scenario's turn on one transport: c is it, other the other,
// and tag, unique to the transport, names what the turn makes.
type run struct {
	ctx      context.Context
	c, other *triage.Client
	tag      string
	d        *deployment
}

// fails is what an error answer holds: its status and its field.
func fails(status int, field string) []string {
	return []string{fmt.Sprintf(`"status":%d`, status), fmt.Sprintf(`"field":%q`, field)}
}

func task1(t *triage.Task, _ bool, err error) (any, error) { return t, err }
func value[T any](v T, err error) (any, error)             { return v, err }
func submit(typ string, payload any, opts ...triage.SubmitOption) func(*run) (any, error) {
	return func(r *run) (any, error) { return task1(r.c.Submit(r.ctx, typ, payload, opts...)) }
}

var (
	ulid      = regexp.MustCompile(`\b[0-9A-HJKMNP-TV-Z]{26}\b`)
	timestamp = regexp.MustCompile(`\d{4}-\d\d-\d\dT[0-9:.]+(Z|[+-]\d\d:\d\d)`)
	// volatile fields change between two reads of the same state.
	volatile = regexp.MustCompile(`,"(generated_at|last_heartbeat_at|busy|receive_count)":[^,}\]]*|"(generated_at|last_heartbeat_at|busy|receive_count)":[^,}\]]*,?`)
)

// normalize is an answer as compared: JSON with ids, times, the
// transports' tags and volatile fields masked.
func normalize(t *testing.T, v any, err error) string {
	out := struct {
		Value any            `json:"value,omitempty"`
		Error map[string]any `json:"error,omitempty"`
	}{Value: v}
	if err != nil {
		var e *triage.Error
		if !errors.As(err, &e) {
			t.Fatalf("err = %v (%T), want a *triage.Error", err, err)
		}
		out.Error = map[string]any{"status": e.Status, "code": e.Code, "field": e.Field, "message": e.Message, "retry_after": e.RetryAfter.String()}
	}
	b, jerr := json.Marshal(out)
	if jerr != nil {
		t.Fatal(jerr)
	}
	s := strings.NewReplacer("tr-http", "<tr>", "tr-direct", "<tr>").Replace(string(b))
	return volatile.ReplaceAllString(timestamp.ReplaceAllString(ulid.ReplaceAllString(s, "<id>"), "<t>"), "")
}

// deployment is one table and its queues, with a client on each transport.
type deployment struct {
	env          *stacktest.Env
	http, direct *triage.Client
	queued       *triage.Task // types: a queued and a cancelled task
	cancelled    *triage.Task
	dead         map[string][]string // work: each tag's dead tasks
}

var settings = map[string]map[string]string{
	"types": {triageconfig.EnvTypes: "echo,member,report"},
	"depth": {triageconfig.EnvMaxDepth: "2"},
}

var quiet = slog.New(slog.NewJSONHandler(io.Discard, nil))

// newDeployment bootstraps fresh resources for env, and what its
// scenarios start from.
func newDeployment(t *testing.T, name string) *deployment {
	env := stacktest.New(t)
	toks, err := auth.Parse("adm:admin")
	if err != nil {
		t.Fatal(err)
	}
	a := env.App(t, settings[name])
	srv := httptest.NewServer(apiapp.Handler(a, toks, api.Options{}))
	t.Cleanup(srv.Close)
	if name == "types" {
		stacktest.RunCounters(t, a) // a batch's members are counted from the stream (batch life)
	}
	tr, err := direct.New(ctx(t), env.AWS, direct.Options{Config: envConfig(t, env.Getenv(settings[name]))})
	if err != nil {
		t.Fatal(err)
	}
	d := &deployment{env: env, http: triage.NewClient(triage.HTTP(srv.URL, "adm")), direct: triage.NewClient(tr)}
	c := context.Background()
	switch name {
	case "types":
		d.queued, _, err = d.http.Submit(c, "echo", nil)
		if err == nil {
			d.cancelled, _, err = d.http.Submit(c, "echo", nil)
		}
		if err == nil {
			_, err = d.http.Cancel(c, d.cancelled.ID)
		}
	case "depth": // the low queue at its limit; depths are read at most once a second
		for range 2 {
			if _, _, err = d.http.Submit(c, "echo", nil, triage.WithPriority(triage.Low)); err != nil {
				break
			}
		}
		time.Sleep(1100 * time.Millisecond)
	case "work":
		err = d.startWorker(t)
	}
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// startWorker runs a worker with the work scenarios' handlers, and makes
// two dead tasks for each tag, of type "doomed-<tag>" (such a task fails
// for good on its first run only, so a retried or replayed one completes).
func (d *deployment) startWorker(t *testing.T) error {
	cfg, err := triageconfig.Decode(d.env.Getenv(nil))
	if err != nil {
		return err
	}
	w := worker.New(worker.Options{Config: &cfg, Logger: quiet})
	var failed sync.Map
	for typ, h := range map[string]worker.HandlerFunc{
		"ok":    func(context.Context, *worker.Task) (any, error) { return "done", nil },
		"flaky": func(context.Context, *worker.Task) (any, error) { return nil, errors.New("flaked") },
		"refunded": func(context.Context, *worker.Task) (any, error) {
			return nil, worker.Cancel(errors.New("order refunded"))
		},
	} {
		if err := w.Handle(typ, h); err != nil {
			return err
		}
	}
	doomed := func(_ context.Context, tk *worker.Task) (any, error) {
		if _, again := failed.LoadOrStore(tk.ID, true); again {
			return "revived", nil
		}
		return nil, worker.Permanent(errors.New("no way"))
	}
	for _, typ := range []string{"doomed", "doomed-tr-http", "doomed-tr-direct"} {
		if err := w.Handle(typ, doomed); err != nil {
			return err
		}
	}
	if err := worker.AddWorker(w, func(_ context.Context, j *worker.Job[greeting]) (any, error) {
		return "hello " + j.Args.Name, nil
	}); err != nil {
		return err
	}
	wctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	t.Cleanup(func() { stop(); <-done })
	d.dead = map[string][]string{}
	for _, tag := range []string{"tr-http", "tr-http", "tr-direct", "tr-direct"} {
		tk, _, err := d.http.Submit(context.Background(), "doomed-"+tag, nil, triage.WithPriority(triage.High))
		if err != nil {
			return err
		}
		if _, err := d.http.Wait(ctx(t), tk.ID, 50*time.Millisecond); !errors.Is(err, triage.ErrDeadLettered) {
			return fmt.Errorf("doomed task: %v, want it dead", err)
		}
		d.dead[tag] = append(d.dead[tag], tk.ID)
	}
	return nil
}

// greeting is a typed payload: its Kind is the task type on both ends.
type greeting struct {
	Name string `json:"name"`
}

func (greeting) Kind() string { return "greeting" }

var unknownID = task.NewID(time.Now())

func list(p triage.ListParams) func(*run) (any, error) {
	return func(r *run) (any, error) { return value(r.c.List(r.ctx, p)) }
}

func limits(typ string, rate float64, conc int) func(*run) (any, error) {
	return func(r *run) (any, error) {
		return value(r.c.SetLimits(r.ctx, typ, triagetype.LimitsRequest{RateLimitPerSecond: rate, MaxConcurrency: conc}))
	}
}

func replay(req triagetype.ReplayRequest) func(*run) (any, error) {
	return func(r *run) (any, error) { return value(r.c.ReplayDLQ(r.ctx, req)) }
}

func workflow(req triage.WorkflowRequest) func(*run) (any, error) {
	return func(r *run) (any, error) {
		w, _, err := r.c.SubmitWorkflow(r.ctx, req)
		return w, err
	}
}

// pair is a workflow of two nodes, b after a.
func pair(key string) triage.WorkflowRequest {
	return triage.WorkflowRequest{Name: "pair", IdempotencyKey: key, Nodes: []triage.WorkflowNode{
		{Name: "a", SubmitRequest: triage.SubmitRequest{Type: "echo"}},
		{Name: "b", After: []string{"a"}, SubmitRequest: triage.SubmitRequest{Type: "echo"}},
	}}
}

func createBatch(b triage.BatchCreate) func(*run) (any, error) {
	return func(r *run) (any, error) { return value(r.c.CreateBatch(r.ctx, b)) }
}

func schedule(s triage.Schedule) func(*run) (any, error) {
	return func(r *run) (any, error) {
		sc, _, err := r.c.PutSchedule(r.ctx, s)
		return sc, err
	}
}

// wait submits a task of type typ, cancels it through the other
// transport if cancel, and waits for its end: the task and Wait's error.
func wait(typ string, cancel bool, opts ...triage.SubmitOption) func(*run) (any, error) {
	return func(r *run) (any, error) {
		tk, _, err := r.c.Submit(r.ctx, typ, nil, opts...)
		if err == nil && cancel {
			_, err = r.other.Cancel(r.ctx, tk.ID)
		}
		if err != nil {
			return nil, err
		}
		end, err := r.c.Wait(r.ctx, tk.ID, 50*time.Millisecond)
		return map[string]any{"task": end, "err": fmt.Sprint(err)}, nil
	}
}

// batchLife runs a batch's life, crossing over at each step: created open
// with a member and an on_complete, a member added through the other
// transport and one more with WithBatch, sealed, one refused as late, its
// members cancelled (each a finish), read completed with its callback.
func batchLife(r *run) (any, error) {
	b, err := r.c.CreateBatch(r.ctx, triage.BatchCreate{
		Open:       true,
		Tasks:      []triage.SubmitRequest{{Type: "member", Payload: json.RawMessage(`{"n":1}`), DelaySeconds: new(600)}},
		OnComplete: &triage.SubmitRequest{Type: "report", Payload: json.RawMessage(`{"campaign":7}`)},
	})
	if err != nil {
		return nil, err
	}
	added, err := r.other.AddToBatch(r.ctx, b.ID, []triage.SubmitRequest{{Type: "member", DelaySeconds: new(600)}})
	if err != nil {
		return nil, err
	}
	third, _, err := r.c.Submit(r.ctx, "member", nil, triage.WithBatch(b.ID), triage.WithDelay(10*time.Minute))
	if err != nil {
		return nil, err
	}
	sealed, err := r.other.SealBatch(r.ctx, b.ID)
	if err != nil {
		return nil, err
	}
	late, err := r.c.AddToBatch(r.ctx, b.ID, []triage.SubmitRequest{{Type: "member"}})
	if err != nil {
		return nil, err
	}
	for j, id := range []string{b.Results[0].Task.ID, added.Results[0].Task.ID, third.ID} {
		if _, err := []*triage.Client{r.c, r.other}[j%2].Cancel(r.ctx, id); err != nil {
			return nil, err
		}
	}
	var done *triagetype.Batch
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if done, err = r.c.GetBatch(r.ctx, b.ID); err != nil || done.State == triagetype.BatchCompleted || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	cb, err := r.other.Get(r.ctx, done.CallbackID)
	if err != nil {
		return nil, err
	}
	var payload triagetype.BatchCallback
	err = json.Unmarshal(cb.Payload, &payload)
	callback := err == nil && cb.Type == "report" && payload.BatchID == b.ID && payload.Counts == done.Progress && string(payload.Payload) == `{"campaign":7}`
	again, err := r.c.SealBatch(r.ctx, b.ID)
	return map[string]any{"created": b, "added": added, "sealed": sealed, "late": late, "done": done, "callback": callback, "again": again}, err
}

// status is err's status, 0 for none.
func status(err error) int {
	var e *triage.Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

func sameJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
