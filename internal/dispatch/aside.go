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

// pauseDrain is how long a consumer goes on receiving after it sees a
// global pause begin: a message an API process sent before its cached
// controls showed the pause (at most their TTL, 1 s, after it) is so
// received and set aside in its place (Decide) rather than left on the
// queue, where after the resume it would start behind the tasks submitted
// after it (set aside at submit and released first).
const pauseDrain = 3 * time.Second

// globallyPaused reports whether the consumer should not receive now:
// everything is paused, and has been for pauseDrain since this consumer
// saw it begin (a consumer that starts under a pause receives nothing).
func (c *Consumer) globallyPaused(ctx context.Context) bool {
	p, ok := c.opt.Gate.(Pauser)
	if !ok {
		return false
	}
	paused, err := p.GlobalPaused(ctx, pausedPoll)
	if err != nil {
		return false
	}
	c.timersMu.Lock()
	defer c.timersMu.Unlock()
	switch {
	case !paused:
		c.pausedSince, c.sawRunning = time.Time{}, true
		return false
	case c.pausedSince.IsZero() && c.sawRunning:
		c.pausedSince = time.Now()
	case c.pausedSince.IsZero():
		return true
	}
	return time.Since(c.pausedSince) >= pauseDrain
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
//
// A refusal that gave back concurrency slots the decision had taken (a
// later scope refused) wakes their scopes as a task's end would: a task
// set aside for one of those slots meanwhile may have no running task
// left to release it.
func (c *Consumer) decide(ctx context.Context, t *task.Task) (control.Decision, error) {
	if dc, ok := c.opt.Gate.(Decider); ok && c.opt.Holds != nil {
		d, err := dc.Decide(ctx, t)
		if d.Release == nil {
			c.ended(d.EndNext, d.EndIfHeld)
		}
		return d, err
	}
	rel, delay, why, err := c.admit(ctx, t)
	return control.Decision{Release: rel, Delay: delay, Why: why}, err
}

// setAside holds t in scope and deletes its message; when the hold cannot
// be written the message is hidden for delay as before. A rate refusal
// also makes sure the scope's window releaser runs here.
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
	case d.Why == metrics.PutOffConcurrency:
		c.heldForSlot(ctx, d.Scope, t.Released)
	case d.Why == metrics.PutOffRetryAfter:
		c.releaseAfter(d.Scope, d.Delay, hold.Window)
	case d.Why == metrics.PutOffRate, d.Why == metrics.PutOffBehindHeld && d.Batch > 0:
		// Refused by the rate, or behind the set-aside tasks of a
		// rate-limited scope: released with the scope's windows, one
		// window's worth each (releaser below). Releasing the head at once
		// instead would only see it refused by the spent window again.
		c.heldForRate(ctx, d.Scope, true)
	case d.Why == metrics.PutOffBehindHeld && d.Slots:
		// Behind the set-aside tasks of a concurrency-limited scope: its
		// head goes when a slot frees (the running tasks' ends), or now
		// if one is free that no end will release.
		c.heldForSlot(ctx, d.Scope, false)
	case d.Why == metrics.PutOffBehindHeld:
		// Held only to keep order: the scope may run, so its head goes
		// (maybe this very task), as nothing else may be left to release
		// it. A flood of arrivals asks for one release per scope at a time.
		c.releaseAfter(d.Scope, 0, 1)
	}
}

// chainReleases starts the releases an admission asks for (its scopes'
// next set-aside tasks, now or when it ends) and returns its release.
func (c *Consumer) chainReleases(ctx context.Context, d control.Decision) func() {
	for _, scope := range d.StartNext {
		c.releaseSoon(scope, 1)
	}
	for _, w := range d.NextWindow {
		// A start in a rate-limited scope that holds tasks: its windows
		// go on being released (by this consumer or another).
		c.heldForRate(ctx, w.Scope, false)
	}
	if len(d.EndNext) == 0 && len(d.EndIfHeld) == 0 {
		return d.Release
	}
	return func() {
		d.Release()
		c.ended(d.EndNext, d.EndIfHeld)
	}
}

// ended wakes the concurrency scopes of a task whose run has ended (its
// record written) or whose slots were given back: the next set-aside task
// of each endNext scope is released, and of each endIfHeld scope if the
// scope holds some now (a consistent read: control.Controls.ScopeHeld).
func (c *Consumer) ended(endNext, endIfHeld []string) {
	for _, scope := range endNext {
		c.releaseSoon(scope, 1)
	}
	hc, ok := c.opt.Gate.(heldChecker)
	if !ok {
		return
	}
	for _, scope := range endIfHeld {
		c.releaseIf(context.Background(), scope, "reading a scope's held flag", hc.ScopeHeld)
	}
}

