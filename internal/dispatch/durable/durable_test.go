package durable_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/app/promoterapp"
	"github.com/triagehq/triage/internal/deadletter"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/fault"
	"github.com/triagehq/triage/internal/promote"
	"github.com/triagehq/triage/internal/service"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triageconfig"
	"github.com/triagehq/triage/triagetype"
	"github.com/triagehq/triage/worker"
)

const (
	childEnv  = "TRIAGE_TEST_DURABLE_CHILD"
	ledgerEnv = "TRIAGE_TEST_DURABLE_LEDGER" // one line per execution of a step's function
	markEnv   = "TRIAGE_TEST_DURABLE_MARKS"  // one line per step completed in a victim
)

// appendLine appends line to the file at path and syncs it: the ledger
// survives the SIGKILL that follows.
func appendLine(path, line string) {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	if _, err := f.WriteString(line + "\n"); err != nil {
		panic(err)
	}
	if err := f.Sync(); err != nil {
		panic(err)
	}
}

func lines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	for sc := bufio.NewScanner(f); sc.Scan(); {
		out = append(out, sc.Text())
	}
	return out
}

// fiveSteps is the crash test's handler: five steps, each appending to
// the ledger when its function runs. In a victim (block true), the
// attempt stops right after the first step whose function ran in this
// process completes: it marks it and blocks until SIGKILL.
func fiveSteps(ledger, marks string, block bool) worker.HandlerFunc {
	return func(ctx context.Context, tk *worker.Task) (any, error) {
		var results []int
		for i := range 5 {
			ran := false
			name := fmt.Sprintf("step-%d", i+1)
			v, err := worker.Step(ctx, tk, name, func(context.Context) (int, error) {
				appendLine(ledger, tk.ID+" "+name)
				ran = true
				return (i + 1) * 10, nil
			})
			if err != nil {
				return nil, err
			}
			results = append(results, v)
			if ran && block {
				appendLine(marks, name)
				select {} // SIGKILL comes
			}
		}
		return map[string]any{"results": results}, nil
	}
}

