package flow_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/api"
	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/app/apiapp"
	"github.com/triagehq/triage/internal/app/consumerapp"
	"github.com/triagehq/triage/internal/app/promoterapp"
	"github.com/triagehq/triage/internal/auth"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/flow"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/promote"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triageconfig"
	"github.com/triagehq/triage/triagetype"
)

// The crash tests run a consumer or the API in a child process (this test
// binary, re-executed, on the same emulators), stop it at the moment that
// matters, kill it with SIGKILL (by its PID), and check what the rest of
// the system makes of what it left: nothing lost, nothing run twice.
const (
	childRoleEnv   = "TRIAGE_TEST_FLOW_CHILD" // consumer or api
	childHangEnv   = "TRIAGE_TEST_FLOW_HANG"  // api: the nodes whose record write hangs
	childWritesEnv = "TRIAGE_TEST_FLOW_WRITES"
	crashToken     = "flow-crash-token"
)

func runChild(role string) {
	fail := func(err error) { fmt.Fprintln(os.Stderr, err); os.Exit(2) }
	cfg, err := triageconfig.FromEnv(os.Getenv)
	if err != nil {
		fail(err)
	}
	ctx := context.Background()
	a, err := app.New(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		fail(err)
	}
	switch role {
	case "consumer":
		// The consumer stops right after a parent's terminal write, before
		// its walk and before its message is deleted.
		a.Store.OnFinish(func(ctx context.Context, t *task.Task) {
			if t.HasChildren && t.Status == triagetype.Completed {
				fmt.Println("FINISHED", t.ID)
				select {}
			}
			a.Flow.Finished(ctx, t)
		})
		reg := handler.NewRegistry()
		reg.Register("node", newRecorder())
		opt := dispatch.Options{PollWait: time.Second, EmptyBackoff: 100 * time.Millisecond, Lease: 4 * time.Second, LeaseMargin: time.Second}
		fail(consumerapp.New(a, reg, opt, dispatch.Deps{WorkerID: "victim"}).Run(ctx))
	case "api":
		// The API's workflow submit records every node but those named in
		// childHangEnv, whose writes hang: the crash comes mid-submit,
		// before the commit, with some nodes written and some not.
		hs := &hangingNodes{Store: a.Store, hang: map[string]bool{}}
		for _, n := range strings.Split(os.Getenv(childHangEnv), ",") {
			hs.hang[n] = true
		}
		fmt.Sscan(os.Getenv(childWritesEnv), &hs.want)
		a.Flow = flow.New(hs, a.Enqueuer, flow.Options{})
		toks, err := auth.Parse(crashToken + ":admin")
		if err != nil {
			fail(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fail(err)
		}
		fmt.Println("LISTENING", ln.Addr())
		fail(http.Serve(ln, apiapp.Handler(a, toks, api.Options{})))
	}
	fail(fmt.Errorf("unknown child role %q", role))
}

// hangingNodes writes workflow nodes except the hanging ones, and says
// HANGING <workflow id> once the want others are written.
type hangingNodes struct {
	*store.Store
	hang    map[string]bool
	want    int
	mu      sync.Mutex
	written int
}

func (h *hangingNodes) Create(ctx context.Context, t *task.Task) (*task.Task, bool, error) {
	if t.WorkflowID != "" && h.hang[t.Node] {
		select {}
	}
	out, created, err := h.Store.Create(ctx, t)
	if t.WorkflowID != "" && err == nil {
		h.mu.Lock()
		h.written++
		if h.written == h.want {
			fmt.Println("HANGING", t.WorkflowID)
		}
		h.mu.Unlock()
	}
	return out, created, err
}

// CreateFresh is Create's hook for a new workflow's batch of nodes: the
// others are written, then it says HANGING and hangs.
func (h *hangingNodes) CreateFresh(ctx context.Context, ts []*task.Task) error {
	var rest []*task.Task
	hangs := false
	for _, t := range ts {
		if h.hang[t.Node] {
			hangs = true
			continue
		}
		rest = append(rest, t)
	}
	if err := h.Store.CreateFresh(ctx, rest); err != nil || !hangs {
		return err
	}
	if len(rest) == h.want {
		fmt.Println("HANGING", ts[0].WorkflowID)
	}
	select {}
}

// child is a started child process and the lines it prints.
type child struct {
	t      *testing.T
	cmd    *exec.Cmd
	lines  chan string
	stderr *bytes.Buffer
}

func startChild(t *testing.T, env *stacktest.Env, role string, extra ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), childRoleEnv+"="+role, "TRIAGE_PREFIX="+env.Prefix), extra...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &child{t: t, cmd: cmd, lines: make(chan string, 16), stderr: &bytes.Buffer{}}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	return c
}

