package waiting_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/app/consumerapp"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/queue"
	submitsvc "github.com/triagehq/triage/internal/submit"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// weightPath is one way tasks of keys X (weight 3) and Y (weight 1) reach
// a running consumer: submit sends each key's 200 tasks, then go lets the
// consumer start them (a resume; nothing for the live paths).
type weightPath struct {
	name string
	// paused: submitted while held and released by resume: the first 120
	// starts are held to 3:1. Otherwise the consumer runs throughout: each
	// key's window (20 x weight) goes to the queue as it arrives, so the
	// split is held over cycles of 80 starts (160 starts from when both keys have a batch queued).
	paused bool
	// lo and hi bound X's starts per Y's, when not 3:1 within 10 %.
	lo, hi float64
	submit func(t *testing.T, env *stacktest.Env, a *app.App, both *bothQueued) (xs []string)
	resume func(t *testing.T, a *app.App)
}

// bothQueued is when both keys' first batch was on the queue (zero for
// the paths that do not mark it). Until then the key submitted first runs
// alone, which is right (nothing of the other key waits) but is not the
// weighted split: each such start puts one more of its key ahead of the
// other's window. On a loaded machine the second API process, its caches
// cold, sent its first batch about 150 ms later (3 starts at 20 a second): 3 more X starts in
// the first 80 (123:37 over 160).
type bothQueued struct {
	mu sync.Mutex
	n  int
	at time.Time
}

// mark records that one key's first batch returned.
func (b *bothQueued) mark() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n++
	if b.n == 2 {
		b.at = time.Now()
	}
}

func (b *bothQueued) time() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.at
}

// batches submits n tasks of key through svc in batches of 100, and marks
// b (when not nil) once the first batch returned.
func batches(t *testing.T, svc *submitsvc.Service, key string, n int, b *bothQueued) []string {
	t.Helper()
	ids := submitVia(t, svc, key, min(n, 100))
	if b != nil {
		b.mark()
	}
	if n > 100 {
		ids = append(ids, submitVia(t, svc, key, n-100)...)
	}
	return ids
}

