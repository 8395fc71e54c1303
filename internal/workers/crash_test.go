package workers_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/internal/api"
	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/app/apiapp"
	"github.com/triagehq/triage/internal/app/consumerapp"
	"github.com/triagehq/triage/internal/auth"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/handler/demo"
	"github.com/triagehq/triage/triageconfig"
	"github.com/triagehq/triage/triagetype"
)

// The crash test runs long-running consumers in child processes (this
// test binary, re-executed), so one can be killed with SIGKILL: no
// deferred cleanup, no goodbye to the registry.
const (
	childEnv       = "TRIAGE_TEST_WORKER_CHILD" // the child's worker id
	childBeatEnv   = "TRIAGE_TEST_WORKER_BEAT"  // its heartbeat interval
	childCapacity  = 4
	crashTestToken = "workers-test-token"
)

// runChild runs a consumer with the demo handlers until SIGTERM, then
// drains and exits 0.
func runChild() {
	fail := func(err error) { fmt.Fprintln(os.Stderr, err); os.Exit(2) }
	cfg, err := triageconfig.FromEnv(os.Getenv)
	if err != nil {
		fail(err)
	}
	a, err := app.New(context.Background(), cfg, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		fail(err)
	}
	every, err := time.ParseDuration(os.Getenv(childBeatEnv))
	if err != nil {
		fail(err)
	}
	reg := handler.NewRegistry()
	demo.Register(reg)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	c := consumerapp.New(a, reg, dispatch.Options{
		Concurrency: childCapacity, ReservedHigh: 1,
		WorkerHeartbeat: every, PollWait: 200 * time.Millisecond,
	}, dispatch.Deps{WorkerID: os.Getenv(childEnv)})

	fmt.Println("RUNNING")
	if err := c.Run(ctx); err != nil {
		fail(err)
	}
	os.Exit(0)
}

// startChild starts a consumer child process with worker id id.
func startChild(t *testing.T, env *stacktest.Env, id string, every time.Duration) *exec.Cmd {
	t.Helper()
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childEnv+"="+id, childBeatEnv+"="+every.String(), "TRIAGE_PREFIX="+env.Prefix)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	child.Stderr = &stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = child.Process.Kill()
		_ = child.Wait()
		if t.Failed() && stderr.Len() > 0 {
			t.Logf("%s stderr:\n%s", id, stderr.String())
		}
	})
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case line <- sc.Text():
			default:
			}
		}
	}()
	select {
	case l := <-line:
		if l != "RUNNING" {
			t.Fatalf("%s said %q", id, l)
		}
	case <-time.After(time.Minute):
		t.Fatalf("%s never started; stderr: %s", id, stderr.String())
	}
	return child
}

