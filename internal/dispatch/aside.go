package dispatch

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/triagehq/triage/internal/control"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/hold"
	"github.com/triagehq/triage/internal/metrics"
	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// This file is waiting that costs nothing: a global pause stops receiving,
// and a task that cannot start now is set aside in its scope (package
// hold) instead of being hidden and received again and again.

// Decider is a Gate that can say where to set a refused task aside
// (*control.Controls).
type Decider interface {
	Decide(ctx context.Context, t *task.Task) (control.Decision, error)
}

// Pauser says whether everything is paused (*control.Controls).
type Pauser interface {
	GlobalPaused(ctx context.Context, maxAge time.Duration) (bool, error)
}

// Holder sets tasks aside and releases them (*hold.Holds).
type Holder interface {
	Hold(ctx context.Context, t *task.Task, scope string, extra ...func(*task.Task)) (*task.Task, error)
	Release(ctx context.Context, scope string, n int) (int, error)
}

// pausedPoll is how often a consumer looks at a global pause while it
// holds: one read of one small item, with no SQS request. A resume is
// seen within it.
const pausedPoll = 500 * time.Millisecond

// globallyPaused reports whether the consumer should not receive now.
func (c *Consumer) globallyPaused(ctx context.Context) bool {
	p, ok := c.opt.Gate.(Pauser)
	if !ok {
		return false
	}
	paused, err := p.GlobalPaused(ctx, pausedPoll)
	return err == nil && paused
}

// Waits counts what waiting cost a consumer: its receive requests, the
// messages they brought, the pauses it slept through instead of receiving,
// and the tasks it set aside.
type Waits struct {
	Receives, Received, PausedSleeps, SetAside int64
}

type waitCounts struct{ receives, received, pausedSleeps, setAside atomic.Int64 }

// Waits returns the consumer's wait counts so far.
func (c *Consumer) Waits() Waits {
	return Waits{Receives: c.waits.receives.Load(), Received: c.waits.received.Load(), PausedSleeps: c.waits.pausedSleeps.Load(), SetAside: c.waits.setAside.Load()}
}

// decide asks the gate. A gate that cannot set aside answers as before:
// admitted, or hidden for a delay.
func (c *Consumer) decide(ctx context.Context, t *task.Task) (control.Decision, error) {
	if d, ok := c.opt.Gate.(Decider); ok && c.opt.Holds != nil {
		return d.Decide(ctx, t)
	}
	rel, delay, why, err := c.admit(ctx, t)
	return control.Decision{Release: rel, Delay: delay, Why: why}, err
}

// setAside holds t in scope and deletes its message; when the hold cannot
// be written the message is hidden for delay as before. A rate refusal
// also schedules the scope's release for when its next window opens.
func (c *Consumer) setAside(ctx context.Context, m queue.Received, msg task.Message, t *task.Task, d control.Decision) {
	if _, err := c.opt.Holds.Hold(ctx, t, d.Scope); err != nil {
		if c.current(err) == nil {
			c.log.Warn("set aside failed; the message will come back", "task_id", t.ID, "scope", d.Scope, "error", err)
		}
		c.putOff(ctx, m, msg, max(d.Delay, time.Second))
		return
	}
	c.waits.setAside.Add(1)
	c.del.add(m.Priority, m.ReceiptHandle)
	switch {
	case d.Why == metrics.PutOffRetryAfter:
		c.releaseAfter(d.Scope, d.Delay, hold.Window)
	case d.Why == metrics.PutOffRate:
		c.releaseAfter(d.Scope, d.Delay, max(d.Batch, 1))
	case d.Why == metrics.PutOffBehindHeld:
		// Held only to keep order: the scope may run, so its head goes
		// (maybe this very task), as nothing else may be left to release
		// it. A flood of arrivals asks for one release per scope at a time.
		c.releaseAfter(d.Scope, 0, 1)
	}
}

// chainReleases starts the releases an admission asks for (its scopes'
// next set-aside tasks, now or when it ends) and returns its release.
func (c *Consumer) chainReleases(d control.Decision) func() {
	for _, scope := range d.StartNext {
		c.releaseSoon(scope, 1)
	}
	for _, w := range d.NextWindow {
		c.releaseAfter(w.Scope, w.After, w.N)
	}
	if len(d.EndNext) == 0 && len(d.EndIfHeld) == 0 {
		return d.Release
	}
	return func() {
		d.Release()
		for _, scope := range d.EndNext {
			c.releaseSoon(scope, 1)
		}
		if hc, ok := c.opt.Gate.(heldChecker); ok {
			for _, scope := range d.EndIfHeld {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				held, err := hc.ScopeHeld(ctx, scope)
				cancel()
				if err == nil && held {
					c.releaseSoon(scope, 1)
				}
			}
		}
	}
}

