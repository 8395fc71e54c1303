package dispatch_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/app/consumerapp"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/enqueue"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		runChildConsumer() // the crash test's victim process
		return
	}
	stacktest.Main(m)
}

// submit records and sends n tasks of type typ at priority p.
func submit(t *testing.T, a *app.App, typ string, p triagetype.Priority, n int, payload string) []string {
	t.Helper()
	ts := make([]*task.Task, n)
	for i := range ts {
		r := task.Request{Type: typ, Priority: p, Payload: json.RawMessage(payload)}
		ts[i] = r.NewTask(time.Now().UTC(), 15*time.Minute)
	}
	ids := make([]string, n)
	for i, res := range a.Enqueuer.SubmitBatch(context.Background(), ts) {
		if res.Err != nil {
			t.Fatalf("submit: %v", res.Err)
		}
		ids[i] = res.Task.ID
	}
	return ids
}

func TestStrictModeRunsEveryHighBeforeAnyLow(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	low := submit(t, a, "rec", triagetype.Low, 30, `{}`)
	high := submit(t, a, "rec", triagetype.High, 10, `{}`)

	l := newLedger(nil)
	opt := stacktest.FastDispatch()
	opt.Strict, opt.Concurrency, opt.ReservedHigh = new(true), 1, 0
	stop := stacktest.Run(t, consumerapp.New(a, stacktest.Registry("rec", l), opt, dispatch.Deps{}))
	waitEnds(t, l, 40, 60*time.Second)
	stop()

	checkOnce(t, l, append(low, high...))
	var lastHighEnd, firstLowStart time.Time
	for _, e := range l.Ends() {
		if e.Priority == triagetype.High && e.At.After(lastHighEnd) {
			lastHighEnd = e.At
		}
	}
	for _, e := range l.Starts() {
		if e.Priority == triagetype.Low && (firstLowStart.IsZero() || e.At.Before(firstLowStart)) {
			firstLowStart = e.At
		}
	}
	for i, e := range l.Starts()[:10] {
		if e.Priority != triagetype.High {
			t.Fatalf("start %d was a %s task; want the 10 high tasks first", i, e.Priority)
		}
	}
	if !lastHighEnd.Before(firstLowStart) {
		t.Fatalf("last high task ended at %v, after the first low task started at %v", lastHighEnd, firstLowStart)
	}
	// Completion is recorded before the slot frees, so the table agrees.
	for _, id := range high {
		tk, err := a.Store.Get(context.Background(), id)
		if err != nil || tk.Status != triagetype.Completed || tk.CompletedAt.After(firstLowStart) {
			t.Fatalf("high task %s: %+v, %v", id, tk, err)
		}
	}
}

func TestWeightedModeShares(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	const perQueue = 600
	submitted := map[string]triagetype.Priority{}
	for _, p := range triagetype.Priorities() {
		for _, id := range submit(t, a, "rec", p, perQueue, `{}`) {
			submitted[id] = p
		}
	}
	l := newLedger(nil)
	opt := stacktest.FastDispatch()
	opt.Concurrency, opt.ReservedHigh = 1, 0
	stop := stacktest.Run(t, consumerapp.New(a, stacktest.Registry("rec", l), opt, dispatch.Deps{Rand: rand.New(rand.NewPCG(42, 7))}))
	const draws = 600 // ± 5 points is over 2.5 standard deviations of each share
	waitEnds(t, l, draws, 3*time.Minute)
	stop()

	// With 1 slot each poll receives one message from the queue the picker
	// chose, and no queue can run dry within 600 draws.
	got := map[triagetype.Priority]int{}
	for _, e := range l.Starts()[:draws] {
		if p, ok := submitted[e.ID]; !ok || p != e.Priority {
			t.Fatalf("start of %s at %s: submitted %t at %q", e.ID, e.Priority, ok, p)
		}
		got[e.Priority]++
	}
	want := map[triagetype.Priority]float64{triagetype.High: 60, triagetype.Medium: 30, triagetype.Low: 10}
	for p, w := range want {
		share := 100 * float64(got[p]) / draws
		t.Logf("%s: %d of %d draws = %.1f%% (want %.0f%% ± 5)", p, got[p], draws, share, w)
		if share < w-5 || share > w+5 {
			t.Errorf("%s share %.1f%%, want %.0f%% ± 5", p, share, w)
		}
	}
	if o := l.Overlaps(); len(o) > 0 {
		t.Errorf("overlapping runs: %v", o)
	}
	for id, n := range l.Runs() {
		if _, ok := submitted[id]; !ok {
			t.Errorf("task %s ran but was not submitted", id)
		}
		if n != 1 {
			t.Errorf("task %s ran %d times", id, n)
		}
	}
}

