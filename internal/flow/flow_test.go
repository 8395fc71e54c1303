package flow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/app/consumerapp"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/flow"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

func TestMain(m *testing.M) {
	if role := os.Getenv(childRoleEnv); role != "" {
		runChild(role) // a crash test's victim process (crash_test.go)
		return
	}
	stacktest.Main(m)
}

// recorder is a handler that records the order tasks ran in and what
// parents each saw, and returns {"node": <payload's node>}.
type recorder struct {
	mu      sync.Mutex
	order   []string
	parents map[string][]triagetype.Parent
	fail    map[string]bool // nodes that fail permanently
}

func newRecorder() *recorder {
	return &recorder{parents: map[string][]triagetype.Parent{}, fail: map[string]bool{}}
}

func (r *recorder) Handle(_ context.Context, req handler.Request) (json.RawMessage, error) {
	var p struct {
		Node string `json:"node"`
	}
	_ = json.Unmarshal(req.Payload, &p)
	r.mu.Lock()
	r.order = append(r.order, p.Node)
	r.parents[p.Node] = req.Parents
	fail := r.fail[p.Node]
	r.mu.Unlock()
	if fail {
		return nil, handler.Permanent(fmt.Errorf("node %s fails", p.Node))
	}
	return json.Marshal(map[string]string{"node": p.Node})
}

func (r *recorder) ran() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.order...)
}

// consume runs a consumer of type "node" with h until the test ends.
func consume(t *testing.T, a *app.App, h handler.Handler) {
	t.Helper()
	reg := handler.NewRegistry()
	reg.Register("node", h)
	c := consumerapp.New(a, reg, dispatch.Options{PollWait: time.Second, EmptyBackoff: 100 * time.Millisecond, Lease: 10 * time.Second, LeaseMargin: 2 * time.Second}, dispatch.Deps{})
	stacktest.Run(t, c)
}

// submit submits one "node" task named node after parents, with policy.
func submit(t *testing.T, a *app.App, node string, policy string, after ...string) *task.Task {
	t.Helper()
	r := task.Request{Type: "node", Payload: json.RawMessage(fmt.Sprintf(`{"node":%q}`, node)), After: after, OnParentFailure: policy}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	res := a.Enqueuer.SubmitBatch(context.Background(), []*task.Task{r.NewTask(time.Now().UTC(), 15*time.Minute)})[0]
	if res.Err != nil {
		t.Fatalf("submit %s: %v", node, res.Err)
	}
	return res.Task
}

func TestDiamondRunsInOrderAndSeesParents(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	rec := newRecorder()
	// The parents are submitted before the consumer starts, so B, C and D
	// are recorded while A is still queued: the walk releases them.
	A := submit(t, a, "A", "")
	B := submit(t, a, "B", "", A.ID)
	C := submit(t, a, "C", "", A.ID)
	D := submit(t, a, "D", "", B.ID, C.ID)
	for _, x := range []*task.Task{B, C, D} {
		if x.Status != triagetype.Waiting {
			t.Fatalf("%s is %s, want waiting", x.ID, x.Status)
		}
	}
	consume(t, a, rec)
	stacktest.WaitStatus(t, a.Store, D.ID, triagetype.Completed, time.Minute)

	order := rec.ran()
	pos := map[string]int{}
	for i, n := range order {
		if _, twice := pos[n]; twice {
			t.Fatalf("node %s ran twice: %v", n, order)
		}
		pos[n] = i
	}
	if len(order) != 4 || pos["A"] > pos["B"] || pos["A"] > pos["C"] || pos["B"] > pos["D"] || pos["C"] > pos["D"] {
		t.Fatalf("ran in order %v, want A before B and C, both before D", order)
	}
	ps := rec.parents["D"]
	if len(ps) != 2 {
		t.Fatalf("D saw %d parents, want 2: %+v", len(ps), ps)
	}
	got := map[string]string{}
	for _, p := range ps {
		if p.Status != triagetype.Completed {
			t.Errorf("parent %s is %s", p.ID, p.Status)
		}
		got[p.ID] = string(p.Result)
	}
	if got[B.ID] != `{"node":"B"}` || got[C.ID] != `{"node":"C"}` {
		t.Fatalf("D saw results %v, want B's and C's", got)
	}
}

func TestChildOfFinishedParentRunsAtOnce(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	consume(t, a, newRecorder())
	A := submit(t, a, "A", "")
	stacktest.WaitStatus(t, a.Store, A.ID, triagetype.Completed, time.Minute)
	B := submit(t, a, "B", "", A.ID) // Settle finds A finished
	stacktest.WaitStatus(t, a.Store, B.ID, triagetype.Completed, time.Minute)
}