// heldChecker says whether a scope holds set-aside tasks now, as its
// cache knows (*control.Controls).
type heldChecker interface {
	ScopeHeld(ctx context.Context, scope string) (bool, error)
}

// releaseSoon asks for n more of scope's set-aside tasks to be released in
// the background. The asks for one scope are gathered: one goroutine per
// scope releases what was asked meanwhile, hold.Window at a time, so a
// burst of starts makes one query and one batch, instead of as many
// releasers racing for the same first task (the losers conflicted, went
// back for the next, and the scope's window ran dry meanwhile: a 3:1 split
// measured 4.19:1, with one 80-start stretch of 79 to 1).
func (c *Consumer) releaseSoon(scope string, n int) {
	c.timersMu.Lock()
	if c.asked == nil {
		c.asked = map[string]int{}
	}
	_, draining := c.asked[scope]
	c.asked[scope] += n
	c.timersMu.Unlock()
	if !draining {
		go c.drainReleases(scope)
	}
}

// drainReleases releases what releaseSoon gathered for scope until none is
// left asked for.
func (c *Consumer) drainReleases(scope string) {
	for {
		c.timersMu.Lock()
		n := min(c.asked[scope], hold.Window)
		if n == 0 {
			delete(c.asked, scope)
			c.timersMu.Unlock()
			return
		}
		c.asked[scope] -= n
		c.timersMu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if _, err := c.opt.Holds.Release(ctx, scope, n); err != nil {
			c.log.Warn("release of set-aside tasks failed; the promoter's sweep will", "scope", scope, "error", err)
		}
		cancel()
	}
}

// releaseAfter releases n of scope's tasks after d, once per scope however
// many refusals asked for it meanwhile.
func (c *Consumer) releaseAfter(scope string, d time.Duration, n int) {
	c.timersMu.Lock()
	defer c.timersMu.Unlock()
	if c.timers == nil {
		c.timers = map[string]bool{}
	}
	if c.timers[scope] {
		return
	}
	c.timers[scope] = true
	time.AfterFunc(d, func() {
		c.timersMu.Lock()
		delete(c.timers, scope)
		c.timersMu.Unlock()
		c.releaseSoon(scope, n)
	})
}

// asideState is the consumer's set-aside bookkeeping.
type asideState struct {
	waits    waitCounts
	timersMu sync.Mutex
	timers   map[string]bool // scopes with a release scheduled
	// asked counts the releases asked for per scope and not yet begun; a
	// scope is in it while its drainReleases runs.
	asked map[string]int
}

// Waiter holds a scope until a time (*control.Controls).
type Waiter interface {
	Wait(ctx context.Context, scope string, until time.Time) error
}

// retryScope is the scope a handler's Retry-After names for t.
func retryScope(s handler.RetryScope, t *task.Task) string {
	switch s {
	case handler.ScopeType:
		return control.TypeScope(t.Type).String()
	case handler.ScopeTypeKey:
		return control.TypeKeyScope(t.Type, t.FairKey()).String()
	}
	return control.KeyScope(t.FairKey()).String()
}

// retryAfter answers a handler's Retry-After: its scope waits until then
// (every consumer sets that scope's tasks aside meanwhile), and the task
// itself is set aside there with its attempt given back, so no attempt is
// spent. Without controls that can wait it is a snooze.
func (c *Consumer) retryAfter(ctx context.Context, j *job, a triagetype.Attempt, ra *handler.RetryAfterError) {
	w, ok := c.opt.Gate.(Waiter)
	wait := max(ra.Until.Sub(c.store.Now()), 0)
	if !ok || c.opt.Holds == nil {
		c.snooze(ctx, j, a, max(wait, time.Second))
		return
	}
	t := j.snapshot()
	scope := retryScope(ra.Scope, t)
	if err := w.Wait(ctx, scope, ra.Until); err != nil {
		c.log.Warn("recording a Retry-After failed; the task snoozes instead", "task_id", t.ID, "scope", scope, "error", err)
		c.snooze(ctx, j, a, max(wait, time.Second))
		return
	}
	a.Error = ra.Error()
	if !c.finishWrite(ctx, j, "retry after", func(cur *task.Task) (*task.Task, error) {
		return c.opt.Holds.Hold(ctx, cur, scope, func(n *task.Task) {
			n.Attempts--
			n.AddAttempt(a)
			j.rep.apply(n)
		})
	}) {
		return
	}
	c.waits.setAside.Add(1)
	c.mx.Finished(j.snapshot(), metrics.Snoozed)
	c.del.add(j.msg.Priority, j.msg.ReceiptHandle)
	c.releaseAfter(scope, wait, hold.Window)
	c.log.Info("task's scope waits for a Retry-After", "task_id", t.ID, "scope", scope, "until", ra.Until)
}