// singles submits n tasks of key through svc one at a time, from 6
// callers at once (a key submitting faster than its window: 20 x weight
// a second).
func singles(t *testing.T, svc *submitsvc.Service, key string, n int) []string {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	var ids []string
	const callers = 6
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; i < n; i += callers {
				o := svc.Submit(context.Background(), task.Request{Type: "fair", Key: key, Priority: triagetype.High})
				if o.Err != nil {
					t.Errorf("submit: %v", o.Err)
					return
				}
				mu.Lock()
				ids = append(ids, o.Task.ID)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return ids
}

// both runs X's and Y's submits side by side (each in submit order) and
// returns X's ids.
func both(t *testing.T, x, y func() []string) []string {
	var wg sync.WaitGroup
	var xs []string
	wg.Add(2)
	go func() { defer wg.Done(); xs = x() }()
	go func() { defer wg.Done(); y() }()
	wg.Wait()
	return xs
}

// pauseKeys pauses or resumes X and Y, both at once.
func pauseKeys(t *testing.T, a *app.App, paused bool) {
	t.Helper()
	var wg sync.WaitGroup
	for _, k := range []string{"X", "Y"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := a.Controls.SetKeyControls(context.Background(), "", k, &paused, nil, nil); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
}

// TestWeightsOnEveryPath: keys X (weight 3) and Y (weight 1), 200 tasks
// each, through every way a task arrives. Submitted while paused (global,
// type, key) and resumed, they are released in weighted fair order: the
// first 120 starts split 3:1 within ±10 % (2.7 to 3.3). Submitted to a
// running consumer slower than the submits (single submits, batches of
// 100, two API processes), each key keeps its window on the queue (20 x
// weight), each start putting back one of its key: the 160 starts (two
// cycles of both windows) from when both keys' first batch returned split
// 3:1 within ±10 % (the starts before, the first key's alone, are not
// shared: see bothQueued). Direct SQS sends
// are all on the queue before triage sees them: their window is counted
// at adoption, per consumer and second, and they start about in send
// order: one producer alternates the keys' batches, so only that neither
// key starves (0.6:1 to 3.3:1) is asserted; measured 80:80, 90:70 and
// 70:90 with a producer per key on a quiet machine. Single submits slower
// than the windows are not shared by weight either: they start as they
// arrive, and only that neither key starves (0.8:1 to 7:1) is asserted.
func TestWeightsOnEveryPath(t *testing.T) {
	const each = 200
	paths := []weightPath{
		// Not held (see docs/keys.md): the split follows the submit rates;
		// asserted is only that neither key starves.
		{name: "single submits", lo: 0.8, hi: 7, submit: func(t *testing.T, _ *stacktest.Env, a *app.App, b *bothQueued) []string {
			svc := fairService(a)
			return both(t, func() []string { return singles(t, svc, "X", each) }, func() []string { return singles(t, svc, "Y", each) })
		}},
		{name: "batches of 100", submit: func(t *testing.T, _ *stacktest.Env, a *app.App, b *bothQueued) []string {
			svc := fairService(a)
			return both(t, func() []string { return batches(t, svc, "X", each, b) }, func() []string { return batches(t, svc, "Y", each, b) })
		}},
		{name: "two API processes", submit: func(t *testing.T, env *stacktest.Env, a *app.App, b *bothQueued) []string {
			x, y := fairService(a), fairService(env.App(t, nil))
			return both(t, func() []string { return batches(t, x, "X", each, b) }, func() []string { return batches(t, y, "Y", each, b) })
		}},
		{name: "direct SQS sends", lo: 0.6, hi: 3.3, submit: func(t *testing.T, _ *stacktest.Env, a *app.App, b *bothQueued) []string {
			// One producer alternates the keys' batches of 10: two
			// producers at once measured the machine's scheduling (one
			// finished its sends well before the other at load 20: 50:110).
			for start := 0; start < each; start += 10 {
				directSends(t, a, "X", min(10, each-start))
				directSends(t, a, "Y", min(10, each-start))
			}
			return nil // adopted ids are known once started: X's are told by their key
		}},
		{name: "global pause", paused: true, submit: func(t *testing.T, _ *stacktest.Env, a *app.App, b *bothQueued) []string {
			if _, err := a.Controls.SetPaused(context.Background(), "", true); err != nil {
				t.Fatal(err)
			}
			svc := fairService(a)
			return both(t, func() []string { return batches(t, svc, "X", each, b) }, func() []string { return batches(t, svc, "Y", each, b) })
		}, resume: func(t *testing.T, a *app.App) {
			if _, err := a.Controls.SetPaused(context.Background(), "", false); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "type pause", paused: true, submit: func(t *testing.T, _ *stacktest.Env, a *app.App, b *bothQueued) []string {
			if _, err := a.Controls.SetPaused(context.Background(), "fair", true); err != nil {
				t.Fatal(err)
			}
			svc := fairService(a)
			return both(t, func() []string { return batches(t, svc, "X", each, b) }, func() []string { return batches(t, svc, "Y", each, b) })
		}, resume: func(t *testing.T, a *app.App) {
			if _, err := a.Controls.SetPaused(context.Background(), "fair", false); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "key pause", paused: true, lo: 2.25, hi: 3.75, submit: func(t *testing.T, _ *stacktest.Env, a *app.App, b *bothQueued) []string {
			pauseKeys(t, a, true)
			svc := fairService(a)
			return both(t, func() []string { return batches(t, svc, "X", each, b) }, func() []string { return batches(t, svc, "Y", each, b) })
		}, resume: func(t *testing.T, a *app.App) { pauseKeys(t, a, false) }},
	}
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			env := stacktest.New(t)
			a := env.App(t, nil)
			if _, err := a.Controls.SetKeyControls(context.Background(), "", "X", nil, nil, nil, ptr(3)); err != nil {
				t.Fatal(err)
			}
			var log keyLog
			opt := stacktest.FastDispatch()
			opt.Concurrency = 2 // 20 starts a second: slower than the submits, so both keys back up
			c := consumerapp.New(a, stacktest.Registry("fair", log.handler(100*time.Millisecond)), opt, dispatch.Deps{})
			stacktest.Run(t, c)
			var queued bothQueued
			if p.paused {
				p.submit(t, env, a, &queued)
				// Everything received so far is set aside; nothing started.
				time.Sleep(2 * time.Second)
				if n := len(log.snapshot()); n != 0 {
					t.Fatalf("%d tasks started while paused", n)
				}
				p.resume(t, a)
			} else {
				p.submit(t, env, a, &queued)
			}
			// Two cycles of 80: X's 60 and Y's 20 windows, each put back as
			// it starts, counted from when both windows were on the queue.
			from := 0
			if at := queued.time(); !p.paused && !at.IsZero() {
				from = log.startsBefore(at)
			}
			window := from + 160 // X has 200: at 3:1 it runs out after 266 starts
			if p.paused {
				window = 120
			}
			waitFor(t, fmt.Sprintf("%d starts", window), 3*time.Minute, func() bool { return len(log.snapshot()) >= window })
			keys := log.snapshot()
			to := window
			nx := 0
			for _, k := range keys[from:to] {
				if k == "X" {
					nx++
				}
			}
			ny := to - from - nx
			var cycles []int
			for i := from; i+80 <= len(keys); i += 80 {
				k := 0
				for _, key := range keys[i : i+80] {
					if key == "X" {
						k++
					}
				}
				cycles = append(cycles, k)
			}
			ratio := float64(nx) / float64(max(ny, 1))
			t.Logf("%s: starts %d-%d: X %d, Y %d = %.2f:1 (X's in each 80: %v)", p.name, from+1, to, nx, ny, ratio, cycles)
			lo, hi := 2.7, 3.3
			if p.lo > 0 {
				lo, hi = p.lo, p.hi
			}
			if ratio < lo || ratio > hi {
				t.Fatalf("split %d:%d = %.2f:1 over starts %d-%d, want between %.2f and %.2f", nx, ny, ratio, from+1, to, lo, hi)
			}
		})
	}
}

// keyLog records the key of each start, then takes d.
type keyLog struct {
	mu   sync.Mutex
	keys []string
	at   []time.Time
}

func (l *keyLog) handler(d time.Duration) handler.Handler {
	return handler.Func(func(ctx context.Context, r handler.Request) (json.RawMessage, error) {
		l.mu.Lock()
		l.keys = append(l.keys, r.Key)
		l.at = append(l.at, time.Now())
		l.mu.Unlock()
		time.Sleep(d)
		return nil, nil
	})
}

// startsBefore counts the starts before t.
func (l *keyLog) startsBefore(t time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, at := range l.at {
		if at.Before(t) {
			n++
		}
	}
	return n
}

func (l *keyLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.keys...)
}