func TestDuplicateMessagesRunOnce(t *testing.T) {
	t.Parallel() // its own stack; waits, not timing, make it slow
	env := stacktest.New(t)
	a := env.App(t, nil)
	ids := submit(t, a, "rec", triagetype.Medium, 1, `{}`)
	tk, err := a.Store.Get(context.Background(), ids[0])
	if err != nil {
		t.Fatal(err)
	}
	// A second copy of the same message, as SQS's at-least-once delivery may produce.
	if _, err := a.Queues.Send(context.Background(), triagetype.Medium, enqueue.Body(tk, tk.DispatchVersion), 0); err != nil {
		t.Fatal(err)
	}
	l := newLedger(func(ctx context.Context, r handler.Request) (json.RawMessage, error) {
		time.Sleep(300 * time.Millisecond) // long enough for the copy to arrive mid-run
		return json.RawMessage(`1`), nil
	})
	opt := stacktest.FastDispatch()
	opt.Concurrency = 4
	stop := stacktest.Run(t, consumerapp.New(a, stacktest.Registry("rec", l), opt, dispatch.Deps{}))
	stacktest.WaitStatus(t, a.Store, ids[0], triagetype.Completed, 20*time.Second)
	// Give the copy time to be received and dropped.
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		d, err := a.Queues.Depth(context.Background(), triagetype.Medium)
		if err != nil {
			t.Fatal(err)
		}
		if d.Visible+d.InFlight+d.Delayed == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	stop()
	checkOnce(t, l, ids)
	d, _ := a.Queues.Depth(context.Background(), triagetype.Medium)
	if d.Visible+d.InFlight != 0 {
		t.Fatalf("queue still holds %+v; both copies should be gone", d)
	}
}

func TestConcurrentConsumersRunEachTaskOnce(t *testing.T) {
	t.Parallel() // its own stack; waits, not timing, make it slow
	env := stacktest.New(t)
	a := env.App(t, nil)
	var ids []string
	for _, p := range triagetype.Priorities() {
		n := 167
		if p == triagetype.Low {
			n = 166
		}
		ids = append(ids, submit(t, a, "rec", p, n, `{}`)...)
	}
	l := newLedger(nil)
	for range 3 {
		opt := stacktest.FastDispatch()
		opt.Concurrency = 4
		stacktest.Run(t, consumerapp.New(a, stacktest.Registry("rec", l), opt, dispatch.Deps{}))
	}
	waitEnds(t, l, len(ids), 3*time.Minute)
	checkOnce(t, l, ids)
	for _, id := range ids {
		tk, err := a.Store.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if tk.Status != triagetype.Completed || tk.Attempts != 1 || string(tk.Result) != `{"ok":true}` {
			t.Fatalf("task %s: status %s attempts %d result %s", id, tk.Status, tk.Attempts, tk.Result)
		}
	}
	workers := map[string]bool{}
	for _, id := range ids[:50] {
		tk, _ := a.Store.Get(context.Background(), id)
		workers[tk.History[0].WorkerID] = true
	}
	if len(workers) < 2 {
		t.Errorf("only %d consumer(s) did work; want the load spread", len(workers))
	}
}

// With the consumer started by SQS events (one mapping a queue, as in
// Lambda), a low message starts an invocation of its own at once, so low
// work runs beside a high backlog: strict order holds within an
// invocation, and the low mapping's maximum concurrency (times the
// consumer's slots) bounds the low work beside high. Here 1 × 1: while
// high tasks wait, at most one low task runs, and the high backlog is
// done long before the low one.
func TestEventsStrictModeBoundsLowBesideHigh(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	low := submit(t, a, "rec", triagetype.Low, 40, `{}`)
	high := submit(t, a, "rec", triagetype.High, 10, `{}`)

	l := newLedger(func(ctx context.Context, r handler.Request) (json.RawMessage, error) {
		time.Sleep(100 * time.Millisecond)
		return nil, nil
	})
	opt := stacktest.FastDispatch()
	opt.Strict, opt.Concurrency, opt.ReservedHigh = new(true), 1, 0
	src := stacktest.Events(a, stacktest.Registry("rec", l), opt)
	const maxConcurrency, slots = 1, 1
	src.Mapping = spec.Mapping{BatchSize: 1, MaxConcurrency: maxConcurrency}
	stop := stacktest.Run(t, src)
	waitEnds(t, l, 50, 2*time.Minute)
	stop()
	checkOnce(t, l, append(low, high...))

	var firstHigh, lastHigh, lastLow time.Time
	for _, e := range l.Starts() {
		switch e.Priority {
		case triagetype.High:
			if firstHigh.IsZero() || e.At.Before(firstHigh) {
				firstHigh = e.At
			}
			if e.At.After(lastHigh) {
				lastHigh = e.At
			}
		case triagetype.Low:
			if e.At.After(lastLow) {
				lastLow = e.At
			}
		}
	}
	// Low runs at each low start within the high backlog's starts.
	ends := map[string]time.Time{}
	for _, e := range l.Ends() {
		ends[e.ID] = e.At
	}
	most := 0
	for _, s := range l.Starts() {
		if s.Priority != triagetype.Low || s.At.Before(firstHigh) || s.At.After(lastHigh) {
			continue
		}
		n := 0
		for _, o := range l.Starts() {
			if o.Priority == triagetype.Low && !o.At.After(s.At) && ends[o.ID].After(s.At) {
				n++
			}
		}
		most = max(most, n)
	}
	t.Logf("high starts %v .. %v, last low start %v; low runs at once beside high: %d", firstHigh.Format("15:04:05.000"), lastHigh.Format("15:04:05.000"), lastLow.Format("15:04:05.000"), most)
	if most > maxConcurrency*slots {
		t.Errorf("%d low tasks ran at once beside the high backlog, want at most %d (the low mapping's maximum concurrency × slots)", most, maxConcurrency*slots)
	}
	if !lastHigh.Before(lastLow) {
		t.Errorf("the last high task started at %v, after the last low one (%v): high waited behind the low backlog", lastHigh, lastLow)
	}
}