func TestParentFailurePolicies(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	rec := newRecorder()
	rec.fail["P"] = true
	P := submit(t, a, "P", "")
	cancelled := submit(t, a, "cancel", "", P.ID) // the default policy
	ran := submit(t, a, "run", "run", P.ID)
	dead := submit(t, a, "dead", "dead_letter", P.ID)
	grandchild := submit(t, a, "grandchild", "", cancelled.ID)
	consume(t, a, rec)

	stacktest.WaitStatus(t, a.Store, P.ID, triagetype.DeadLetter, time.Minute)
	c := stacktest.WaitStatus(t, a.Store, cancelled.ID, triagetype.Cancelled, time.Minute)
	d := stacktest.WaitStatus(t, a.Store, dead.ID, triagetype.DeadLetter, time.Minute)
	stacktest.WaitStatus(t, a.Store, ran.ID, triagetype.Completed, time.Minute)
	// The cancelled child's own child follows it (its policy is cancel).
	stacktest.WaitStatus(t, a.Store, grandchild.ID, triagetype.Cancelled, time.Minute)
	for _, x := range []*task.Task{c, d} {
		if x.Error == nil || x.Error.Message == "" || x.Attempts != 0 {
			t.Errorf("%s: error %+v, attempts %d; want the parent's reason and no attempt", x.ID, x.Error, x.Attempts)
		}
	}
	if want := "parent " + P.ID + " is dead_letter: node P fails"; d.Error.Message != want {
		t.Errorf("dead child's reason %q, want %q", d.Error.Message, want)
	}
	if ps := rec.parents["run"]; len(ps) != 1 || ps[0].Status != triagetype.DeadLetter || ps[0].Error == nil {
		t.Errorf("the run-anyway child saw parents %+v, want P dead-lettered with its error", ps)
	}
	for _, n := range rec.ran() {
		if n == "cancel" || n == "dead" || n == "grandchild" {
			t.Errorf("node %s ran", n)
		}
	}
}

func TestCancellingAParentAppliesThePolicy(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	P := submit(t, a, "P", "") // no consumer: it stays queued
	child := submit(t, a, "child", "", P.ID)
	runner := submit(t, a, "runner", "run", P.ID)
	if _, err := a.Store.Cancel(context.Background(), P.ID); err != nil {
		t.Fatal(err)
	}
	stacktest.WaitStatus(t, a.Store, child.ID, triagetype.Cancelled, 10*time.Second)
	r := stacktest.WaitStatus(t, a.Store, runner.ID, triagetype.Queued, 10*time.Second)
	if r.DispatchVersion == task.NoMessage {
		t.Fatalf("released child has no message")
	}
}

func TestUnknownParentIsRefused(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	missing := task.NewID(time.Now())
	r := task.Request{Type: "node", After: []string{missing}}
	res := a.Enqueuer.SubmitBatch(context.Background(), []*task.Task{r.NewTask(time.Now(), 15*time.Minute)})[0]
	var fe *task.FieldError
	if !errors.As(res.Err, &fe) || fe.Field != "after[0]" {
		t.Fatalf("submit after a missing task: %v, want a field error on after[0]", res.Err)
	}
}

// TestSweepReleasesWhatACrashLeft: the parent's terminal write lands but
// its walk never runs (a store without the hook stands for a consumer
// killed between the two). Nothing is released until the promoter's
// sweep, which releases the child exactly once: a second sweep and a late
// walk change nothing.
func TestSweepReleasesWhatACrashLeft(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	P := submit(t, a, "P", "")
	child := submit(t, a, "child", "", P.ID)

	// The crash: P completes with no walk.
	bare := store.New(env.DynamoDB, a.Config.Table, store.WithShards(a.Store.Shards()))
	now := time.Now()
	cur, err := bare.Get(context.Background(), P.ID)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := bare.Transition(context.Background(), cur, triagetype.Executing, func(n *task.Task) { n.Attempts = 1; n.StartedAt = &now })
	if err != nil {
		t.Fatal(err)
	}
	done, err := bare.Transition(context.Background(), ex, triagetype.Completed, func(n *task.Task) { n.CompletedAt = &now; n.Result = json.RawMessage(`1`) })
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := a.Store.Get(context.Background(), child.ID); c.Status != triagetype.Waiting {
		t.Fatalf("child is %s before the sweep, want waiting", c.Status)
	}

	f := flow.New(a.Store, a.Enqueuer, flow.Options{SweepGrace: time.Nanosecond, ReleaseGrace: time.Nanosecond})
	r, err := f.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r.Released != 1 || r.Resolved != 1 {
		t.Fatalf("sweep: %+v, want 1 resolved and 1 released", r)
	}
	c := stacktest.WaitStatus(t, a.Store, child.ID, triagetype.Queued, time.Second)
	// Again, and the late walk: nothing more.
	if r, err := f.Sweep(context.Background()); err != nil || r.Released != 0 || r.Resolved != 0 {
		t.Fatalf("second sweep: %+v, %v; want nothing", r, err)
	}
	f.Finished(context.Background(), done)
	after, _ := a.Store.Get(context.Background(), child.ID)
	if after.Version != c.Version || after.DispatchVersion != c.DispatchVersion {
		t.Fatalf("the late walk moved the child again: version %d -> %d", c.Version, after.Version)
	}
	// One message: the consumer runs it once.
	rec := newRecorder()
	consume(t, a, rec)
	stacktest.WaitStatus(t, a.Store, child.ID, triagetype.Completed, time.Minute)
	time.Sleep(2 * time.Second)
	n := 0
	for _, x := range rec.ran() {
		if x == "child" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("the child ran %d times, want 1 (%v)", n, rec.ran())
	}
}

func storeFilterAll() store.ListFilter { return store.ListFilter{} }
