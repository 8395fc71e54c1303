package flow_test

import (
	"context"
	"errors"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/flow"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// The tests here decide, on the emulators, the races of an uncommitted
// workflow: a retry's commit against the sweep's abandonment, and a node
// cancelled by hand against the commit. The interleavings are forced with
// hooks on the store's decisive writes (a pause each goroutine stops at
// until the test lets it go) and a test clock, not with sleeps.

// hooked is the task store as one Flow sees it: its clock runs ahead by
// ahead, and the hooks run before the writes that decide a workflow.
type hooked struct {
	*store.Store
	ahead         time.Duration
	beforeSeal    func()                 // the commit (SealHead)
	beforeAbandon func()                 // the abandonment (AbandonHead)
	beforeHold    func()                 // a node finished before the commit (HoldFinished)
	beforeCreate  func(*task.Task) error // a node's record; an error fails it
}

func (h *hooked) Now() time.Time { return h.Store.Now().Add(h.ahead) }

func (h *hooked) SealHead(ctx context.Context, id, state string) (*store.BatchHead, error) {
	if h.beforeSeal != nil {
		h.beforeSeal()
	}
	return h.Store.SealHead(ctx, id, state)
}

func (h *hooked) AbandonHead(ctx context.Context, id string) (bool, error) {
	if h.beforeAbandon != nil {
		h.beforeAbandon()
	}
	return h.Store.AbandonHead(ctx, id)
}

func (h *hooked) HoldFinished(ctx context.Context, id, taskID string) (bool, error) {
	if h.beforeHold != nil {
		h.beforeHold()
	}
	return h.Store.HoldFinished(ctx, id, taskID)
}

func (h *hooked) Create(ctx context.Context, t *task.Task) (*task.Task, bool, error) {
	if h.beforeCreate != nil {
		if err := h.beforeCreate(t); err != nil {
			return nil, false, err
		}
	}
	return h.Store.Create(ctx, t)
}

// CreateFresh is Create's hook for a new workflow's batch of nodes: the
// nodes beforeCreate fails are not written, the others are.
func (h *hooked) CreateFresh(ctx context.Context, ts []*task.Task) error {
	if h.beforeCreate == nil {
		return h.Store.CreateFresh(ctx, ts)
	}
	var ok []*task.Task
	var errs []error
	for _, t := range ts {
		if err := h.beforeCreate(t); err != nil {
			errs = append(errs, err)
			continue
		}
		ok = append(ok, t)
	}
	if len(ok) > 0 {
		errs = append(errs, h.Store.CreateFresh(ctx, ok))
	}
	return errors.Join(errs...)
}

// pause stops every goroutine that hits it until the test opens it; the
// test waits for the first to arrive.
type pause struct {
	reached, release chan struct{}
	once             sync.Once
}

func newPause() *pause { return &pause{reached: make(chan struct{}), release: make(chan struct{})} }

func (p *pause) hit() {
	p.once.Do(func() { close(p.reached) })
	<-p.release
}

func (p *pause) wait(t *testing.T, what string) {
	t.Helper()
	select {
	case <-p.reached:
	case <-time.After(2 * time.Minute):
		t.Fatalf("never reached: %s", what)
	}
}

func (p *pause) open() { close(p.release) }

var errCrash = errors.New("the submit stopped here (a crash)")

// fourNodes is A -> B, A -> C, B+C -> D (D runs whatever its parents did),
// its node names (and payloads) prefixed with prefix.
func fourNodes(prefix, key string) *triagetype.WorkflowRequest {
	return &triagetype.WorkflowRequest{Name: "race", IdempotencyKey: key, Nodes: []triagetype.WorkflowNode{
		node(prefix + "A"), node(prefix+"B", prefix+"A"), node(prefix+"C", prefix+"A"),
		withPolicy(node(prefix+"D", prefix+"B", prefix+"C"), string(triagetype.OnParentRun))}}
}

// halfWritten submits req and stops it mid-submit, as a crash would: the
// nodes named in missing are never written, the others are, and there is
// no commit. It returns the workflow's id.
func halfWritten(t *testing.T, a *app.App, req *triagetype.WorkflowRequest, missing ...string) string {
	t.Helper()
	var mu sync.Mutex
	id := ""
	crashing := flow.New(&hooked{Store: a.Store, beforeCreate: func(x *task.Task) error {
		mu.Lock()
		id = x.WorkflowID
		mu.Unlock()
		if slices.Contains(missing, x.Node) {
			return errCrash
		}
		return nil
	}}, a.Enqueuer, flow.Options{})
	if _, err := crashing.SubmitWorkflow(context.Background(), req, task.KnownTypes{}); !errors.Is(err, errCrash) {
		t.Fatalf("the crashing submit: %v, want it stopped", err)
	}
	return id
}

// abandoner is a sweep two hours ahead (past AbandonAfter) that leaves no
// waiting task to its parents' walks.
func abandoner(a *app.App, h *hooked) *flow.Flow {
	h.Store, h.ahead = a.Store, 2*time.Hour
	return flow.New(h, a.Enqueuer, flow.Options{SweepGrace: time.Nanosecond, ReleaseGrace: time.Nanosecond})
}

// nodeTasks reads workflow id's node tasks by name (a node never written
// is missing).
func nodeTasks(t *testing.T, a *app.App, id string) (*triagetype.Workflow, map[string]*task.Task) {
	t.Helper()
	ctx := context.Background()
	wf, err := a.Flow.Workflow(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*task.Task{}
	for _, n := range wf.Nodes {
		x, err := a.Store.Get(ctx, n.TaskID)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		out[n.Name] = x
	}
	return wf, out
}

// neverRan checks that every node of workflow id is a cancelled task that
// was never released: no message, no attempt (so no consumer can run it,
// whenever it looks).
func neverRan(t *testing.T, a *app.App, id string) {
	t.Helper()
	wf, ts := nodeTasks(t, a, id)
	if wf.State != triagetype.WorkflowAbandoned {
		t.Fatalf("workflow %s is %s, want abandoned", id, wf.State)
	}
	for _, n := range wf.Nodes {
		x := ts[n.Name]
		if x == nil {
			t.Fatalf("node %s was never written", n.Name)
		}
		if x.Status != triagetype.Cancelled || x.EnqueuedAt != nil || x.DispatchVersion != task.NoMessage || x.Attempts != 0 {
			t.Fatalf("node %s of an abandoned workflow: %s, enqueued %v, message %d, attempts %d; want cancelled, never released",
				n.Name, x.Status, x.EnqueuedAt, x.DispatchVersion, x.Attempts)
		}
	}
}

// ranWith returns the nodes rec ran whose names start with prefix, sorted.
func ranWith(rec *recorder, prefix string) []string {
	var out []string
	for _, n := range rec.ran() {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// TestRetryRacingAbandonment: a workflow half-written by a crashed submit
// (A and B never written, C and D waiting) is retried with its
// idempotency key just as the sweep abandons it. Whichever conditional
// write on the head comes first wins, and only it: the retry's commit
// (then the abandonment is refused and every node runs once) or the
// abandonment (then the commit is refused and no node runs, and when the
// retry returns no node is left waiting, even the ones it wrote after the
// sweep's cancel pass).
func TestRetryRacingAbandonment(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	stacktest.RunCounters(t, a) // members are counted from the stream
	rec := newRecorder()
	consume(t, a, rec)
	ctx := context.Background()
	type submitted struct {
		out *flow.WorkflowOutcome
		err error
	}

	t.Run("abandonment before the commit", func(t *testing.T) {
		req := fourNodes("ab.", "race-abandon-first")
		id := halfWritten(t, a, req, "ab.A", "ab.B")
		p := newPause()
		retry := flow.New(&hooked{Store: a.Store, beforeSeal: p.hit}, a.Enqueuer, flow.Options{})
		done := make(chan submitted, 1)
		go func() {
			out, err := retry.SubmitWorkflow(ctx, req, task.KnownTypes{})
			done <- submitted{out, err}
		}()
		p.wait(t, "the retry's commit")
		// The retry wrote A and B and is about to commit; the sweep
		// abandons the workflow first.
		r, err := abandoner(a, &hooked{}).Sweep(ctx)
		if err != nil || r.Abandoned != 1 || r.Released != 0 {
			t.Fatalf("sweep: %+v, %v; want the workflow abandoned, nothing released", r, err)
		}
		p.open()
		s := <-done
		if s.err != nil || s.out.Created || s.out.Workflow.ID != id || s.out.Workflow.State != triagetype.WorkflowAbandoned {
			t.Fatalf("the retry: %+v, %v; want workflow %s back abandoned", s.out, s.err, id)
		}
		neverRan(t, a, id)
	})

	t.Run("abandonment amid the retry's writes", func(t *testing.T) {
		req := fourNodes("mid.", "race-abandon-mid")
		id := halfWritten(t, a, req, "mid.A", "mid.B")
		p := newPause()
		retry := flow.New(&hooked{Store: a.Store, beforeCreate: func(x *task.Task) error {
			if x.Node == "mid.A" || x.Node == "mid.B" {
				p.hit()
			}
			return nil
		}}, a.Enqueuer, flow.Options{})
		done := make(chan submitted, 1)
		go func() {
			out, err := retry.SubmitWorkflow(ctx, req, task.KnownTypes{})
			done <- submitted{out, err}
		}()
		p.wait(t, "the retry's write of A or B")
		// The sweep abandons the workflow and cancels C and D; A and B are
		// written after its cancel pass, then the commit is refused.
		r, err := abandoner(a, &hooked{}).Sweep(ctx)
		if err != nil || r.Abandoned != 1 {
			t.Fatalf("sweep: %+v, %v; want the workflow abandoned", r, err)
		}
		_, ts := nodeTasks(t, a, id)
		if len(ts) != 2 || ts["mid.C"].Status != triagetype.Cancelled || ts["mid.D"].Status != triagetype.Cancelled {
			t.Fatalf("after the sweep: %d nodes written; want C and D, cancelled", len(ts))
		}
		p.open()
		s := <-done
		if s.err != nil || s.out.Workflow.State != triagetype.WorkflowAbandoned {
			t.Fatalf("the retry: %+v, %v; want the workflow back abandoned", s.out, s.err)
		}
		// No second sweep: the refused commit cancelled A and B itself.
		neverRan(t, a, id)
		for _, n := range s.out.Workflow.Nodes {
			if n.Status != triagetype.Cancelled || n.Unwritten {
				t.Fatalf("the retry's answer: node %+v; want every node written and cancelled", n)
			}
		}
	})

	t.Run("commit before the abandonment", func(t *testing.T) {
		req := fourNodes("cm.", "race-commit-first")
		id := halfWritten(t, a, req, "cm.A", "cm.B")
		p := newPause()
		swept := make(chan submitted, 1)
		go func() {
			r, err := abandoner(a, &hooked{beforeAbandon: p.hit}).Sweep(ctx)
			if err == nil && r.Abandoned != 0 {
				err = errors.New("the sweep abandoned a committed workflow")
			}
			swept <- submitted{err: err}
		}()
		p.wait(t, "the sweep's abandonment")
		// The sweep read the head pending past the grace and is about to
		// abandon it; the retry commits first.
		out, err := a.Flow.SubmitWorkflow(ctx, req, task.KnownTypes{})
		if err != nil || out.Created || out.Workflow.ID != id || out.Workflow.State != triagetype.WorkflowRunning {
			t.Fatalf("the retry: %+v, %v; want workflow %s committed", out, err, id)
		}
		p.open()
		if s := <-swept; s.err != nil {
			t.Fatal(s.err)
		}
		h, err := a.Store.Batch(ctx, id)
		if err != nil || h.State == triagetype.WorkflowAbandoned || !h.Sealed {
			t.Fatalf("head after both: %+v, %v; want committed, not abandoned", h, err)
		}
		wf := waitWorkflow(t, a, id, triagetype.WorkflowCompleted, 2*time.Minute)
		if p := wf.Progress; p.Completed != 4 || p.Done != 4 {
			t.Fatalf("progress %+v; want the 4 nodes completed", p)
		}
		if got := strings.Join(ranWith(rec, "cm."), ","); got != "cm.A,cm.B,cm.C,cm.D" {
			t.Fatalf("ran %s; want each node once", got)
		}
	})

	// The consumer ran all along (and the committed workflow's wait gave it
	// seconds): no node of the abandoned workflows ran.
	if got := append(ranWith(rec, "ab."), ranWith(rec, "mid.")...); len(got) != 0 {
		t.Fatalf("nodes of abandoned workflows ran: %v", got)
	}
}

// TestCancelBeforeCommit: a node of an uncommitted workflow cancelled by
// hand releases nothing, even a child whose policy is run. The commit (a
// retry with the key) applies the cancelled node's policies then, as if it
// had been cancelled just after; an abandonment cancels every node. A
// cancel racing the commit is ordered on the head: held for the commit, or
// walked by the canceller once the commit is in.
func TestCancelBeforeCommit(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	stacktest.RunCounters(t, a) // members are counted from the stream
	rec := newRecorder()
	consume(t, a, rec)
	ctx := context.Background()

	// A -> B (run), A -> C (cancel), recorded whole but not committed.
	recorded := func(t *testing.T, prefix string) (*triagetype.WorkflowRequest, string, map[string]string) {
		t.Helper()
		req := &triagetype.WorkflowRequest{Name: "cancel", IdempotencyKey: prefix, Nodes: []triagetype.WorkflowNode{
			node(prefix + "A"), withPolicy(node(prefix+"B", prefix+"A"), string(triagetype.OnParentRun)), node(prefix+"C", prefix+"A")}}
		id, err := a.Flow.RecordOnly(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		wf, err := a.Flow.Workflow(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]string{}
		for _, n := range wf.Nodes {
			ids[strings.TrimPrefix(n.Name, prefix)] = n.TaskID
		}
		return req, id, ids
	}
	// stillWaiting checks that A's cancel released and cancelled nothing.
	stillWaiting := func(t *testing.T, prefix, id string) {
		t.Helper()
		_, ts := nodeTasks(t, a, id)
		for _, n := range []string{"B", "C"} {
			if x := ts[prefix+n]; x.Status != triagetype.Waiting {
				t.Fatalf("after A's cancel, before any commit, %s is %s; want waiting", n, x.Status)
			}
		}
	}
	// committedAfter checks that the commit applied A's cancel: B released
	// (and it runs), C cancelled, the workflow completes.
	committedAfter := func(t *testing.T, prefix, id string) {
		t.Helper()
		_, ts := nodeTasks(t, a, id)
		if b := ts[prefix+"B"]; b.Status == triagetype.Waiting || b.DispatchVersion == task.NoMessage {
			t.Fatalf("after the commit, B (run) is %s; want it released", b.Status)
		}
		if c := ts[prefix+"C"]; c.Status != triagetype.Cancelled {
			t.Fatalf("after the commit, C (cancel) is %s; want cancelled", c.Status)
		}
		wf := waitWorkflow(t, a, id, triagetype.WorkflowCompleted, 2*time.Minute)
		if p := wf.Progress; p.Total != 3 || p.Completed != 1 || p.Cancelled != 2 {
			t.Fatalf("progress %+v; want B completed, A and C cancelled", p)
		}
		if got := strings.Join(ranWith(rec, prefix), ","); got != prefix+"B" {
			t.Fatalf("ran %q; want only B", got)
		}
	}

	t.Run("the commit applies the policies", func(t *testing.T) {
		req, id, ids := recorded(t, "commit.")
		if _, err := a.Store.Cancel(ctx, ids["A"]); err != nil {
			t.Fatal(err)
		}
		stillWaiting(t, "commit.", id)
		if h, err := a.Store.Batch(ctx, id); err != nil || len(h.Held) != 1 || h.Held[0] != ids["A"] {
			t.Fatalf("head %+v, %v; want A held for the commit", h, err)
		}
		out, err := a.Flow.SubmitWorkflow(ctx, req, task.KnownTypes{})
		if err != nil || out.Workflow.State != triagetype.WorkflowRunning {
			t.Fatalf("the retry: %+v, %v; want it committed", out, err)
		}
		committedAfter(t, "commit.", id)
	})

	t.Run("the abandonment cancels every node", func(t *testing.T) {
		_, id, ids := recorded(t, "abandon.")
		if _, err := a.Store.Cancel(ctx, ids["A"]); err != nil {
			t.Fatal(err)
		}
		stillWaiting(t, "abandon.", id)
		if r, err := abandoner(a, &hooked{}).Sweep(ctx); err != nil || r.Abandoned != 1 || r.Released != 0 {
			t.Fatalf("sweep: %+v, %v; want the workflow abandoned, nothing released", r, err)
		}
		neverRan(t, a, id)
		if p := waitDone(t, 3, workflowProgress(a, id)); p.Cancelled != 3 || p.Done != 3 {
			t.Fatalf("progress %+v; want the 3 nodes cancelled", p)
		}
	})

	t.Run("a cancel racing the commit", func(t *testing.T) {
		req, id, ids := recorded(t, "race.")
		// The canceller is another process (its own store and hook): it
		// reads the head pending and stops before its hold.
		b := env.App(t, nil)
		p := newPause()
		b.Store.OnFinish(flow.New(&hooked{Store: b.Store, beforeHold: p.hit}, b.Enqueuer, flow.Options{}).Finished)
		cancelled := make(chan error, 1)
		go func() {
			_, err := b.Store.Cancel(ctx, ids["A"])
			cancelled <- err
		}()
		p.wait(t, "the cancel's hold")
		out, err := a.Flow.SubmitWorkflow(ctx, req, task.KnownTypes{})
		if err != nil || out.Workflow.State != triagetype.WorkflowRunning {
			t.Fatalf("the retry: %+v, %v; want it committed", out, err)
		}
		p.open() // the hold is refused: the canceller walks A itself
		if err := <-cancelled; err != nil {
			t.Fatal(err)
		}
		if h, err := a.Store.Batch(ctx, id); err != nil || len(h.Held) != 0 {
			t.Fatalf("head %+v, %v; want nothing held", h, err)
		}
		committedAfter(t, "race.", id)
	})
}
