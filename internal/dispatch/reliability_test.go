package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/triagehq/triage/internal/api"
	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/app/apiapp"
	"github.com/triagehq/triage/internal/app/consumerapp"
	"github.com/triagehq/triage/internal/auth"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/handler/demo"
	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triageconfig"
	"github.com/triagehq/triage/triagetype"
)

// submitOne records and sends one task built from r.
func submitOne(t *testing.T, a *app.App, r task.Request) *task.Task {
	t.Helper()
	tk, _, err := a.Enqueuer.Submit(context.Background(), r.NewTask(time.Now().UTC(), 15*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func intp(n int) *int { return &n }

func demoRegistry() *handler.Registry {
	r := handler.NewRegistry()
	demo.Register(r)
	return r
}

// dlqMessages drains up to n messages from priority p's DLQ.
func dlqMessages(t *testing.T, a *app.App, p triagetype.Priority, n int) []queue.Received {
	t.Helper()
	var out []queue.Received
	deadline := time.Now().Add(10 * time.Second)
	for len(out) < n && time.Now().Before(deadline) {
		msgs, err := a.Queues.ReceiveDLQ(context.Background(), p, 10, time.Second, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, msgs...)
	}
	return out
}

func TestRetriesBackOffThenComplete(t *testing.T) {
	t.Parallel() // its own stack; waits, not timing, make it slow
	env := stacktest.New(t)
	a := env.App(t, nil)
	tk := submitOne(t, a, task.Request{Type: "fail", Priority: "high", Payload: json.RawMessage(`{"times":2}`), MaxAttempts: intp(3)})
	opt := stacktest.FastDispatch()
	opt.Backoff = map[triagetype.Priority]triageconfig.Backoff{triagetype.High: {Base: 2 * time.Second, Max: time.Minute, Jitter: 0.25}}
	stacktest.Run(t, consumerapp.New(a, demoRegistry(), opt, dispatch.Deps{}))
	done := stacktest.WaitStatus(t, a.Store, tk.ID, triagetype.Completed, 40*time.Second)
	if done.Attempts != 3 || len(done.History) != 3 {
		t.Fatalf("attempts %d, history %d, want 3 and 3", done.Attempts, len(done.History))
	}
	gap1 := done.History[1].StartedAt.Sub(done.History[0].StartedAt)
	gap2 := done.History[2].StartedAt.Sub(done.History[1].StartedAt)
	t.Logf("gaps between attempts: %v, %v", gap1, gap2)
	if gap1 < 1500*time.Millisecond || gap2 <= gap1 {
		t.Fatalf("gaps %v then %v: want at least the base delay, then growing", gap1, gap2)
	}
	if done.History[0].Error == "" || done.History[2].Error != "" || string(done.Result) != `{"succeeded_on_attempt":3}` {
		t.Fatalf("history %+v result %s", done.History, done.Result)
	}
}

// TestRetryBackoffFromEnvironment shows TRIAGE_RETRY_BACKOFF reaching the
// consumer the app builds: medium's wait becomes 3 s (default: 1 s).
func TestRetryBackoffFromEnvironment(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, map[string]string{"TRIAGE_RETRY_BACKOFF": "medium=3s:3s"})
	tk := submitOne(t, a, task.Request{Type: "fail", Priority: "medium", Payload: json.RawMessage(`{"times":1}`)})
	stacktest.Run(t, consumerapp.New(a, demoRegistry(), stacktest.FastDispatch(), dispatch.Deps{}))
	done := stacktest.WaitStatus(t, a.Store, tk.ID, triagetype.Completed, 30*time.Second)
	if len(done.History) != 2 {
		t.Fatalf("history %+v, want 2 attempts", done.History)
	}
	gap := done.History[1].StartedAt.Sub(done.History[0].StartedAt)
	t.Logf("gap between attempts: %v (configured 3s less up to 25%% jitter, rounded up to whole seconds)", gap)
	if gap < 2500*time.Millisecond {
		t.Fatalf("retry came after %v: the configured 3s backoff was not applied", gap)
	}
}

func TestNonRetriableErrorGoesStraightToDLQ(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	tk := submitOne(t, a, task.Request{Type: "fail", Priority: "medium", Payload: json.RawMessage(`{"times":9,"permanent":true,"message":"card declined"}`), MaxAttempts: intp(5)})
	stacktest.Run(t, consumerapp.New(a, demoRegistry(), stacktest.FastDispatch(), dispatch.Deps{}))
	dead := stacktest.WaitStatus(t, a.Store, tk.ID, triagetype.DeadLetter, 20*time.Second)
	if dead.Attempts != 1 || dead.Error == nil || dead.Error.Message != "card declined" || dead.Error.Retriable {
		t.Fatalf("dead task: attempts %d error %+v", dead.Attempts, dead.Error)
	}
	msgs := dlqMessages(t, a, triagetype.Medium, 1)
	if len(msgs) != 1 || !strings.Contains(msgs[0].Body, tk.ID) || msgs[0].Reason != "card declined" {
		t.Fatalf("DLQ holds %+v", msgs)
	}
}

func TestTimeoutCutsOffAndRetries(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	tk := submitOne(t, a, task.Request{Type: "sleep", Priority: "high", Payload: json.RawMessage(`{"ms":5000}`), MaxAttempts: intp(2), TimeoutSeconds: intp(1)})
	opt := stacktest.FastDispatch()
	opt.Backoff = map[triagetype.Priority]triageconfig.Backoff{triagetype.High: {Base: time.Second, Max: time.Second}}
	stacktest.Run(t, consumerapp.New(a, demoRegistry(), opt, dispatch.Deps{}))
	dead := stacktest.WaitStatus(t, a.Store, tk.ID, triagetype.DeadLetter, 30*time.Second)
	if dead.Attempts != 2 || len(dead.History) != 2 {
		t.Fatalf("attempts %d history %+v", dead.Attempts, dead.History)
	}
	for _, h := range dead.History {
		took := h.FinishedAt.Sub(h.StartedAt)
		if !strings.Contains(h.Error, "timeout") || took > 2500*time.Millisecond {
			t.Fatalf("attempt %d: error %q after %v; want a timeout after about 1 s", h.Attempt, h.Error, took)
		}
	}
	if !strings.Contains(dead.Error.Message, "timeout") || !dead.Error.Retriable {
		t.Fatalf("final error %+v", dead.Error)
	}
}

// The crash test runs a consumer in a child process (this test binary,
// re-executed) and kills it with SIGKILL mid-task.
const childEnv = "TRIAGE_TEST_CHILD_CONSUMER"

func runChildConsumer() {
	cfg, err := triageconfig.FromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	a, err := app.New(context.Background(), cfg, app.NewLogger(os.Stderr, "info"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	opt := dispatch.Options{Lease: 2 * time.Second, LeaseMargin: time.Second, PollWait: time.Second}
	if os.Getenv(triageconfig.EnvLease) != "" { // TRIAGE_LEASE given: the lease and its margin come from it, as in production
		opt.Lease, opt.LeaseMargin = 0, 0
	}
	_ = consumerapp.New(a, demoRegistry(), opt, dispatch.Deps{WorkerID: "victim"}).Run(context.Background())
}

func TestCrashedConsumerTaskIsFinishedByAnother(t *testing.T) {
	t.Parallel() // its own stack; waits, not timing, make it slow
	crashedTaskFinishedByAnother(t, func(a *app.App, reg *handler.Registry, opt dispatch.Options) stacktest.Runner {
		return consumerapp.New(a, reg, opt, dispatch.Deps{WorkerID: "rescuer"})
	}, "rescuer", false)
}

// The same for a direct send, which the victim records already claimed
// (create and claim in one put): its lease expires, and the rescuer
// reclaims it with the lost attempt counted.
func TestCrashedDirectSendIsFinishedByAnother(t *testing.T) {
	t.Parallel()
	crashedTaskFinishedByAnother(t, func(a *app.App, reg *handler.Registry, opt dispatch.Options) stacktest.Runner {
		return consumerapp.New(a, reg, opt, dispatch.Deps{WorkerID: "rescuer"})
	}, "rescuer", true)
}

// The same with the rescuer started by SQS events, as in Lambda: the
// SIGKILLed consumer's message comes back when its lease ends, starts an
// invocation, and the task is reclaimed with the lost attempt counted.
func TestEventsCrashedConsumerTaskIsFinishedByAnother(t *testing.T) {
	t.Parallel()
	crashedTaskFinishedByAnother(t, byEvents, "", false)
}

// crashedTaskFinishedByAnother SIGKILLs a consumer process ("victim")
// running a task and starts a rescuer with start, which must finish the
// task on its second attempt (as worker rescuer, when not ""). With
// direct, the task is sent straight to the high queue, not submitted.
func crashedTaskFinishedByAnother(t *testing.T, start starter, rescuer string, direct bool) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childEnv+"=1", "TRIAGE_PREFIX="+env.Prefix)
	var childLog strings.Builder
	child.Stderr = &childLog
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })

	var tk *task.Task
	if direct {
		tk = sendDirect(t, env, a, `{"type":"sleep","payload":{"ms":3000},"timeout_seconds":20,"max_attempts":3}`)
	} else {
		tk = submitOne(t, a, task.Request{Type: "sleep", Priority: "high", Payload: json.RawMessage(`{"ms":3000}`), TimeoutSeconds: intp(20), MaxAttempts: intp(3)})
	}
	running := stacktest.WaitStatus(t, a.Store, tk.ID, triagetype.Executing, 20*time.Second)
	if running.WorkerID != "victim" || running.Attempts != 1 {
		t.Fatalf("claimed by %q", running.WorkerID)
	}
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()

	l := newLedger(demo.Sleep)
	opt := stacktest.FastDispatch()
	opt.Lease, opt.LeaseMargin = 2*time.Second, time.Second
	stacktest.Run(t, start(a, stacktest.Registry("sleep", l), opt))
	done := stacktest.WaitStatus(t, a.Store, tk.ID, triagetype.Completed, 40*time.Second)
	checkOnce(t, l, []string{tk.ID})
	if done.Attempts != 2 || len(done.History) != 2 || done.History[0].WorkerID != "victim" || !strings.Contains(done.History[0].Error, "lease expired") ||
		done.History[1].WorkerID == "victim" || done.History[1].WorkerID == "" || (rescuer != "" && done.History[1].WorkerID != rescuer) {
		t.Fatalf("attempts %d history %+v; want the lost attempt counted", done.Attempts, done.History)
	}
}

