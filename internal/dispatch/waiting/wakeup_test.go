package waiting_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/app/consumerapp"
	"github.com/triagehq/triage/internal/control"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/metrics"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// spyGate is a consumer's controls with hooks on the calls that decide
// who releases a task set aside for a concurrency limit.
type spyGate struct {
	*control.Controls
	// refused, if set, runs on a concurrency refusal before Decide
	// returns it (so before the task is set aside).
	refused func(t *task.Task)
	// ended gets the scope of each ScopeHeld call (a task's end) once it
	// has answered; rechecked each SlotFreeAfterHold call's (a set-aside's).
	ended, rechecked chan string
}

func newSpyGate(c *control.Controls) *spyGate {
	return &spyGate{Controls: c, ended: make(chan string, 16), rechecked: make(chan string, 16)}
}

func (g *spyGate) Decide(ctx context.Context, t *task.Task) (control.Decision, error) {
	d, err := g.Controls.Decide(ctx, t)
	if err == nil && d.Release == nil && d.Why == metrics.PutOffConcurrency && g.refused != nil {
		g.refused(t)
	}
	return d, err
}

func (g *spyGate) ScopeHeld(ctx context.Context, scope string) (bool, error) {
	held, err := g.Controls.ScopeHeld(ctx, scope)
	tell(g.ended, scope)
	return held, err
}

func (g *spyGate) SlotFreeAfterHold(ctx context.Context, scope string, released bool) (bool, error) {
	free, err := g.Controls.SlotFreeAfterHold(ctx, scope, released)
	tell(g.rechecked, scope)
	return free, err
}

// tell sends scope on ch unless its buffer is full (never blocking the
// consumer).
func tell(ch chan<- string, scope string) {
	select {
	case ch <- scope:
	default:
	}
}

// await waits for scope on ch.
func await(t *testing.T, ch <-chan string, scope, what string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case s := <-ch:
			if s == scope {
				return
			}
		case <-deadline:
			t.Fatalf("no %s for %s within 30 s", what, scope)
		}
	}
}

// TestConcurrencySetAsideIsReleasedWithoutPromoter: a task set aside for
// its key's concurrency limit (1) starts once the running task's slot
// frees, with no promoter running, in the two orders a task's end and a
// set-aside can interleave:
//   - the end comes between the refusal and the set-aside: the end saw
//     nothing held, so the setter, looking at the slots after its hold,
//     releases the task itself;
//   - the end comes after the set-aside, in a consumer whose cached
//     controls (read at the running task's start, kept an hour here)
//     still say nothing is held: the end reads the flag past its cache.
func TestConcurrencySetAsideIsReleasedWithoutPromoter(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	ctx := context.Background()
	t.Run("end between refusal and set-aside", func(t *testing.T) {
		const key = "wake1"
		concurrencyLimit(t, a.Controls, "", key, 1)
		first := make(chan struct{})
		h, started := heldFirst(first)
		ca := env.App(t, nil)
		g := newSpyGate(ca.Controls)
		scope := control.KeyScope(key).String()
		var fired bool
		g.refused = func(*task.Task) {
			if fired {
				return
			}
			fired = true
			close(first)                          // the running task ends...
			await(t, g.ended, scope, "end check") // ...and finds nothing held
		}
		opt := stacktest.FastDispatch()
		opt.Concurrency = 2
		stacktest.Run(t, consumerapp.New(ca, stacktest.Registry("work", h), opt, dispatch.Deps{Gate: g, WorkerID: "c"}))
		a1 := submitPayload(t, a, key, `"first"`)
		if id := <-started; id != a1 {
			t.Fatalf("started %s, want the first task %s", id, a1)
		}
		b := submitPayload(t, a, key, `"second"`)
		stacktest.WaitStatus(t, a.Store, a1, triagetype.Completed, 30*time.Second)
		got := stacktest.WaitStatus(t, a.Store, b, triagetype.Completed, 30*time.Second)
		if got.Attempts != 1 {
			t.Errorf("second task ran %d attempts, want 1", got.Attempts)
		}
	})
	t.Run("end after set-aside with a stale cache", func(t *testing.T) {
		const key = "wake2"
		concurrencyLimit(t, a.Controls, "", key, 1)
		first := make(chan struct{})
		h, started := heldFirst(first)
		scope := control.KeyScope(key).String()
		// The ender: one slot, controls cached for an hour.
		ea := env.App(t, nil)
		eg := newSpyGate(control.New(ea.DynamoDB, ea.Store.Table(), time.Hour))
		opt := stacktest.FastDispatch()
		opt.Concurrency = 1
		stacktest.Run(t, consumerapp.New(ea, stacktest.Registry("work", h), opt, dispatch.Deps{Gate: eg, WorkerID: "ender"}))
		a1 := submitPayload(t, a, key, `"first"`)
		if id := <-started; id != a1 {
			t.Fatalf("started %s, want the first task %s", id, a1)
		}
		// The setter: another process, started once the first task runs.
		sa := env.App(t, nil)
		sg := newSpyGate(sa.Controls)
		stacktest.Run(t, consumerapp.New(sa, stacktest.Registry("work", h), stacktest.FastDispatch(), dispatch.Deps{Gate: sg, WorkerID: "setter"}))
		b := submitPayload(t, a, key, `"second"`)
		await(t, sg.rechecked, scope, "look at the slots after the set-aside")
		if tk, err := a.Store.Get(ctx, b); err != nil || tk.Held != scope {
			t.Fatalf("second task %+v (%v), want it set aside in %s", tk, err, scope)
		}
		close(first)
		await(t, eg.ended, scope, "end check")
		got := stacktest.WaitStatus(t, a.Store, b, triagetype.Completed, 30*time.Second)
		if got.Attempts != 1 {
			t.Errorf("second task ran %d attempts, want 1", got.Attempts)
		}
	})
}

