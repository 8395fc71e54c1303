package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// This file is the lease phase: the claim's timing (see lease) and the
// heartbeat that renews it while a handler runs.

// lease is the one place a claim's timing is computed. A claim holds its
// task until now + min(d, the task's timeout) + margin; the heartbeat
// renews it every d/3 until now + d (never past the run's deadline) +
// margin; and the message stays hidden margin longer than the lease, so it
// reappears, and another consumer may reclaim the task, only once the
// lease is surely over. A receive hides messages for the longest a claim
// can hold them: d + 2 × margin.
type lease struct {
	d      time.Duration // Options.Lease
	margin time.Duration // Options.LeaseMargin
}

// lease is this consumer's lease (its options' defaults applied).
func (c *Consumer) lease() lease { return lease{d: c.opt.Lease, margin: c.opt.LeaseMargin} }

// claimUntil is the lease_until a claim at now writes for a task with this
// timeout.
func (l lease) claimUntil(now time.Time, timeout time.Duration) time.Time {
	return now.Add(min(l.d, timeout) + l.margin)
}

// renewUntil is the lease_until a heartbeat at now writes for a run that
// must end by deadline.
func (l lease) renewUntil(now, deadline time.Time) time.Time {
	until := now.Add(l.d)
	if until.After(deadline) {
		until = deadline
	}
	return until.Add(l.margin)
}

// hideFor is how long a message stays hidden behind a lease that holds
// until until.
func (l lease) hideFor(now, until time.Time) time.Duration { return until.Sub(now) + l.margin }

// receiveVisibility is the visibility timeout of a receive.
func (l lease) receiveVisibility() time.Duration { return l.d + 2*l.margin }

// renewEvery is the heartbeat's period.
func (l lease) renewEvery() time.Duration { return l.d / 3 }

// heartbeat renews the lease and the message's visibility every third of a
// lease, and cancels the run when it sees a cancel request or loses the lease.
//
// It is also the only writer of the handler's progress reports, which is
// what bounds their cost: every renewal carries the latest report, and a
// report waiting when no renewal is due is written early, as a renewal,
// only once ProgressInterval has passed since the task's last write. So a
// running task's item is written at most once per min(Lease/3,
// ProgressInterval), however often its handler reports; with heartbeats
// at least that frequent, reports cost no write at all. Each write is the
// heartbeat's conditional Touch, so a worker that lost its claim can never
// write a report over the new owner's.
func (c *Consumer) heartbeat(ctx context.Context, j *job, deadline time.Time, cancel context.CancelCauseFunc, stop <-chan struct{}) {
	ls := c.lease()
	every := ls.renewEvery()
	gap := min(every, c.opt.ProgressInterval) // the least time between two writes
	tick := time.NewTimer(every)
	defer tick.Stop()
	last := time.Now() // the claim was the last write
	var flush <-chan time.Time
	var flushTimer *time.Timer
	defer func() {
		if flushTimer != nil {
			flushTimer.Stop()
		}
	}()
	var check <-chan time.Time // cancel checks between heartbeats
	if c.opt.CancelCheck > 0 && c.opt.CancelCheck < every {
		ct := time.NewTicker(c.opt.CancelCheck)
		defer ct.Stop()
		check = ct.C
	}
	for {
		select {
		case <-stop:
			return
		case <-check:
			if yes, err := c.store.CancelRequested(ctx, j.snapshot().ID); err == nil && yes {
				cancel(errCancelRequested)
				check = nil // asked once; the heartbeat goes on until the handler returns
			}
			continue
		case <-j.rep.wake:
			if flush != nil || gap >= every || !j.rep.pending() {
				continue // a write is already due that will carry it, or did
			}
			if wait := time.Until(last.Add(gap)); wait > 0 {
				flushTimer = time.NewTimer(wait)
				flush = flushTimer.C
				continue
			}
		case <-flush:
			flush, flushTimer = nil, nil
			if !j.rep.pending() {
				continue
			}
		case <-tick.C:
		}
		if flushTimer != nil {
			flushTimer.Stop()
			flush, flushTimer = nil, nil
		}
		last = time.Now()
		tick.Reset(every)
		now := c.store.Now()
		until := ls.renewUntil(now, deadline)
		var gen uint64
		next, err := c.write(context.WithoutCancel(ctx), j, func(cur *task.Task) (*task.Task, error) {
			return c.store.Touch(context.WithoutCancel(ctx), cur, func(n *task.Task) {
				n.LeaseUntil = &until
				gen = j.rep.apply(n)
			})
		})
		if err != nil {
			if errors.Is(err, errLeaseLost) {
				cancel(errLeaseLost)
				return
			}
			c.log.Warn("heartbeat failed", "task_id", j.msg.MessageID, "error", err)
			continue
		}
		j.rep.done(gen)
		c.hide(ctx, j.msg, ls.hideFor(now, until))
		if next.CancelRequested {
			cancel(errCancelRequested)
		}
	}
}

// write applies a conditional write to the job's snapshot. When it loses
// the race to a change that kept the claim ours (a cancel request), it
// adopts the new state and tries once more; when the claim is gone it
// returns errLeaseLost.
func (c *Consumer) write(ctx context.Context, j *job, w func(cur *task.Task) (*task.Task, error)) (*task.Task, error) {
	for range 3 {
		cur := j.snapshot()
		next, err := w(cur)
		if err == nil {
			j.set(next)
			return next, nil
		}
		now := c.current(err)
		if now == nil {
			if errors.Is(err, store.ErrConflict) {
				return nil, errLeaseLost // the task is gone
			}
			return nil, err
		}
		if now.Status != triagetype.Executing || now.WorkerID != c.opt.WorkerID || now.Attempts != cur.Attempts {
			return nil, errLeaseLost
		}
		j.set(now)
	}
	return nil, fmt.Errorf("task %s kept changing under its worker", j.snapshot().ID)
}