// A crashed worker's task is recovered within the bound TRIAGE_LEASE sets
// (lease + 2 × margin, the margin a quarter of a short lease), whatever the
// task's timeout: here 4 s + 2 × 1 s, not the queue's fixed visibility.
func TestCrashRecoveryFollowsLease(t *testing.T) {
	t.Parallel() // its own stack; waits, not timing, make it slow
	env := stacktest.New(t)
	leaseEnv := map[string]string{"TRIAGE_LEASE": "4s"}
	a := env.App(t, leaseEnv)
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childEnv+"=1", "TRIAGE_PREFIX="+env.Prefix, "TRIAGE_LEASE=4s")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	tk := submitOne(t, a, task.Request{Type: "sleep", Priority: "high", Payload: json.RawMessage(`{"ms":6000}`), TimeoutSeconds: intp(10)})
	if r := stacktest.WaitStatus(t, a.Store, tk.ID, triagetype.Executing, 20*time.Second); r.WorkerID != "victim" {
		t.Fatalf("claimed by %q", r.WorkerID)
	}
	stacktest.Run(t, consumerapp.New(a, demoRegistry(), dispatch.Options{PollWait: time.Second}, dispatch.Deps{WorkerID: "rescuer"}))
	killed := time.Now()
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	done := stacktest.WaitStatus(t, a.Store, tk.ID, triagetype.Completed, 60*time.Second)
	if len(done.History) != 2 || done.History[1].WorkerID != "rescuer" {
		t.Fatalf("history %+v", done.History)
	}
	took := done.History[1].StartedAt.Sub(killed)
	bound := 4*time.Second + 2*time.Second
	t.Logf("restarted %v after the kill (bound %v + polling)", took, bound)
	if took > bound+4*time.Second {
		t.Fatalf("restarted %v after the kill; the lease bounds it at %v (+ polling)", took, bound)
	}
}