// directSends sends n direct SQS messages of key (a type and a key, no
// task id), as a producer with the SDK would, 10 to a batch.
func directSends(t *testing.T, a *app.App, key string, n int) {
	t.Helper()
	for start := 0; start < n; start += 10 {
		msgs := make([]queue.Outgoing, min(10, n-start))
		for i := range msgs {
			msgs[i] = queue.Outgoing{ID: fmt.Sprint(i), Body: fmt.Sprintf(`{"type":"fair","key":%q}`, key), Group: key}
		}
		if err := a.Queues.SendBatch(context.Background(), triagetype.High, msgs); err != nil {
			t.Errorf("direct send: %v", err)
			return
		}
	}
}

// TestPauseKeepsOrder: with one slot, 50 tasks submitted one by one right
// after a global pause, then resumed, start in submit order (0
// inversions), whether the API process that takes them has seen the pause
// (they are set aside at submit) or not (its cache is warm from a submit
// just before: its first ones are sent, and a consumer that receives one
// while the pause spreads sets it aside in its place, not hidden behind
// the rest).
func TestPauseKeepsOrder(t *testing.T) {
	for _, stale := range []bool{false, true} {
		t.Run(fmt.Sprintf("stale API cache %v", stale), func(t *testing.T) {
			env := stacktest.New(t)
			a := env.App(t, nil)
			ctx := context.Background()
			var log startLog
			opt := stacktest.FastDispatch()
			opt.Concurrency = 1
			stacktest.Run(t, consumerapp.New(env.App(t, nil), stacktest.Registry("ordered", log.handler()), opt, dispatch.Deps{}))
			api := fairService(a)
			if stale {
				api = fairService(env.App(t, nil)) // another API process
			}
			submit := func() string {
				o := api.Submit(ctx, task.Request{Type: "ordered"})
				if o.Err != nil {
					t.Fatalf("submit: %v", o.Err)
				}
				return o.Task.ID
			}
			ids := []string{submit()} // warms the process's cache: not paused
			if _, err := a.Controls.SetPaused(ctx, "", true); err != nil {
				t.Fatal(err)
			}
			for range 49 {
				ids = append(ids, submit())
			}
			time.Sleep(2 * time.Second)
			started, _ := log.snapshot()
			if _, err := a.Controls.SetPaused(ctx, "", false); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "50 starts", 2*time.Minute, func() bool { got, _ := log.snapshot(); return len(got) >= len(ids) })
			got, _ := log.snapshot()
			inv := inversions(ids, got)
			if inv != 0 {
				pos := map[string]int{}
				for i, id := range ids {
					pos[id] = i
				}
				var order []int
				for _, id := range got {
					order = append(order, pos[id])
				}
				t.Logf("start order by submit position: %v", order)
			}
			t.Logf("%d started before the resume; %d starts, %d inversions of %d pairs", len(started), len(got), inv, len(ids)*(len(ids)-1)/2)
			if inv != 0 || len(got) != len(ids) {
				t.Fatalf("%d starts with %d inversions against submit order, want %d with 0", len(got), inv, len(ids))
			}
		})
	}
}