func runChild() {
	cfg, err := triageconfig.Decode(nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	w := worker.New(worker.Options{Config: &cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := w.Handle("five", fiveSteps(os.Getenv(ledgerEnv), os.Getenv(markEnv), true)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	_ = w.Run(context.Background())
}

func submit(t *testing.T, a *app.App, typ string, payload any, opts ...triage.SubmitOption) *task.Task {
	t.Helper()
	sr, err := triage.NewRequest(typ, payload, append([]triage.SubmitOption{triage.WithPriority(triage.High)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	tr := task.Request(sr)
	tk, _, err := a.Enqueuer.Submit(context.Background(), tr.NewTask(a.Store.Now(), 0))
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// startWorker runs w's consumer on env until the test ends.
func newWorker(t *testing.T, env *stacktest.Env, extra map[string]string) *worker.Worker {
	t.Helper()
	cfg, err := triageconfig.Decode(env.Getenv(extra))
	if err != nil {
		t.Fatal(err)
	}
	return worker.New(worker.Options{Config: &cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

func start(t *testing.T, w *worker.Worker) {
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("worker.Run: %v", err)
		}
	})
}

// waitFor polls get until ok or the timeout.
func waitFor(t *testing.T, a *app.App, id string, timeout time.Duration, what string, ok func(*task.Task) bool) *task.Task {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		tk, err := a.Store.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if ok(tk) {
			return tk
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s: not %s after %v: status %s, suspended %+v, history %+v", id, what, timeout, tk.Status, tk.Suspend, tk.History)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A 5-step handler whose consumer is SIGKILLed right after each step
// completes runs each step's function exactly once and finishes with
// every result: five victims each run one new step, the sixth consumer
// replays all five and completes.
func TestStepsRunOnceAcrossSIGKILL(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	dir := t.TempDir()
	ledger, marks := filepath.Join(dir, "ledger"), filepath.Join(dir, "marks")
	// Five crashes of one task's consumer are what the queue's redrive
	// threshold (spec.DefaultMaxReceiveCount, 5) reads as a poison
	// message; this test raises it, to show steps surviving five.
	raiseRedrive(t, env, triage.High, 10)
	tk := submit(t, a, "five", nil, triage.WithMaxAttempts(10), triage.WithTimeout(60*time.Second))
	for kill := 1; kill <= 5; kill++ {
		child := exec.Command(os.Args[0], "-test.run=^$")
		child.Env = append(os.Environ(), childEnv+"=1", ledgerEnv+"="+ledger, markEnv+"="+marks,
			"TRIAGE_PREFIX="+env.Prefix, "TRIAGE_LEASE=2s")
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(40 * time.Second)
		for len(lines(t, marks)) < kill {
			if time.Now().After(deadline) {
				_ = child.Process.Kill()
				t.Fatalf("victim %d completed no step in 40 s (marks %v)", kill, lines(t, marks))
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err := child.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = child.Wait()
	}
	w := newWorker(t, env, map[string]string{triageconfig.EnvLease: "2s"})
	if err := w.Handle("five", fiveSteps(ledger, marks, false)); err != nil {
		t.Fatal(err)
	}
	start(t, w)
	done := stacktest.WaitStatus(t, a.Store, tk.ID, triagetype.Completed, 60*time.Second)
	if string(done.Result) != `{"results":[10,20,30,40,50]}` {
		t.Fatalf("result %s", done.Result)
	}
	runs := map[string]int{}
	for _, l := range lines(t, ledger) {
		runs[l]++
	}
	for i := 1; i <= 5; i++ {
		if n := runs[fmt.Sprintf("%s step-%d", tk.ID, i)]; n != 1 {
			t.Errorf("step-%d ran %d times; want once (ledger %v)", i, n, lines(t, ledger))
		}
	}
	if len(done.Steps) != 5 || done.Attempts != 6 {
		t.Fatalf("steps %+v attempts %d; want 5 steps over 6 attempts", done.Steps, done.Attempts)
	}
	for i, st := range done.Steps {
		if st.Attempt != i+1 || st.Outcome() != "ok" {
			t.Errorf("step %d recorded by attempt %d (%s); want attempt %d", i, st.Attempt, st.Outcome(), i+1)
		}
	}
}

// A sleep holds no slot: with one slot, another task runs while the
// first sleeps, and the sleeper resumes with its step replayed and no
// attempt spent.
func TestSleepHoldsNoSlot(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	w := newWorker(t, env, map[string]string{triageconfig.EnvConcurrency: "1", triageconfig.EnvReservedHigh: "0"})
	var before, after atomic.Int32
	const nap = 6 * time.Second
	must(t, w.Handle("sleeper", func(ctx context.Context, tk *worker.Task) (any, error) {
		if _, err := worker.Step(ctx, tk, "before", func(context.Context) (string, error) { before.Add(1); return "b", nil }); err != nil {
			return nil, err
		}
		if err := worker.Sleep(ctx, tk, nap); err != nil {
			return nil, err
		}
		v, err := worker.Step(ctx, tk, "after", func(context.Context) (string, error) { after.Add(1); return "a", nil })
		return v, err
	}))
	must(t, w.Handle("quick", func(context.Context, *worker.Task) (any, error) { return "done", nil }))
	start(t, w)
	sleeper := submit(t, a, "sleeper", nil)
	asleep := waitFor(t, a, sleeper.ID, 20*time.Second, "sleeping", func(tk *task.Task) bool { return tk.Suspend != nil })
	if asleep.Status != triagetype.Retrying || asleep.Suspend.Kind != task.StepSleep || asleep.Attempts != 0 {
		t.Fatalf("asleep: status %s suspend %+v attempts %d; want retrying, sleep, no attempt spent", asleep.Status, asleep.Suspend, asleep.Attempts)
	}
	quick := submit(t, a, "quick", nil)
	stacktest.WaitStatus(t, a.Store, quick.ID, triagetype.Completed, 20*time.Second)
	if cur, _ := a.Store.Get(context.Background(), sleeper.ID); cur.Status != triagetype.Retrying {
		t.Fatalf("the sleeper is %s when the other task finished; want still asleep", cur.Status)
	}
	done := stacktest.WaitStatus(t, a.Store, sleeper.ID, triagetype.Completed, nap+30*time.Second)
	if woke := done.History[len(done.History)-1].StartedAt; woke.Before(asleep.Suspend.WakeAt.Add(-time.Second)) {
		t.Fatalf("resumed at %v, before its wake time %v", woke, asleep.Suspend.WakeAt)
	}
	if before.Load() != 1 || after.Load() != 1 || done.Attempts != 1 || string(done.Result) != `"a"` {
		t.Fatalf("before ran %d, after %d, attempts %d, result %s; want 1, 1, 1, \"a\"", before.Load(), after.Load(), done.Attempts, done.Result)
	}
}

// raiseRedrive sets priority p's queue's maxReceiveCount to n.
func raiseRedrive(t *testing.T, env *stacktest.Env, p triagetype.Priority, n int) {
	t.Helper()
	ctx := context.Background()
	url := env.QueueURLs[p]
	out, err := env.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameRedrivePolicy}})
	if err != nil {
		t.Fatal(err)
	}
	var rp map[string]any
	if err := json.Unmarshal([]byte(out.Attributes[string(sqstypes.QueueAttributeNameRedrivePolicy)]), &rp); err != nil {
		t.Fatal(err)
	}
	rp["maxReceiveCount"] = n
	b, _ := json.Marshal(rp)
	if _, err := env.SQS.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: &url, Attributes: map[string]string{string(sqstypes.QueueAttributeNameRedrivePolicy): string(b)}}); err != nil {
		t.Fatal(err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

type approval struct {
	OK bool `json:"ok"`
}

// Signals: a signal wakes a waiting task (which had no message while it
// waited), an early one is consumed without a wait, a second one of the
// same name is refused, and a wait times out.
func TestSignals(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	w := newWorker(t, env, nil)
	var prepared atomic.Int32
	must(t, w.Handle("approve", func(ctx context.Context, tk *worker.Task) (any, error) {
		var in struct {
			PrepMS    int `json:"prep_ms"`
			TimeoutMS int `json:"timeout_ms"`
		}
		if err := tk.Decode(&in); err != nil {
			return nil, worker.Permanent(err)
		}
		if _, err := worker.Step(ctx, tk, "prepare", func(ctx context.Context) (bool, error) {
			prepared.Add(1)
			time.Sleep(time.Duration(in.PrepMS) * time.Millisecond)
			return true, nil
		}); err != nil {
			return nil, err
		}
		v, err := worker.WaitSignal[approval](ctx, tk, "approval", time.Duration(in.TimeoutMS)*time.Millisecond)
		if errors.Is(err, worker.ErrSignalTimeout) {
			return "timed out", nil
		}
		if err != nil {
			return nil, err
		}
		return v, nil
	}))
	start(t, w)
	svc := service.New(service.Deps{Store: a.Store, Enqueuer: a.Enqueuer}, service.Options{})
	ctx := context.Background()
	waiting := func(tk *task.Task) bool {
		return tk.Status == triagetype.Retrying && tk.Suspend != nil && tk.Suspend.Signal == "approval"
	}

	t.Run("wakes a waiting task", func(t *testing.T) {
		tk := submit(t, a, "approve", map[string]int{"timeout_ms": 3600_000})
		parked := waitFor(t, a, tk.ID, 20*time.Second, "waiting", waiting)
		if parked.DispatchVersion != task.NoMessage || parked.Attempts != 0 {
			t.Fatalf("waiting with dispatch version %d, attempts %d; want no message and no attempt spent", parked.DispatchVersion, parked.Attempts)
		}
		sent := time.Now()
		if _, err := svc.Signal(ctx, tk.ID, "approval", json.RawMessage(`{"ok":true}`)); err != nil {
			t.Fatal(err)
		}
		done := stacktest.WaitStatus(t, a.Store, tk.ID, triagetype.Completed, 20*time.Second)
		t.Logf("signal to completion: %v", time.Since(sent))
		if string(done.Result) != `{"ok":true}` || done.Attempts != 1 {
			t.Fatalf("result %s attempts %d", done.Result, done.Attempts)
		}
		if len(done.Steps) != 2 || done.Steps[1].Outcome() != "signalled" || len(done.Signals) != 1 {
			t.Fatalf("steps %+v signals %+v", done.Steps, done.Signals)
		}
		_, err := svc.Signal(ctx, tk.ID, "approval", json.RawMessage(`{"ok":false}`))
		if !errors.Is(err, triagetype.ErrConflict) {
			t.Fatalf("signal to a finished task: %v; want a conflict", err)
		}
	})

	t.Run("early signal is consumed", func(t *testing.T) {
		// The signal is sent while the task is queued or in its 1.5 s
		// prepare step, before it waits. Claimed after the signal, the
		// claim brings it and the wait consumes it in the same attempt;
		// sent after the claim, it wakes the task as soon as it suspends
		// (a suspended entry, then the resumed one). Either way the first
		// payload comes back and no attempt is spent.
		tk := submit(t, a, "approve", map[string]int{"prep_ms": 1500, "timeout_ms": 3600_000})
		if _, err := svc.Signal(ctx, tk.ID, "approval", json.RawMessage(`{"ok":true}`)); err != nil {
			t.Fatal(err)
		}
		_, err := svc.Signal(ctx, tk.ID, "approval", json.RawMessage(`{"ok":false}`))
		var fe *fault.Error
		if !errors.As(err, &fe) || !errors.Is(err, triagetype.ErrConflict) || fe.Field != "name" {
			t.Fatalf("second signal: %v; want a conflict naming name", err)
		}
		done := stacktest.WaitStatus(t, a.Store, tk.ID, triagetype.Completed, 20*time.Second)
		resumed := len(done.History) == 2 && done.History[0].Outcome == triagetype.AttemptSuspended
		if string(done.Result) != `{"ok":true}` || done.Attempts != 1 || len(done.History) != 1 && !resumed {
			t.Fatalf("result %s attempts %d history %+v; want the first signal's payload, one attempt spent", done.Result, done.Attempts, done.History)
		}
	})

	t.Run("timeout fires", func(t *testing.T) {
		tk := submit(t, a, "approve", map[string]int{"timeout_ms": 3000})
		waitFor(t, a, tk.ID, 20*time.Second, "waiting", waiting)
		// The promoter sends the woken task's message, delayed to the timeout.
		if _, err := promoterapp.New(a, promote.Options{}).RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		done := stacktest.WaitStatus(t, a.Store, tk.ID, triagetype.Completed, 30*time.Second)
		if string(done.Result) != `"timed out"` || done.Steps[1].Outcome() != "timed_out" {
			t.Fatalf("result %s steps %+v", done.Result, done.Steps)
		}
	})

	t.Run("validation", func(t *testing.T) {
		tk := submit(t, a, "approve", map[string]int{"timeout_ms": 3600_000})
		for _, c := range []struct{ name, payload, field string }{
			{"bad name!", `1`, "name"},
			{"child:square", `{"status":"completed"}`, "name"}, // a forged child outcome
			{"ok", strings.Repeat(" ", 4000) + "1", "payload"},
			{"ok", `{`, "payload"},
		} {
			_, err := svc.Signal(ctx, tk.ID, c.name, json.RawMessage(c.payload))
			var fe *fault.Error
			if !errors.As(err, &fe) || !errors.Is(err, triagetype.ErrBadRequest) || fe.Field != c.field {
				t.Errorf("signal %q: %v; want 400 naming %s", c.name, err, c.field)
			}
		}
		if _, err := svc.Signal(ctx, task.NewID(time.Now()), "approval", json.RawMessage(`1`)); !errors.Is(err, triagetype.ErrNotFound) {
			t.Errorf("unknown task: %v; want not found", err)
		}
		waitFor(t, a, tk.ID, 20*time.Second, "waiting", waiting)
	})
	if prepared.Load() != 4 {
		t.Errorf("prepare ran %d times; want once per task (4)", prepared.Load())
	}
}

// A step met in another order than recorded is non-determinism: the task
// is dead-lettered saying so, and no step function runs again.
func TestReorderedStepIsNonDeterminism(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	w := newWorker(t, env, map[string]string{triageconfig.EnvRetryBackoff: "high=1s:1s,medium=1s:1s,low=1s:1s"})
	var runs atomic.Int32
	must(t, w.Handle("flaky-order", func(ctx context.Context, tk *worker.Task) (any, error) {
		names := []string{"a", "b"}
		if tk.Attempt > 1 {
			names = []string{"b", "a"}
		}
		for _, n := range names {
			if _, err := worker.Step(ctx, tk, n, func(context.Context) (int, error) { runs.Add(1); return 1, nil }); err != nil {
				return nil, err
			}
		}
		return nil, errors.New("try again")
	}))
	start(t, w)
	tk := submit(t, a, "flaky-order", nil, triage.WithMaxAttempts(3))
	dead := stacktest.WaitStatus(t, a.Store, tk.ID, triagetype.DeadLetter, 30*time.Second)
	if dead.Attempts != 2 || dead.Error == nil || dead.Error.Retriable || !strings.Contains(dead.Error.Message, "non-determinism") {
		t.Fatalf("attempts %d error %+v; want a permanent non-determinism error on attempt 2", dead.Attempts, dead.Error)
	}
	if runs.Load() != 2 {
		t.Fatalf("step functions ran %d times; want 2 (attempt 1 only)", runs.Load())
	}
}

// Tasks waiting for signals hold nothing: once every one of them waits,
// no queue holds a message (visible, in flight or delayed), so polling
// consumers receive nothing for them, and none runs again until its
// signal. 200 tasks by default; TRIAGE_TEST_WAITERS=1000 runs 1,000.
func TestWaitingTasksHoldNoMessages(t *testing.T) {
	n := 200
	if v := os.Getenv("TRIAGE_TEST_WAITERS"); v != "" {
		if _, err := fmt.Sscan(v, &n); err != nil {
			t.Fatal(err)
		}
	}
	env := stacktest.New(t)
	a := env.App(t, nil)
	w := newWorker(t, env, map[string]string{triageconfig.EnvConcurrency: "16"})
	var runs atomic.Int32
	must(t, w.Handle("waiter", func(ctx context.Context, tk *worker.Task) (any, error) {
		runs.Add(1)
		v, err := worker.WaitSignal[int](ctx, tk, "go", 24*time.Hour)
		return v, err
	}))
	ctx := context.Background()
	var ts []*task.Task
	for range n {
		sr, err := triage.NewRequest("waiter", nil, triage.WithPriority(triage.Low))
		if err != nil {
			t.Fatal(err)
		}
		tr := task.Request(sr)
		ts = append(ts, tr.NewTask(a.Store.Now(), 0))
	}
	var ids []string
	for i := 0; i < n; i += 100 {
		for _, r := range a.Enqueuer.SubmitBatch(ctx, ts[i:min(i+100, n)]) {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			ids = append(ids, r.Task.ID)
		}
	}
	start(t, w)
	deadline := time.Now().Add(time.Duration(n)*200*time.Millisecond + 30*time.Second)
	for {
		c := stacktest.StatusCounts(t, a.Store, ids)
		if c[triagetype.Retrying] == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not all waiting: %v", c)
		}
		time.Sleep(time.Second)
	}
	ranBefore := runs.Load()
	time.Sleep(3 * time.Second) // the consumer keeps polling meanwhile
	for _, p := range []triagetype.Priority{triagetype.High, triagetype.Medium, triagetype.Low} {
		d, err := a.Queues.Depth(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if d.Visible+d.InFlight+d.Delayed != 0 {
			t.Fatalf("%s queue holds %+v while %d tasks wait; want nothing", p, d, n)
		}
	}
	if got := runs.Load(); got != ranBefore || int(got) != n {
		t.Fatalf("handlers ran %d times (%d before the quiet window); want %d, once each", got, ranBefore, n)
	}
	svc := service.New(service.Deps{Store: a.Store, Enqueuer: a.Enqueuer}, service.Options{})
	// The suspended filter lists the waiters, walking the retrying tasks
	// (by-due) page by page; a sleep filter finds none of them.
	suspended := func(kind string) int {
		t.Helper()
		seen, cursor := 0, ""
		for {
			ts, next, err := svc.List(ctx, service.ListQuery{Suspended: kind, Limit: 100, Cursor: cursor})
			if err != nil {
				t.Fatalf("list suspended=%s: %v", kind, err)
			}
			for _, tk := range ts {
				if tk.Suspend == nil || kind != "any" && tk.Suspend.Kind != kind {
					t.Fatalf("list suspended=%s returned %s, suspended %+v", kind, tk.ID, tk.Suspend)
				}
			}
			if seen += len(ts); next == "" {
				return seen
			}
			cursor = next
		}
	}
	if got, none := suspended(triagetype.StepWait), suspended(triagetype.StepSleep); got != n || none != 0 {
		t.Fatalf("suspended=wait lists %d, suspended=sleep %d; want %d and 0", got, none, n)
	}
	var fe *fault.Error
	if _, _, err := svc.List(ctx, service.ListQuery{Suspended: "nap"}); !errors.As(err, &fe) || fe.Field != "suspended" {
		t.Fatalf("suspended=nap: %v, want a field error naming suspended", err)
	}
	if _, err := svc.Signal(ctx, ids[0], "go", json.RawMessage(`7`)); err != nil {
		t.Fatal(err)
	}
	if done := stacktest.WaitStatus(t, a.Store, ids[0], triagetype.Completed, 20*time.Second); string(done.Result) != "7" {
		t.Fatalf("result %s", done.Result)
	}
	if got := suspended("any"); got != n-1 {
		t.Fatalf("after one signal, suspended=any lists %d, want %d", got, n-1)
	}
}

// An operator's retry of a task dead-lettered by a step's permanent
// error runs that step again, while the steps that succeeded replay.
func TestRetryRunsTheFailedStepAgain(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	w := newWorker(t, env, nil)
	var firstRuns, secondRuns atomic.Int32
	must(t, w.Handle("fails-once", func(ctx context.Context, tk *worker.Task) (any, error) {
		if _, err := worker.Step(ctx, tk, "first", func(context.Context) (int, error) { firstRuns.Add(1); return 1, nil }); err != nil {
			return nil, err
		}
		return worker.Step(ctx, tk, "second", func(context.Context) (int, error) {
			if secondRuns.Add(1) == 1 {
				return 0, worker.Permanent(errors.New("card declined"))
			}
			return 2, nil
		})
	}))
	start(t, w)
	tk := submit(t, a, "fails-once", nil)
	dead := stacktest.WaitStatus(t, a.Store, tk.ID, triagetype.DeadLetter, 20*time.Second)
	if len(dead.Steps) != 2 || dead.Steps[1].Outcome() != "error" {
		t.Fatalf("steps %+v; want the second recorded as an error", dead.Steps)
	}
	dlq := deadletter.New(a.Queues, a.Store, a.Enqueuer)
	if _, err := dlq.Retry(context.Background(), tk.ID); err != nil {
		t.Fatal(err)
	}
	done := stacktest.WaitStatus(t, a.Store, tk.ID, triagetype.Completed, 20*time.Second)
	if string(done.Result) != "2" || firstRuns.Load() != 1 || secondRuns.Load() != 2 {
		t.Fatalf("result %s, first ran %d, second %d; want 2, 1, 2", done.Result, firstRuns.Load(), secondRuns.Load())
	}
}