// releaseIf asks check about scope (5 s at most) and releases the scope's
// next set-aside task when it answers yes or cannot answer (what names
// the check in the warning): releasing one too many only sets it aside
// again, releasing none may leave it to the promoter's sweep.
func (c *Consumer) releaseIf(ctx context.Context, scope, what string, check func(context.Context, string) (bool, error)) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	yes, err := check(ctx, scope)
	cancel()
	if err != nil {
		c.log.Warn(what+" failed; its next set-aside task is released anyway", "scope", scope, "error", err)
	}
	if err != nil || yes {
		c.releaseSoon(scope, 1)
	}
}

// heldChecker says whether a scope holds set-aside tasks now, by a
// consistent read (*control.Controls).
type heldChecker interface {
	ScopeHeld(ctx context.Context, scope string) (bool, error)
}

// slotChecker looks at a concurrency-limited scope's slots after a task
// was set aside there (*control.Controls: SlotFreeAfterHold).
type slotChecker interface {
	SlotFreeAfterHold(ctx context.Context, scope string, released bool) (bool, error)
}

// heldForSlot follows a task set aside in scope for its concurrency
// limit: when a slot is free by now (freed since the refusal read it),
// the scope's head is released here, as no running task may be left to
// release it at its end (control.Controls.SlotFreeAfterHold states the
// invariant). released says the task set aside had been released (a
// release that found no slot).
func (c *Consumer) heldForSlot(ctx context.Context, scope string, released bool) {
	if sc, ok := c.opt.Gate.(slotChecker); ok {
		c.releaseIf(ctx, scope, "looking at a scope's slots after a set-aside", func(ctx context.Context, scope string) (bool, error) {
			return sc.SlotFreeAfterHold(ctx, scope, released)
		})
	}
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
	// rates are the rate-limited scopes whose window releaser runs here.
	rates map[string]*rateState
	// pausedSince is when this consumer saw a global pause begin after
	// seeing none (sawRunning), zero otherwise (globallyPaused).
	pausedSince time.Time
	sawRunning  bool
}

// Rate-limited scopes: window releases.
//
// A task refused by a rate limit (type, key, or type and key) is set aside
// like any other refusal; so is a later task of its scope while it holds
// some, if the scope has a concurrency limit too (then it joins the back;
// a scope whose only limit is the rate lets it take a window with room,
// control.Decide). They are released by windows: each consumer that set
// one of a scope's tasks aside runs one releaser for that scope, which,
// once per window, claims the windows up to rateLead ahead that it has not
// claimed yet (control.ClaimWindow: one conditional write, one winner
// among all consumers) and, for each it won, releases that window's starts
// (N: the rate's per-window limit), first submitted first, with an SQS
// delay that makes them visible when the window opens. So the release's
// own latency (a query, a batch read, a send, the writes) is hidden behind
// the windows before, and a window releases N, not N per consumer.
//
// Why a release per refusal lost starts (the attempt reverted in 8bda8f0,
// traced on TestRateLimitAcrossInstances: 21-39 starts in 10 s where 45-55
// are due): a behind_held arrival set the scope's one timer to "release the
// head now", so the rate refusal's window release was dropped; the heads
// released mid-window were refused by the spent window and set aside again
// (72 of about 100 released); a release made when the window opened took
// 3-10 s on a loaded store and arrived windows late; and with every arrival
// behind the held tasks, nothing started until the whole backlog had been
// received once.
//
// Invariant: while a rate-limited scope that can run holds set-aside tasks,
// some consumer's releaser claims each window, and that claim is made after
// every hold older than rateLead windows. A releaser stops only when the
// scope cannot run (its pause or Retry-After: a resume or the wait's end
// releases it; a global pause it waits out, as a global resume releases
// nothing), or when the scope's flag says nothing is held AND this
// consumer set nothing aside in the scope since rateLead windows before
// the last window it claimed (won or lost): that window's winner claimed it
// after those holds, so its release query saw them. A task released and
// refused again (its window spent by arrivals that were never held) is set
// aside again and keeps its consumer's releaser going. Releasers end with
// their consumer's run. Left to the promoter's sweep: a consumer that stops
// or crashes with a window claimed and not released, a failed release, and
// on AWS a hold not yet in the by-due index (eventually consistent) when
// the window's query ran. The sweep claims windows the same way (hold.
// Sweeper), so it never releases a window a live releaser has.
type rateState struct {
	lastHold time.Time // this consumer's last set-aside in the scope
}