// next waits for the child's next line, which must start with prefix, and
// returns the rest.
func (c *child) next(prefix string, timeout time.Duration) string {
	c.t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok || !strings.HasPrefix(l, prefix) {
			c.t.Fatalf("child said %q (want %s...); stderr: %s", l, prefix, c.stderr.String())
		}
		return strings.TrimPrefix(l, prefix)
	case <-time.After(timeout):
		c.t.Fatalf("child never said %s; stderr: %s", prefix, c.stderr.String())
	}
	return ""
}

// kill sends SIGKILL to the child (its own PID) and reaps it.
func (c *child) kill() {
	c.t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		c.t.Fatal(err)
	}
	_ = c.cmd.Wait()
}

// promoterRun is one run of a fresh promoter (so its flow sweep is due)
// whose flow sweep leaves tasks younger than a second alone.
func promoterRun(t *testing.T, a *app.App) {
	t.Helper()
	sweeper := flow.New(a.Store, a.Enqueuer, flow.Options{SweepGrace: time.Second, ReleaseGrace: time.Second})
	if _, err := promoterapp.New(a, promote.Options{Flow: sweeper}).RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// tally counts, over a workflow's nodes, the ones lost (not completed)
// and the runs beyond each node's first.
func tally(t *testing.T, wf *triagetype.Workflow, runs map[string]int) (lost, doubled int) {
	t.Helper()
	for _, n := range wf.Nodes {
		if n.Status != triagetype.Completed {
			lost++
		}
		if runs[n.Name] > 1 {
			doubled += runs[n.Name] - 1
		}
	}
	return lost, doubled
}

func counted(names []string) map[string]int {
	m := map[string]int{}
	for _, n := range names {
		m[n]++
	}
	return m
}

// TestConsumerKilledAfterParentCompletes: the consumer running A, a
// diamond's root, is killed by SIGKILL right after A's terminal write,
// before its walk releases B and C and before A's message is deleted. The
// promoter's sweep finds A completed and releases them; A's message, back
// on the queue, is dropped. Each node runs once: lost 0, doubled 0.
func TestConsumerKilledAfterParentCompletes(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	stacktest.RunCounters(t, a) // members are counted from the stream
	ctx := context.Background()
	out, err := a.Flow.SubmitWorkflow(ctx, diamond("consumer-crash"), task.KnownTypes{})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, n := range out.Workflow.Nodes {
		ids[n.Name] = n.TaskID
	}
	victim := startChild(t, env, "consumer")
	if got := victim.next("FINISHED ", 90*time.Second); got != ids["A"] {
		t.Fatalf("the child finished %s, want A (%s)", got, ids["A"])
	}
	victim.kill()
	killed := time.Now()

	for _, n := range []string{"B", "C"} {
		c, err := a.Store.Get(ctx, ids[n])
		if err != nil {
			t.Fatal(err)
		}
		if c.Status != triagetype.Waiting || len(c.WaitingOn) != 1 || c.WaitingOn[0] != ids["A"] {
			t.Fatalf("after the kill, %s is %s waiting on %v; want waiting on A (the walk never ran)", n, c.Status, c.WaitingOn)
		}
	}
	rec := newRecorder()
	consume(t, a, rec)
	time.Sleep(1500 * time.Millisecond) // past the sweep's grace
	promoterRun(t, a)
	wf := waitWorkflow(t, a, out.Workflow.ID, triagetype.WorkflowCompleted, 2*time.Minute)

	// A's message comes back once the victim's lease (4 s + 1 s) ends: wait
	// past it, so a second run of A would be seen.
	time.Sleep(time.Until(killed.Add(12 * time.Second)))
	runs := counted(rec.ran())
	A, err := a.Store.Get(ctx, ids["A"])
	if err != nil {
		t.Fatal(err)
	}
	runs["A"] += A.Attempts // its runs in the victim
	lost, doubled := tally(t, wf, runs)
	t.Logf("nodes 4: lost %d, doubled %d; runs %v (A's in the killed consumer: attempts %d)", lost, doubled, runs, A.Attempts)
	if lost != 0 || doubled != 0 || runs["A"] != 1 || runs["B"] != 1 || runs["C"] != 1 || runs["D"] != 1 {
		t.Fatalf("runs %v, lost %d, doubled %d; want each node once", runs, lost, doubled)
	}
	if len(A.History) != 1 || A.History[0].WorkerID != "victim" {
		t.Fatalf("A: worker %s, history %+v; want one attempt, by the victim", A.WorkerID, A.History)
	}
	rec.mu.Lock()
	dp := rec.parents["D"]
	rec.mu.Unlock()
	if len(dp) != 2 || len(dp[0].Result) == 0 || len(dp[1].Result) == 0 {
		t.Fatalf("D saw parents %+v; want B and C with their results", dp)
	}
}

// crashedSubmit is a workflow whose submit the API was killed in: A and B
// were never written, C and D (D runs whatever its parents did) were.
func crashedSubmit(key string) string {
	wf := triagetype.WorkflowRequest{Name: "crashed", IdempotencyKey: key, Nodes: []triagetype.WorkflowNode{
		node("A"), node("B", "A"), node("C", "A"), node("D", "B", "C")}}
	wf.Nodes[3].OnParentFailure = string(triagetype.OnParentRun)
	b, _ := json.Marshal(wf)
	return string(b)
}

// killAPIMidSubmit starts the API in a child process, posts body to POST
// /api/v1/workflows, and kills the API by SIGKILL once C and D are
// written and A and B hang; the request gets no answer. It returns the
// workflow's id.
func killAPIMidSubmit(t *testing.T, env *stacktest.Env, body string) string {
	t.Helper()
	apiChild := startChild(t, env, "api", childHangEnv+"=A,B", childWritesEnv+"=2")
	addr := apiChild.next("LISTENING ", 90*time.Second)
	answered := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/api/v1/workflows", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+crashToken)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			err = fmt.Errorf("answered %d %s", resp.StatusCode, b)
			fmt.Fprintln(apiChild.stderr, err) // shown if the child never hangs
			answered <- err
			return
		}
		answered <- nil
	}()
	id := apiChild.next("HANGING ", 90*time.Second)
	apiChild.kill()
	if err := <-answered; err != nil {
		t.Fatalf("the killed API %v", err)
	}
	return id
}