func TestLostLeaseCannotComplete(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	tk := submitOne(t, a, task.Request{Type: "block", Priority: "high", TimeoutSeconds: intp(30)})
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	h := handler.Func(func(ctx context.Context, r handler.Request) (json.RawMessage, error) {
		entered <- struct{}{}
		<-release
		return json.RawMessage(`"stale result"`), nil
	})
	opt := stacktest.FastDispatch()
	opt.Lease = 30 * time.Second // no heartbeat during the test
	stacktest.Run(t, consumerapp.New(a, stacktest.Registry("block", h), opt, dispatch.Deps{WorkerID: "worker-a"}))
	select {
	case <-entered:
	case <-time.After(20 * time.Second):
		t.Fatal("worker A never started the task")
	}
	// Force the interleaving: worker B reclaims the task while A still runs.
	ctx := context.Background()
	cur, err := a.Store.Get(ctx, tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	requeued, err := a.Store.Transition(ctx, cur, triagetype.Queued, func(n *task.Task) { n.WorkerID, n.LeaseUntil = "", nil })
	if err != nil {
		t.Fatal(err)
	}
	stolen, err := a.Store.Transition(ctx, requeued, triagetype.Executing, func(n *task.Task) { n.Attempts++; n.WorkerID = "worker-b" })
	if err != nil {
		t.Fatal(err)
	}
	close(release) // A finishes now and tries to record its result
	time.Sleep(time.Second)
	now, err := a.Store.Get(ctx, tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	if now.Status != triagetype.Executing || now.WorkerID != "worker-b" || now.Version != stolen.Version || len(now.Result) != 0 {
		t.Fatalf("after A finished: status %s worker %s version %d (want %d) result %s", now.Status, now.WorkerID, now.Version, stolen.Version, now.Result)
	}
}

func TestFourConsumersUnderFailures(t *testing.T) {
	t.Parallel() // its own stack; waits, not timing, make it slow
	env := stacktest.New(t)
	a := env.App(t, nil)
	const n = 1000
	var ids []string
	for i, p := range triagetype.Priorities() {
		k := n / 3
		if i == 0 {
			k += n % 3
		}
		ids = append(ids, submit(t, a, "work", p, k, `{}`)...)
	}
	failsOnce := func(id string) bool { h := fnv.New32a(); h.Write([]byte(id)); return h.Sum32()%10 == 0 }
	var rngMu sync.Mutex
	rng := rand.New(rand.NewPCG(1, 2))
	l := newLedger(func(ctx context.Context, r handler.Request) (json.RawMessage, error) {
		rngMu.Lock()
		d := time.Duration(rng.IntN(21)) * time.Millisecond
		rngMu.Unlock()
		time.Sleep(d)
		if r.Attempt == 1 && failsOnce(r.ID) {
			return nil, errors.New("transient failure")
		}
		return json.RawMessage(`true`), nil
	})
	for range 4 {
		opt := stacktest.FastDispatch()
		opt.Concurrency = 8
		opt.Backoff = map[triagetype.Priority]triageconfig.Backoff{triagetype.High: {Base: time.Second, Max: time.Second}, triagetype.Medium: {Base: time.Second, Max: time.Second}, triagetype.Low: {Base: time.Second, Max: time.Second}}
		stacktest.Run(t, consumerapp.New(a, stacktest.Registry("work", l), opt, dispatch.Deps{}))
	}
	wantRuns := 0
	failing := 0
	for _, id := range ids {
		wantRuns++
		if failsOnce(id) {
			wantRuns++
			failing++
		}
	}
	waitEnds(t, l, wantRuns, 4*time.Minute)
	time.Sleep(500 * time.Millisecond)
	if o := l.Overlaps(); len(o) > 0 {
		t.Fatalf("%d concurrent double executions, e.g. %s", len(o), o[0])
	}
	runs := l.Runs()
	for _, id := range ids {
		want := 1
		if failsOnce(id) {
			want = 2
		}
		if runs[id] != want {
			t.Fatalf("task %s ran %d times, want %d", id, runs[id], want)
		}
	}
	completed := stacktest.StatusCounts(t, a.Store, ids)[triagetype.Completed]
	t.Logf("%d tasks, %d failed once, %d runs, %d completed", n, failing, len(l.Ends()), completed)
	if completed != n {
		t.Fatalf("%d of %d tasks completed", completed, n)
	}
}

func TestPoisonMessagesGoToDLQ(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	ctx := context.Background()
	for _, body := range []string{`not json at all`, `{"hello":"world"}`, `{"type":"","payload":{}}`} {
		if _, err := a.Queues.Send(ctx, triagetype.Low, body, 0); err != nil {
			t.Fatal(err)
		}
	}
	tk := submitOne(t, a, task.Request{Type: "echo", Priority: "low", Payload: json.RawMessage(`7`)})
	stacktest.Run(t, consumerapp.New(a, demoRegistry(), stacktest.FastDispatch(), dispatch.Deps{}))
	stacktest.WaitStatus(t, a.Store, tk.ID, triagetype.Completed, 20*time.Second)
	msgs := dlqMessages(t, a, triagetype.Low, 3)
	if len(msgs) != 3 {
		t.Fatalf("DLQ holds %d messages, want 3", len(msgs))
	}
	reasons := map[string]string{}
	for _, m := range msgs {
		reasons[m.Body] = m.Reason
	}
	for body, want := range map[string]string{`not json at all`: "not a JSON object", `{"hello":"world"}`: "neither", `{"type":"","payload":{}}`: "type: is required"} {
		if !strings.Contains(reasons[body], want) {
			t.Errorf("DLQ reason for %s = %q, want it to mention %q", body, reasons[body], want)
		}
	}
}

func TestDirectSendIsAdoptedOnce(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, map[string]string{triageconfig.EnvToken: "tok"})
	ctx := context.Background()
	// A producer inside AWS sends straight to the high queue with the SDK.
	out, err := env.SQS.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:    aws.String(a.Queues.URL(triagetype.High)),
		MessageBody: aws.String(`{"type":"flaky","payload":{"order":9},"max_attempts":3}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	var seen atomic.Value
	l := newLedger(func(ctx context.Context, r handler.Request) (json.RawMessage, error) {
		seen.Store(r.ID)
		if r.Attempt == 1 {
			return nil, errors.New("first try fails, so the same SQS message is received again")
		}
		return r.Payload, nil
	})
	opt := stacktest.FastDispatch()
	opt.Backoff = map[triagetype.Priority]triageconfig.Backoff{triagetype.High: {Base: time.Second, Max: time.Second}}
	stacktest.Run(t, consumerapp.New(a, stacktest.Registry("flaky", l), opt, dispatch.Deps{}))
	waitEnds(t, l, 2, 30*time.Second)
	id, _ := seen.Load().(string)
	done := stacktest.WaitStatus(t, a.Store, id, triagetype.Completed, 10*time.Second)
	if done.Attempts != 2 || done.IdempotencyKey != "" || out.MessageId == nil {
		t.Fatalf("adopted task: attempts %d key %q", done.Attempts, done.IdempotencyKey)
	}
	checkOnce(t, l, nil)
	if runs := l.Runs(); runs[id] != 2 || len(runs) != 1 {
		t.Fatalf("runs %v: the redelivered message must reach the same task", runs)
	}
	// It is visible through the API like any other task.
	toks := &auth.Tokens{}
	toks.Add("tok", auth.Read)
	srv := httptest.NewServer(apiapp.Handler(a, toks, api.Options{}))
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+"/api/v1/tasks/"+id, nil)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&got)
	if resp.StatusCode != 200 || got["status"] != "completed" || got["type"] != "flaky" {
		t.Fatalf("GET = %d %v", resp.StatusCode, got)
	}
}

func TestPauseAndResume(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	ctx := context.Background()
	if _, err := a.Controls.SetPaused(ctx, "", true); err != nil {
		t.Fatal(err)
	}
	ids := submit(t, a, "rec", triagetype.High, 5, `{}`)
	l := newLedger(nil)
	opt := stacktest.FastDispatch()
	opt.MaxReceiveCount = 3 // low, so the test also covers refreshing put-off messages
	stacktest.Run(t, consumerapp.New(a, stacktest.Registry("rec", l), opt, dispatch.Deps{}))
	time.Sleep(6 * time.Second)
	started := len(l.Starts())
	if started != 0 {
		t.Fatalf("%d tasks started while paused", started)
	}
	for _, id := range ids {
		if tk, _ := a.Store.Get(ctx, id); tk.Status != triagetype.Queued {
			t.Fatalf("task %s is %s while paused", id, tk.Status)
		}
	}
	if _, err := a.Controls.SetPaused(ctx, "", false); err != nil {
		t.Fatal(err)
	}
	waitEnds(t, l, 5, 20*time.Second)
	checkOnce(t, l, ids)
	if d, _ := a.Queues.Depth(ctx, triagetype.High); d.DLQ != 0 {
		t.Fatalf("%d messages reached the DLQ while paused", d.DLQ)
	}
}

func TestPauseOneType(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	ctx := context.Background()
	if _, err := a.Controls.SetPaused(ctx, "held", true); err != nil {
		t.Fatal(err)
	}
	held := submit(t, a, "held", triagetype.Medium, 2, `{}`)
	free := submit(t, a, "free", triagetype.Medium, 2, `{}`)
	l := newLedger(nil)
	reg := handler.NewRegistry()
	reg.Register("held", l)
	reg.Register("free", l)
	stacktest.Run(t, consumerapp.New(a, reg, stacktest.FastDispatch(), dispatch.Deps{}))
	for _, id := range free {
		stacktest.WaitStatus(t, a.Store, id, triagetype.Completed, 20*time.Second)
	}
	for _, id := range held {
		if tk, _ := a.Store.Get(ctx, id); tk.Status != triagetype.Queued {
			t.Fatalf("paused-type task %s is %s", id, tk.Status)
		}
	}
	if _, err := a.Controls.SetPaused(ctx, "held", false); err != nil {
		t.Fatal(err)
	}
	for _, id := range held {
		stacktest.WaitStatus(t, a.Store, id, triagetype.Completed, 20*time.Second)
	}
}

func TestConcurrencyLimitAcrossInstances(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	if _, err := a.Controls.SetLimits(context.Background(), "limited", 0, 2); err != nil {
		t.Fatal(err)
	}
	ids := submit(t, a, "limited", triagetype.High, 12, `{}`)
	l := newLedger(func(ctx context.Context, r handler.Request) (json.RawMessage, error) {
		time.Sleep(300 * time.Millisecond)
		return nil, nil
	})
	for range 2 { // two instances, each with its own view of the controls
		b := env.App(t, nil)
		opt := stacktest.FastDispatch()
		opt.Concurrency = 4
		stacktest.Run(t, consumerapp.New(b, stacktest.Registry("limited", l), opt, dispatch.Deps{}))
	}
	waitEnds(t, l, len(ids), 60*time.Second)
	checkOnce(t, l, ids)
	t.Logf("most running at once: %d", l.MaxConcurrent())
	if l.MaxConcurrent() > 2 {
		t.Fatalf("%d ran at once with max_concurrency 2", l.MaxConcurrent())
	}
	if l.MaxConcurrent() < 2 {
		t.Fatalf("only %d ran at once; the limit should allow 2", l.MaxConcurrent())
	}
}

func TestRateLimitAcrossInstances(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	if _, err := a.Controls.SetLimits(context.Background(), "metered", 5, 0); err != nil {
		t.Fatal(err)
	}
	ids := submit(t, a, "metered", triagetype.Medium, 90, `{}`)
	l := newLedger(nil)
	for range 2 {
		b := env.App(t, nil)
		opt := stacktest.FastDispatch()
		opt.Concurrency = 8
		stacktest.Run(t, consumerapp.New(b, stacktest.Registry("metered", l), opt, dispatch.Deps{}))
	}
	time.Sleep(13 * time.Second)
	starts := l.Starts()
	if len(starts) == 0 {
		t.Fatal("nothing started")
	}
	from := starts[0].At.Add(time.Second) // skip the first, partial window
	in := 0
	for _, e := range starts {
		if !e.At.Before(from) && e.At.Before(from.Add(10*time.Second)) {
			in++
		}
	}
	t.Logf("%d starts in 10 s at rate_limit_per_second 5 (%d tasks)", in, len(ids))
	// The rate is a ceiling: more than 55 is a failure of the limit. The
	// floor only catches a limit that refuses what its windows allow
	// (half the rate): what the scope achieves depends on the store's
	// latency (a released task's reserved start is lost when its message
	// arrives after its window, docs/keys.md), so it is measured by the
	// bench (waiting-rate, target 80 %), not here. Measured 44 to 47 on a
	// quiet machine, 34 at load 24.
	if in < 25 || in > 55 {
		t.Fatalf("%d starts in 10 s; want 25 to 55 (the rate 50, at most 10 %% over)", in)
	}
}

// starter starts a consumer of reg with opt on a: long-running, or the
// way Lambda does through a local event source (stacktest.Events).
type starter func(a *app.App, reg *handler.Registry, opt dispatch.Options) stacktest.Runner

// longRunning starts the consumer as a long-running process does.
func longRunning(a *app.App, reg *handler.Registry, opt dispatch.Options) stacktest.Runner {
	return consumerapp.New(a, reg, opt, dispatch.Deps{})
}

// byEvents starts it the way Lambda does, through the local event source.
func byEvents(a *app.App, reg *handler.Registry, opt dispatch.Options) stacktest.Runner {
	return stacktest.Events(a, reg, opt)
}

func TestReservedSlotStartsHighPromptly(t *testing.T) { reservedSlotStartsHigh(t, longRunning) }

// With the consumer started by SQS events, high work still starts within
// a second while low tasks hold every general slot: the high queue's
// mapping starts it (in the busy invocation's reserved slot or an
// invocation of its own).
func TestEventsReservedSlotStartsHighPromptly(t *testing.T) { reservedSlotStartsHigh(t, byEvents) }

func reservedSlotStartsHigh(t *testing.T, start starter) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	l := newLedger(func(ctx context.Context, r handler.Request) (json.RawMessage, error) {
		if r.Priority == triagetype.Low {
			select {
			case <-time.After(15 * time.Second):
			case <-ctx.Done():
			}
		}
		return nil, nil
	})
	opt := stacktest.FastDispatch()
	opt.Concurrency, opt.ReservedHigh = 3, 1
	opt.DrainTimeout = time.Second
	stacktest.Run(t, start(a, stacktest.Registry("job", l), opt))
	lows := submit(t, a, "job", triagetype.Low, 2, `{}`)
	for _, id := range lows {
		stacktest.WaitStatus(t, a.Store, id, triagetype.Executing, 20*time.Second)
	}
	time.Sleep(1500 * time.Millisecond) // let the consumer settle into its idle polling
	submitted := time.Now()
	high := submit(t, a, "job", triagetype.High, 1, `{}`)
	started := stacktest.WaitStatus(t, a.Store, high[0], triagetype.Completed, 10*time.Second)
	wait := started.StartedAt.Sub(submitted)
	t.Logf("high task started %v after submit, with both general slots busy", wait)
	if wait > time.Second {
		t.Fatalf("high task waited %v for the reserved slot; want under 1 s", wait)
	}
}

// While a medium backlog keeps the consumer busy (its receives wait for
// the slots' turnover to batch), a high task sent meanwhile still starts
// within a second: the high queue is long-polled for the reserved slot,
// not held behind a batch. Every backlog task runs once and the backlog
// drains, so no message is lost to the batching.
func TestBusyConsumerStartsHighPromptly(t *testing.T) { busyStartsHigh(t, longRunning) }

func TestEventsBusyConsumerStartsHighPromptly(t *testing.T) { busyStartsHigh(t, byEvents) }

func busyStartsHigh(t *testing.T, start starter) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	l := newLedger(func(ctx context.Context, r handler.Request) (json.RawMessage, error) {
		if r.Priority == triagetype.Medium {
			select {
			case <-time.After(300 * time.Millisecond):
			case <-ctx.Done():
			}
		}
		return nil, nil
	})
	const backlog = 150
	meds := submit(t, a, "job", triagetype.Medium, backlog, `{}`)
	opt := stacktest.FastDispatch()
	opt.Concurrency, opt.ReservedHigh = 12, 1
	stacktest.Run(t, start(a, stacktest.Registry("job", l), opt))
	waitEnds(t, l, 30, time.Minute) // busy, with the slots' turnover known
	submitted := time.Now()
	high := submit(t, a, "job", triagetype.High, 1, `{}`)
	started := stacktest.WaitStatus(t, a.Store, high[0], triagetype.Completed, 10*time.Second)
	wait := started.StartedAt.Sub(submitted)
	ended := 0
	for _, e := range l.Ends() {
		if e.At.Before(*started.StartedAt) {
			ended++
		}
	}
	t.Logf("high task started %v after submit, %d of %d backlog tasks ended by then", wait, ended, backlog)
	if ended >= backlog {
		t.Fatal("the backlog drained before the high task started: the consumer was not busy")
	}
	if wait > time.Second {
		t.Fatalf("high task waited %v beside a busy backlog; want under 1 s", wait)
	}
	waitEnds(t, l, backlog+1, 2*time.Minute)
	for _, id := range meds {
		if n := l.Runs()[id]; n != 1 {
			t.Errorf("backlog task %s ran %d times", id, n)
		}
	}
	if o := l.Overlaps(); len(o) > 0 {
		t.Errorf("overlapping runs: %v", o)
	}
}

// Every body a producer can send straight to a queue that the consumer
// cannot use, bare JSON scalars and arrays included, lands in that
// priority's DLQ with a reason that says what is wrong with it in the
// message's own terms (not Go's), and no task is created for it.
func TestUnusableDirectSendsGoToDLQ(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	cases := []struct{ body, reason string }{
		{`12345`, "body is not a JSON object: it is a number"},
		{`-0.5`, "body is not a JSON object: it is a number"},
		{`null`, "body is not a JSON object: it is null"},
		{`true`, "body is not a JSON object: it is a boolean"},
		{`false`, "body is not a JSON object: it is a boolean"},
		{`"a string"`, "body is not a JSON object: it is a string"},
		{`[]`, "body is not a JSON object: it is an array"},
		{`[{"type":"echo"}]`, "body is not a JSON object: it is an array"},
		{`{"type":"echo"} trailing`, "body is not a JSON object: it is not valid JSON"},
		{`{}`, `body has neither "id" and "v"`},
		{`{"id":null,"v":null}`, `body has neither "id" and "v"`},
		{`{"id":5,"v":1}`, `body field "id" must be a string`},
		{`{"id":"x","v":1.5}`, `body field "v" must be an integer`},
		{`{"type":null}`, "direct send rejected: type: is required"},
	}
	for _, c := range cases {
		sendRaw(t, env, triagetype.Medium, c.body)
	}
	stacktest.Run(t, consumerapp.New(a, demoRegistry(), stacktest.FastDispatch(), dispatch.Deps{}))
	msgs := dlqMessages(t, a, triagetype.Medium, len(cases))
	reasons := map[string]string{}
	for _, m := range msgs {
		reasons[m.Body] = m.Reason
	}
	for _, c := range cases {
		if r, ok := reasons[c.body]; !ok {
			t.Errorf("%s: not in the DLQ", c.body)
		} else if !strings.Contains(r, c.reason) || strings.Contains(r, "Go ") {
			t.Errorf("%s: DLQ reason %q, want it to say %q", c.body, r, c.reason)
		}
	}
	if len(msgs) != len(cases) {
		t.Errorf("the DLQ holds %d messages, want %d", len(msgs), len(cases))
	}
	page, err := env.DynamoDB.Scan(context.Background(), &dynamodb.ScanInput{TableName: &env.Spec.Table.Name})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range page.Items {
		if pk, _ := it[spec.AttrPK].(*ddbtypes.AttributeValueMemberS); pk != nil && strings.HasPrefix(pk.Value, spec.TaskKeyPrefix) {
			t.Errorf("a task was created: %s", pk.Value)
		}
	}
}

// sendDirect sends body straight to the high queue, as a producer inside
// AWS does, and returns the task the consumer records for it (the only
// task of its type in env).
func sendDirect(t *testing.T, env *stacktest.Env, a *app.App, body string) *task.Task {
	t.Helper()
	ctx := context.Background()
	var probe struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal([]byte(body), &probe); err != nil {
		t.Fatal(err)
	}
	if _, err := env.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(a.Queues.URL(triagetype.High)), MessageBody: aws.String(body)}); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		ts, _, err := a.Store.List(ctx, store.ListFilter{Type: probe.Type}, 10, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(ts) == 1 {
			return ts[0]
		}
	}
	t.Fatalf("no task recorded for the direct send %s", body)
	return nil
}
