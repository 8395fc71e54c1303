package waiting_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/app/consumerapp"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// startLog records the order in which a handler's tasks start.
type startLog struct {
	mu  sync.Mutex
	ids []string
	at  []time.Time
}

func (l *startLog) handler() handler.Handler {
	return handler.Func(func(ctx context.Context, r handler.Request) (json.RawMessage, error) {
		l.mu.Lock()
		l.ids = append(l.ids, r.ID)
		l.at = append(l.at, time.Now())
		l.mu.Unlock()
		return nil, nil
	})
}

func (l *startLog) snapshot() ([]string, []time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ids), slices.Clone(l.at)
}

// inversions counts the pairs of got that are in the other order in want.
func inversions(want, got []string) int {
	pos := map[string]int{}
	for i, id := range want {
		pos[id] = i
	}
	n := 0
	for i := range got {
		for j := i + 1; j < len(got); j++ {
			if pos[got[i]] > pos[got[j]] {
				n++
			}
		}
	}
	return n
}

// submitOrdered submits n tasks one after another (each with its own
// creation time) and returns their ids in submit order.
func submitOrdered(t *testing.T, a *app.App, typ string, n int) []string {
	t.Helper()
	ts := make([]*task.Task, n)
	for i := range ts {
		r := task.Request{Type: typ}
		ts[i] = r.NewTask(time.Now().UTC(), 15*time.Minute)
	}
	ids := make([]string, 0, n)
	for start := 0; start < n; start += 100 {
		for _, res := range a.Enqueuer.SubmitBatch(context.Background(), ts[start:min(start+100, n)]) {
			if res.Err != nil {
				t.Fatalf("submit: %v", res.Err)
			}
			ids = append(ids, res.Task.ID)
		}
	}
	return ids
}

// waitFor polls cond every 100 ms until it holds or the cap passes (the
// cap only ends a broken run).
func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s after %v", what, limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// backlogSize is the paused backlog's size: TRIAGE_BACKLOG_TASKS, 400 by
// default to keep `make test` short (1,000 took 94 s of it on a loaded
// machine; the bench's group 13 sets 10,000 aside).
func backlogSize() int {
	if n, err := strconv.Atoi(os.Getenv("TRIAGE_BACKLOG_TASKS")); err == nil && n > 0 {
		return n
	}
	return 400
}

// TestPausedBacklogIsSetAsideAndStartsInOrder: tasks of a paused type are
// received once each and set aside; while paused the consumer receives
// no message again however often it polls (counted, not timed); after the
// resume they start, with one slot, exactly in submit order.
func TestPausedBacklogIsSetAsideAndStartsInOrder(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	ctx := context.Background()
	const typ = "ordered"
	if _, err := a.Controls.SetPaused(ctx, typ, true); err != nil {
		t.Fatal(err)
	}
	n := backlogSize()
	ids := submitOrdered(t, a, typ, n)

	var log startLog
	opt := stacktest.FastDispatch()
	opt.Concurrency = 1
	c := consumerapp.New(a, stacktest.Registry(typ, log.handler()), opt, dispatch.Deps{})
	stacktest.Run(t, c)
	waitFor(t, fmt.Sprintf("%d tasks set aside", n), 5*time.Minute, func() bool { return c.Waits().SetAside >= int64(n) })
	if w := c.Waits(); w.SetAside != int64(n) {
		t.Fatalf("set aside %d tasks, want %d", w.SetAside, n)
	}
	held, err := a.Store.Get(ctx, ids[0])
	if err != nil || held.Held != "type#"+typ || held.DispatchVersion != task.NoMessage || held.Status != triagetype.Queued {
		t.Fatalf("first task = %+v, %v; want queued, held in type#%s, with no message", held, err, typ)
	}

	// While paused: the consumer goes on polling, and no message comes.
	before := c.Waits()
	waitFor(t, "20 more receive requests", 3*time.Minute, func() bool { return c.Waits().Receives >= before.Receives+20 })
	after := c.Waits()
	if after.Received != before.Received {
		t.Fatalf("while paused the consumer received %d more messages over %d receives, want 0", after.Received-before.Received, after.Receives-before.Receives)
	}
	if got, _ := log.snapshot(); len(got) != 0 {
		t.Fatalf("%d tasks started while paused", len(got))
	}
	t.Logf("paused: %d receive requests brought 0 messages; %d messages were received in all for %d tasks", after.Receives-before.Receives, after.Received, n)

	resumed := time.Now()
	if _, err := a.Controls.SetPaused(ctx, typ, false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, fmt.Sprintf("%d starts", n), 10*time.Minute, func() bool { got, _ := log.snapshot(); return len(got) >= n })
	got, at := log.snapshot()
	if inv := inversions(ids, got); inv != 0 {
		t.Fatalf("start order has %d inversions of %d pairs against submit order", inv, n*(n-1)/2)
	}
	if len(got) != n {
		t.Fatalf("%d starts for %d tasks", len(got), n)
	}
	t.Logf("resume: first start %v after the resume call, last %v; 0 inversions of %d pairs", at[0].Sub(resumed), at[len(at)-1].Sub(resumed), n*(n-1)/2)
}

// TestGlobalPauseStopsReceiving: a consumer under a global pause makes no
// receive request at all (counted over its pause checks, not timed), and
// runs the waiting tasks once resumed.
func TestGlobalPauseStopsReceiving(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	ctx := context.Background()
	if _, err := a.Controls.SetPaused(ctx, "", true); err != nil {
		t.Fatal(err)
	}
	ids := submitOrdered(t, a, "g", 20)
	var log startLog
	c := consumerapp.New(a, stacktest.Registry("g", log.handler()), stacktest.FastDispatch(), dispatch.Deps{})
	stacktest.Run(t, c)
	waitFor(t, "10 pause checks", 2*time.Minute, func() bool { return c.Waits().PausedSleeps >= 10 })
	if w := c.Waits(); w.Receives != 0 {
		t.Fatalf("paused consumer made %d receive requests over %d pause checks, want 0", w.Receives, w.PausedSleeps)
	}
	if _, err := a.Controls.SetPaused(ctx, "", false); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		stacktest.WaitStatus(t, a.Store, id, triagetype.Completed, time.Minute)
	}

}