// nodeStatuses reads workflow id's nodes' statuses by name.
func nodeStatuses(t *testing.T, a *app.App, id string) (*triagetype.Workflow, map[string]triagetype.Status) {
	t.Helper()
	wf, err := a.Flow.Workflow(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	st := map[string]triagetype.Status{}
	for _, n := range wf.Nodes {
		st[n.Name] = n.Status
	}
	return wf, st
}

// postWorkflow posts body to an in-process API on a, as a client's retry.
func postWorkflow(t *testing.T, a *app.App, body string) (int, triagetype.Workflow) {
	t.Helper()
	toks, err := auth.Parse("adm:admin")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(apiapp.Handler(a, toks, api.Options{}))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/workflows", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer adm")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var wf triagetype.Workflow
	_ = json.NewDecoder(resp.Body).Decode(&wf)
	return resp.StatusCode, wf
}

// TestAPIKilledMidWorkflowSubmit: the API is killed by SIGKILL mid-submit,
// with C and D written and their parents A and B not. Nothing of it is
// runnable: a consumer and the promoter's sweep run, and no node runs (D,
// whose policy is run, would if the sweep took its never-written parents
// for gone ones). The client's retry with the same idempotency key
// completes the workflow: each node runs once, lost 0, doubled 0.
func TestAPIKilledMidWorkflowSubmit(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	stacktest.RunCounters(t, a) // members are counted from the stream
	body := crashedSubmit("api-crash")
	id := killAPIMidSubmit(t, env, body)

	rec := newRecorder()
	consume(t, a, rec)
	time.Sleep(1500 * time.Millisecond) // past the sweep's grace
	promoterRun(t, a)
	time.Sleep(3 * time.Second)
	wf, st := nodeStatuses(t, a, id)
	if wf.State != triagetype.WorkflowPending || st["C"] != triagetype.Waiting || st["D"] != triagetype.Waiting || st["A"] != triagetype.Waiting || st["B"] != triagetype.Waiting {
		t.Fatalf("after the kill and a sweep: %s %v; want pending, every node waiting", wf.State, st)
	}
	if u := unwrittenNodes(wf); u != "A,B" {
		t.Fatalf("unwritten nodes %q; want A,B (C and D were written)", u)
	}
	if ran := rec.ran(); len(ran) != 0 {
		t.Fatalf("nodes of an uncommitted workflow ran: %v", ran)
	}

	status, got := postWorkflow(t, a, body)
	if status != http.StatusOK || got.ID != id {
		t.Fatalf("retry: %d %+v; want 200 and workflow %s", status, got, id)
	}
	wf = waitWorkflow(t, a, id, triagetype.WorkflowCompleted, 2*time.Minute)
	time.Sleep(2 * time.Second)
	promoterRun(t, a) // and a sweep after: nothing more
	time.Sleep(2 * time.Second)
	ran := rec.ran()
	lost, doubled := tally(t, wf, counted(ran))
	sort.Strings(ran)
	t.Logf("nodes 4: lost %d, doubled %d; ran %v", lost, doubled, ran)
	if lost != 0 || doubled != 0 || strings.Join(ran, ",") != "A,B,C,D" {
		t.Fatalf("ran %v, lost %d, doubled %d; want each node once", ran, lost, doubled)
	}
}