// heldFirst is a handler that tells started each task it starts and
// holds the one whose payload is "first" until first is closed.
func heldFirst(first <-chan struct{}) (handler.Handler, <-chan string) {
	started := make(chan string, 4)
	return handler.Func(func(ctx context.Context, req handler.Request) (json.RawMessage, error) {
		started <- req.ID
		if string(req.Payload) == `"first"` {
			<-first
		}
		return nil, nil
	}), started
}

// submitPayload submits one task of type work with key and payload.
func submitPayload(t *testing.T, a *app.App, key, payload string) string {
	t.Helper()
	r := task.Request{Type: "work", Key: key, Payload: json.RawMessage(payload)}
	res := a.Enqueuer.SubmitBatch(context.Background(), []*task.Task{r.NewTask(time.Now().UTC(), 15*time.Minute)})
	if res[0].Err != nil {
		t.Fatalf("submit: %v", res[0].Err)
	}
	return res[0].Task.ID
}

// TestRefusalNamesGivenBackSlots: a task admitted by its key's limit (2)
// and refused by its (type, key) limit (1) gives the key's slot back, and
// the refusal names the key's scope, for the consumer to wake as a task's
// end would (a task set aside for that slot meanwhile may have no other
// running task to release it).
func TestRefusalNamesGivenBackSlots(t *testing.T) {
	env := stacktest.New(t)
	a1, a2 := env.App(t, nil), env.App(t, nil)
	concurrencyLimit(t, a1.Controls, "", "gb", 2)
	concurrencyLimit(t, a1.Controls, "work", "gb", 1)
	x, y := slotTask(t, a1, "gb", 60), slotTask(t, a1, "gb", 60)
	dx, token := decide(t, a1.Controls, x)
	if dx.Release == nil {
		t.Fatalf("first task refused (%s)", dx.Why)
	}
	claimRun(t, a1, x, token)
	dx.Started()
	dy, _ := decide(t, a2.Controls, y)
	keyScope, tkScope := control.KeyScope("gb").String(), control.TypeKeyScope("work", "gb").String()
	if dy.Release != nil || dy.Scope != tkScope || dy.Why != metrics.PutOffConcurrency {
		t.Fatalf("second task: admitted %v, scope %q, why %q; want refused by %s's concurrency", dy.Release != nil, dy.Scope, dy.Why, tkScope)
	}
	if !slices.Contains(append(dy.EndIfHeld, dy.EndNext...), keyScope) {
		t.Errorf("the refusal names %v %v, not %s, whose slot it gave back", dy.EndIfHeld, dy.EndNext, keyScope)
	}
	for i := range 2 {
		if h := slotHolder(t, a1, fmt.Sprintf("CONC#%s#%d", keyScope, i)); h == y.ID {
			t.Errorf("the key's slot %d still names the refused task", i)
		}
	}
}