// Killing a long-running worker with SIGKILL shows it dead in GET
// /workers within the documented time, DeadAfterBeats heartbeat intervals,
// while a live one stays active throughout; /stats sums the same figures
// the list shows; and a worker stopped cleanly shows draining while it
// finishes its task, then leaves the list.
func TestKilledWorkerShowsDead(t *testing.T) {
	// Short enough for a quick test, long enough that DynamoDB Local on a
	// busy machine (a listing can take 500 ms) never misses a live
	// worker's heartbeat window. At 500 ms a CI run saw the survivor child
	// write no heartbeat after its registration for 1.5 s (a 2-core
	// machine running the suite's packages side by side), so it showed
	// dead; 1 s gives it 3 s, and a CI run beside another test run (load
	// 11-20) saw 3 s pass without one too; 2 s gives it 6 s.
	const every = 2 * time.Second
	env := stacktest.New(t)
	a := env.App(t, nil)
	stacktest.RunCounters(t, a)
	toks, err := auth.Parse("")
	if err != nil {
		t.Fatal(err)
	}
	toks.Add(crashTestToken, auth.Admin)
	srv := httptest.NewServer(apiapp.Handler(a, toks, api.Options{}))
	t.Cleanup(srv.Close)
	c := triage.NewClient(triage.HTTP(srv.URL, crashTestToken))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	list := func() map[string]triagetype.WorkerInfo {
		t.Helper()
		l, err := c.ListWorkers(ctx)
		if err != nil {
			t.Fatalf("GET /workers: %v", err)
		}
		return byID(l.Workers)
	}
	// await polls GET /workers until ok holds, failing after within; it
	// returns the list that satisfied it.
	await := func(what string, within time.Duration, ok func(map[string]triagetype.WorkerInfo) bool) map[string]triagetype.WorkerInfo {
		t.Helper()
		end := time.Now().Add(within)
		for {
			ws := list()
			if ok(ws) {
				return ws
			}
			if time.Now().After(end) {
				t.Fatalf("%s: not within %s; workers: %+v", what, within, ws)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	victim := startChild(t, env, "victim", every)
	survivor := startChild(t, env, "survivor", every)
	await("both registered and active", time.Minute, func(ws map[string]triagetype.WorkerInfo) bool {
		return ws["victim"].State == triagetype.WorkerActive && ws["survivor"].State == triagetype.WorkerActive
	})
	for id, w := range list() {
		if w.Kind != "worker" || w.Capacity != childCapacity || w.HeartbeatSeconds != every.Seconds() {
			t.Errorf("%s = %+v, want kind worker, capacity %d, heartbeat %s", id, w, childCapacity, every)
		}
	}

	// Kill the victim. Its last heartbeat came before the kill, so every
	// listing made from DeadAfterBeats intervals after the kill on must
	// show it dead; the survivor stays active at every look.
	if err := victim.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	bound := killed.Add(triagetype.DeadAfterBeats * every)
	var after map[string]triagetype.WorkerInfo
	for {
		asked := time.Now()
		ws := list()
		if ws["survivor"].State != triagetype.WorkerActive {
			t.Fatalf("%s after the kill, the survivor is %+v", asked.Sub(killed), ws["survivor"])
		}
		if ws["victim"].State == triagetype.WorkerDead {
			after = ws
			t.Logf("the killed worker showed dead in a listing asked %s after SIGKILL (bound %s)", asked.Sub(killed).Round(time.Millisecond), triagetype.DeadAfterBeats*every)
			break
		}
		if !asked.Before(bound) {
			t.Fatalf("a listing asked %s after SIGKILL shows the killed worker %+v; the bound is %s", asked.Sub(killed), ws["victim"], triagetype.DeadAfterBeats*every)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if last := after["victim"].LastHeartbeatAt; last.After(killed) {
		t.Errorf("the victim heartbeat at %s, after it was killed at %s", last, killed)
	}

	// /stats sums what the list shows. Nothing changes between the two
	// reads (one worker dead, the other idle), so both must give exactly
	// these figures.
	st, err := c.GetStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := triagetype.WorkerStats{Active: 1, Dead: 1, Capacity: childCapacity, Used: 0}
	if st.Workers == nil || *st.Workers != want {
		t.Errorf("/stats workers = %+v, want %+v", st.Workers, want)
	}
	l, err := c.ListWorkers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := triagetype.SummarizeWorkers(l.Workers); got != want {
		t.Errorf("GET /workers sums to %+v, want %+v (as /stats)", got, want)
	}

	// A task keeps the survivor busy; SIGTERM makes it drain: listed as
	// draining with its busy slot, then gone once the task is done.
	tk, _, err := c.Submit(ctx, "sleep", map[string]int{"ms": 3000}, triage.WithPriority(triage.Low))
	if err != nil {
		t.Fatal(err)
	}
	await("the survivor busy", 30*time.Second, func(ws map[string]triagetype.WorkerInfo) bool { return ws["survivor"].Busy == 1 })
	if st, err := c.GetStats(ctx); err != nil || st.Workers == nil || st.Workers.Used != 1 {
		t.Errorf("/stats workers with the survivor busy = %+v (%v), want 1 slot used", st.Workers, err)
	}
	if err := survivor.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	await("the survivor draining", 5*every, func(ws map[string]triagetype.WorkerInfo) bool {
		return ws["survivor"].State == triagetype.WorkerDraining && ws["survivor"].Busy == 1
	})
	await("the survivor gone once its task is done", 30*time.Second, func(ws map[string]triagetype.WorkerInfo) bool {
		_, listed := ws["survivor"]
		return !listed
	})
	if err := survivor.Wait(); err != nil {
		t.Errorf("the survivor's clean stop: %v", err)
	}
	if done, err := c.Get(ctx, tk.ID); err != nil || done.Status != triage.Completed {
		t.Errorf("the drained task: %+v, %v; want completed", done, err)
	}
	if ws := list(); ws["victim"].State != triagetype.WorkerDead || len(ws) != 1 {
		t.Errorf("at the end: %+v, want only the dead victim", ws)
	}
}

// Each invocation of the consumer function registers as kind lambda while
// it polls, and removes itself before it returns.
func TestLambdaInvocationRegisters(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	reg := handler.NewRegistry()
	demo.Register(reg)
	fn := consumerapp.Lambda(a, reg, dispatch.Options{WorkerHeartbeat: 500 * time.Millisecond, PollWait: 100 * time.Millisecond}, dispatch.Deps{})
	// The function polls until LambdaReserve before its deadline: here,
	// for about 3 s.
	ctx, cancel := context.WithTimeout(context.Background(), consumerapp.LambdaReserve+3*time.Second)
	defer cancel()
	type result struct {
		sum consumerapp.LambdaSummary
		err error
	}
	done := make(chan result, 1)
	go func() {
		sum, err := fn(ctx, events.EventBridgeEvent{})
		done <- result{sum, err}
	}()
	var seen []triagetype.WorkerInfo
	for len(seen) == 0 {
		select {
		case r := <-done:
			t.Fatalf("the invocation returned (%+v, %v) before it was listed", r.sum, r.err)
		case <-time.After(20 * time.Millisecond):
		}
		ws, err := a.Workers.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seen = ws
	}
	if len(seen) != 1 || seen[0].Kind != triagetype.WorkerKindLambda || seen[0].State != triagetype.WorkerActive {
		t.Errorf("while polling: %+v, want one active lambda worker", seen)
	}
	r := <-done
	if r.err != nil || r.sum.WorkerID != seen[0].ID {
		t.Errorf("invocation: %+v, %v; want worker %s", r.sum, r.err, seen[0].ID)
	}
	if ws, err := a.Workers.List(ctx); err != nil || len(ws) != 0 {
		t.Errorf("after the invocation: %+v, %v; want none listed", ws, err)
	}
}