// TestAbandonedWorkflowIsCancelled: a workflow whose submit the API was
// killed in, and which no retry completes, is abandoned by the sweep once
// pending longer than AbandonAfter: its written nodes are cancelled
// (nothing is left waiting), none ran, and a late retry with the key gets
// it back abandoned, running nothing.
func TestAbandonedWorkflowIsCancelled(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	stacktest.RunCounters(t, a) // members are counted from the stream
	body := crashedSubmit("never-retried")
	id := killAPIMidSubmit(t, env, body)
	rec := newRecorder()
	consume(t, a, rec)

	ctx := context.Background()
	time.Sleep(1500 * time.Millisecond) // past the sweep's grace
	pending, _ := nodeStatuses(t, a, id)
	// The abandonment grace ends 4 s from now, measured from the submit.
	grace := time.Since(pending.CreatedAt) + 4*time.Second
	sweeper := flow.New(a.Store, a.Enqueuer, flow.Options{SweepGrace: time.Second, ReleaseGrace: time.Second, AbandonAfter: grace})
	if r, err := sweeper.Sweep(ctx); err != nil || r.Abandoned != 0 || r.Checked != 2 {
		t.Fatalf("sweep inside the abandonment grace: %+v, %v; want C and D checked, nothing abandoned", r, err)
	}
	time.Sleep(time.Until(pending.CreatedAt.Add(grace + 500*time.Millisecond)))
	r, err := sweeper.Sweep(ctx)
	if err != nil || r.Abandoned != 1 {
		t.Fatalf("sweep past the grace: %+v, %v; want 1 abandoned", r, err)
	}
	wf, st := nodeStatuses(t, a, id)
	if wf.State != triagetype.WorkflowAbandoned || st["A"] != triagetype.Cancelled || st["B"] != triagetype.Cancelled || st["C"] != triagetype.Cancelled || st["D"] != triagetype.Cancelled {
		t.Fatalf("after the abandonment: %s %v; want abandoned, every node cancelled", wf.State, st)
	}
	if u := unwrittenNodes(wf); u != "A,B" {
		t.Fatalf("unwritten nodes %q; want A,B", u)
	}
	d, err := a.Store.Get(ctx, wf.Nodes[3].TaskID)
	if err != nil || d.Error == nil || !strings.Contains(d.Error.Message, "never committed") {
		t.Fatalf("D: %+v, %v; want the reason", d, err)
	}
	if r, err := sweeper.Sweep(ctx); err != nil || r.Abandoned != 0 || r.Released != 0 {
		t.Fatalf("a second sweep: %+v, %v; want nothing", r, err)
	}
	status, got := postWorkflow(t, a, body)
	if status != http.StatusOK || got.ID != id || got.State != triagetype.WorkflowAbandoned {
		t.Fatalf("late retry: %d %+v; want 200, the abandoned workflow", status, got)
	}
	time.Sleep(3 * time.Second)
	if ran := rec.ran(); len(ran) != 0 {
		t.Fatalf("nodes of an abandoned workflow ran: %v", ran)
	}
	if p := waitDone(t, 4, workflowProgress(a, id)); p.Cancelled != 4 || p.Done != 4 || p.Total != 4 {
		t.Fatalf("progress %+v; want 4 of 4 done, cancelled (2 written, 2 never written)", p)
	}
}

// unwrittenNodes lists, comma-separated, the nodes of wf marked unwritten.
func unwrittenNodes(wf *triagetype.Workflow) string {
	var out []string
	for _, n := range wf.Nodes {
		if n.Unwritten {
			out = append(out, n.Name)
		}
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}