// rateHolds is the part of the gate a window releaser reads
// (*control.Controls).
type rateHolds interface {
	RateHeld(ctx context.Context, scope string) (control.RateHeld, error)
	ClaimWindow(ctx context.Context, scope string, next time.Time) (bool, error)
}

// timedReleaser releases set-aside tasks with their messages made visible
// at a time (*hold.Holds).
type timedReleaser interface {
	ReleaseAt(ctx context.Context, scope string, n int, at time.Time) (int, error)
}

// rateLead is how many windows ahead a window releaser releases: a
// window's tasks are released while the windows before it run, so a
// release slower than a window (a loaded store) still lands in time.
const rateLead = 2

// heldForRate makes sure scope's window releaser runs in this consumer;
// held says this consumer has just set one of its tasks aside.
func (c *Consumer) heldForRate(ctx context.Context, scope string, held bool) {
	rh, ok := c.opt.Gate.(rateHolds)
	if !ok {
		return
	}
	c.timersMu.Lock()
	defer c.timersMu.Unlock()
	if c.rates == nil {
		c.rates = map[string]*rateState{}
	}
	st, running := c.rates[scope]
	if !running {
		st = &rateState{}
		c.rates[scope] = st
		go c.releaseWindows(context.WithoutCancel(ctx), ctx.Done(), rh, scope, st)
	}
	if held {
		st.lastHold = time.Now()
	}
}

// releaseWindows is scope's window releaser (see rateState).
func (c *Consumer) releaseWindows(ctx context.Context, done <-chan struct{}, rh rateHolds, scope string, st *rateState) {
	var claimed time.Time // the opening of the last window this releaser claimed
	for {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		w, err := rh.RateHeld(rctx, scope)
		cancel()
		if err != nil {
			c.log.Warn("reading a rate-limited scope failed; its releaser tries again", "scope", scope, "error", err)
			if !sleepOr(done, time.Second) {
				c.rateStop(scope)
				return
			}
			continue
		}
		if c.rateDone(scope, st, w, claimed) {
			return
		}
		if w.GlobalPaused {
			if !sleepOr(done, pausedPoll) {
				c.rateStop(scope)
				return
			}
			continue
		}
		// The next rateLead windows, those not claimed by this releaser
		// yet: all of them at first, then the one that came into reach.
		for k := range rateLead {
			open := w.Next.Add(time.Duration(k) * w.Window)
			if open.After(claimed) {
				c.releaseWindow(ctx, rh, scope, open, w.N)
				claimed = open
			}
		}
		// Wake just after the next window opens.
		if !sleepOr(done, time.Until(w.Next)+10*time.Millisecond) {
			c.rateStop(scope)
			return
		}
	}
}

// releaseWindow claims scope's window opening at open and, if this
// consumer won it, releases its n starts, visible when it opens.
func (c *Consumer) releaseWindow(ctx context.Context, rh rateHolds, scope string, open time.Time, n int) {
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	won, err := rh.ClaimWindow(rctx, scope, open)
	if err != nil {
		c.log.Warn("claiming a rate window failed; the next window is claimed as usual", "scope", scope, "error", err)
		return
	}
	if !won {
		return
	}
	for left := n; left > 0; {
		k := min(left, hold.Window)
		var got int
		if tr, ok := c.opt.Holds.(timedReleaser); ok {
			got, err = tr.ReleaseAt(rctx, scope, k, open)
		} else {
			got, err = c.opt.Holds.Release(rctx, scope, k)
		}
		if err != nil {
			c.log.Warn("release of a rate window failed; the promoter's sweep will", "scope", scope, "error", err)
			return
		}
		if got < k {
			return // none left set aside
		}
		left -= k
	}
}

// rateDone says whether scope's releaser may stop, having last claimed
// the window that opened at claimed (zero when it claimed none yet): the
// scope cannot run now, or its flag is down and this consumer's last hold
// there is older than rateLead windows before the claimed one (that
// window's winner claimed it after the hold). It removes the releaser under the
// lock heldForRate takes, so a hold is never left without one.
func (c *Consumer) rateDone(scope string, st *rateState, w control.RateHeld, claimed time.Time) bool {
	c.timersMu.Lock()
	defer c.timersMu.Unlock()
	if w.Runnable && (w.Held || claimed.IsZero() || !st.lastHold.Before(claimed.Add(-rateLead*w.Window))) {
		return false
	}
	delete(c.rates, scope)
	return true
}

// rateStop removes scope's releaser as its consumer stops.
func (c *Consumer) rateStop(scope string) {
	c.timersMu.Lock()
	delete(c.rates, scope)
	c.timersMu.Unlock()
}

// sleepOr sleeps d, or less when done closes; it reports whether d passed.
func sleepOr(done <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(max(d, 0))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-done:
		return false
	}
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