// TestSetterLeavesTheReleaseToAnEndThatSawTheFlag: a task set aside for
// its key's limit (1) looks at the slot after its hold. A run that ended
// before the flag's raise could be seen (completed_at no later than
// HeldSince + FlagSettle) may have read the flag down and released
// nobody, so the setter counts its slot free; a run that ended after read
// the flag up and releases the next task itself, so the setter does not
// release a second one (which would find no slot and be set aside again).
// A flag the setter had to raise again counts every ended run as free.
func TestSetterLeavesTheReleaseToAnEndThatSawTheFlag(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		ended    time.Duration // completed_at, from HeldSince
		clear    bool          // the flag lowered before the look
		wantFree bool
	}{
		{"ended before the raise", -time.Second, false, true},
		{"ended within the settle bound", control.FlagSettle - time.Second, false, true},
		{"ended after the settle bound", control.FlagSettle + 2*time.Second, false, false},
		{"ended after, but the flag was lowered", control.FlagSettle + 2*time.Second, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := fmt.Sprintf("settle%d", time.Now().UnixNano())
			concurrencyLimit(t, a.Controls, "", key, 1)
			sc := control.KeyScope(key)
			x := slotTask(t, a, key, 60)
			d, token := decide(t, a.Controls, x)
			if d.Release == nil {
				t.Fatalf("first task refused (%s)", d.Why)
			}
			run := claimRun(t, a, x, token)
			d.Started()
			if err := a.Controls.MarkHeld(ctx, sc.String()); err != nil {
				t.Fatal(err)
			}
			s, err := a.Controls.GetScope(ctx, sc)
			if err != nil || !s.Held || s.HeldSince == nil {
				t.Fatalf("after MarkHeld: %+v (%v), want the flag up with its raise time", s, err)
			}
			ended := s.HeldSince.Add(tc.ended)
			if _, err := a.Store.Transition(ctx, run, triagetype.Completed, func(n *task.Task) { n.CompletedAt = &ended }); err != nil {
				t.Fatal(err)
			}
			if tc.clear {
				if err := a.Controls.ClearHeld(ctx, sc.String()); err != nil {
					t.Fatal(err)
				}
				if s, _ := a.Controls.GetScope(ctx, sc); s.Held || s.HeldSince != nil {
					t.Fatalf("after ClearHeld: held %v since %v, want both cleared", s.Held, s.HeldSince)
				}
			}
			free, err := a.Controls.SlotFreeAfterHold(ctx, sc.String(), false)
			if err != nil {
				t.Fatal(err)
			}
			if free != tc.wantFree {
				t.Errorf("SlotFreeAfterHold = %v, want %v", free, tc.wantFree)
			}
			if s, _ := a.Controls.GetScope(ctx, sc); !s.Held {
				t.Error("the flag is down after the look; a set-aside task needs it up")
			}
		})
	}
}

// TestSetterReleasesOncePerFreeSlot: set-asides in one process that see
// the same free slot release one task for it, not one each (a burst of a
// backlog's set-asides released the whole backlog for two slots), unless
// the set-aside task was itself released and found no slot: then the
// release made for the slot did not take it, and it is made again.
func TestSetterReleasesOncePerFreeSlot(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	ctx := context.Background()
	const key = "once"
	concurrencyLimit(t, a.Controls, "", key, 1)
	scope := control.KeyScope(key).String()
	if err := a.Controls.MarkHeld(ctx, scope); err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		released bool
		want     bool
	}{{false, true}, {false, false}, {false, false}, {true, true}} {
		free, err := a.Controls.SlotFreeAfterHold(ctx, scope, tc.released)
		if err != nil {
			t.Fatal(err)
		}
		if free != tc.want {
			t.Errorf("look %d (released %v) at the never-taken slot = %v, want %v", i+1, tc.released, free, tc.want)
		}
	}
	// Another process has promised nothing: it releases for the slot too.
	b := env.App(t, nil)
	if free, err := b.Controls.SlotFreeAfterHold(ctx, scope, false); err != nil || !free {
		t.Errorf("another process's look = %v (%v), want true", free, err)
	}
}
