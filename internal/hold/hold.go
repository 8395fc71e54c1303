// Package hold sets aside tasks that cannot start now and releases them in
// weighted fair submit order when they can: by task.Task.HeldOrder, each
// key in its submit order and keys interleaved by weight.
//
// A task whose type or key is paused, at its concurrency or rate limit, or
// waiting out a Retry-After is not left on its queue, where it would be
// received again and again until it could run (a paused backlog of 1,000
// tasks hidden on its queues keeps a core busy locally and SQS receives and
// DynamoDB reads flowing on AWS, and a resume starts such tasks in whatever
// order their hide times run out). The consumer sets it aside: one conditional
// write moves it (still queued) to its scope's held set, a by-due index
// partition per scope and shard sorted by creation (store/held.go), with no
// live message (DispatchVersion NoMessage); then its message is deleted.
//
// Invariants:
//   - A held task is never lost and never runs twice: a crash between the
//     hold and the delete leaves a message whose version no longer matches,
//     which the next receive drops as stale.
//   - While a scope holds tasks, its flag (control.MarkHeld) makes new
//     arrivals join the back of the set, so no later task overtakes an
//     earlier one (a scope whose only limit is a rate excepted: there an
//     arrival may take a window that has room).
//   - A held task costs nothing while it waits: it has no message, so
//     nothing receives it.
//
// Release re-dispatches a scope's first tasks in submit order through the
// enqueuer's RedispatchBatch (send, then a conditional write). It is called
// when the scope can run again: at once by the control call that resumed it
// or raised its limit (the first window), by the consumer when a released
// task starts in a scope without limits or a held scope's concurrency slot
// frees (one more each), when a Retry-After ends, one window's worth per
// window of a rate-limited scope (released just before the window opens,
// with a delay, by the one consumer that claimed that window: package
// dispatch's window releaser), and by the promoter's sweep as the safety
// net. A release for a rate window (ReleaseAt) first reserves its tasks'
// starts in that window (Reserver, when the flags are one), releases only
// as many as fit, and stamps each with the reservation, so arrivals that
// spend the window cannot refuse them again (control.Reserve).
// Each call keeps at most Window released tasks per trigger in SQS at
// once (for a rate, a window's worth per window claimed, up to two ahead),
// so SQS's best-effort ordering has little to reorder.
//
// Cost per task set aside: one task write (the hold, ~1 WCU plus the
// by-due entry's index write) and one delete; its release is one send and
// one write, plus its share of one query per shard of the scope's
// partitions (eventually consistent, 0.5 RCU each) and a batch read. A
// release that finds the scope empty lowers its flag and queries once
// more (ReleaseAt).
package hold

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/triagehq/triage/internal/control"
	"github.com/triagehq/triage/internal/enqueue"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Window is how many set-aside tasks a resume releases at once: one SQS
// batch. The rest follow one by one as released tasks start.
const Window = 10

// Store is the part of the task store holds use.
type Store interface {
	Transition(ctx context.Context, cur *task.Task, to triagetype.Status, apply func(*task.Task)) (*task.Task, error)
	Held(ctx context.Context, scope, after string, n int) ([]*task.Task, string, error)
}

// Mover re-dispatches tasks (*enqueue.Enqueuer).
type Mover interface {
	RedispatchBatch(ctx context.Context, to triagetype.Status, p triagetype.Priority, moves []enqueue.Move) ([]*task.Task, error)
}

// Flags keeps each scope's "has tasks set aside" flag (*control.Controls).
type Flags interface {
	MarkHeld(ctx context.Context, scope string) error
	ClearHeld(ctx context.Context, scope string) error
}

// Reserver counts a rate window's starts for the tasks released into it
// before they are sent (*control.Controls: see control.Reserve), so that
// arrivals in that window cannot refuse them again. Flags that are also a
// Reserver get it on every release made for a window (ReleaseAt).
type Reserver interface {
	Reserve(ctx context.Context, scope string, open time.Time, n int) (int, string, error)
}

// Holds sets tasks aside and releases them.
type Holds struct {
	store Store
	mover Mover
	flags Flags
	log   *slog.Logger
}

// New returns holds over s, m and f.
func New(s Store, m Mover, f Flags, log *slog.Logger) *Holds {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Holds{store: s, mover: m, flags: f, log: log}
}

// Hold sets t (queued or retrying, as read with its message) aside in
// scope: its flag first, then one conditional write. The caller deletes
// the message after it succeeds; on a conflict (the task moved on) the
// message is stale or another receive has it.
//
// An executing task may be set aside too (its handler's Retry-After):
// extra then records the attempt, which is not spent.
func (h *Holds) Hold(ctx context.Context, t *task.Task, scope string, extra ...func(*task.Task)) (*task.Task, error) {
	if err := h.flags.MarkHeld(ctx, scope); err != nil {
		return nil, err
	}
	held, err := h.store.Transition(ctx, t, triagetype.Queued, func(n *task.Task) {
		for _, f := range extra {
			f(n)
		}
		n.Held, n.Released, n.RateWindow = scope, false, ""
		n.DispatchVersion = task.NoMessage
		n.RetryAt, n.LeaseUntil, n.WorkerID = nil, nil, ""
	})
	if err != nil {
		return nil, fmt.Errorf("set task %s aside in %s: %w", t.ID, scope, err)
	}
	return held, nil
}

// Release re-dispatches up to n of scope's set-aside tasks, first
// submitted first, each to its effective priority's queue, and returns how
// many it released. A task another releaser took first is skipped for the
// next one. When the scope has none left, its flag is lowered.
func (h *Holds) Release(ctx context.Context, scope string, n int) (int, error) {
	return h.ReleaseAt(ctx, scope, n, time.Time{})
}

// ReleaseAt is Release with each message made visible at at (SQS's delay,
// in whole seconds rounded up and counted from the send, at most 15
// minutes; none once at has passed): a rate-limited scope's next windows
// are released before they open, so their tasks arrive as they do.
func (h *Holds) ReleaseAt(ctx context.Context, scope string, n int, at time.Time) (int, error) {
	released, after, cleared := 0, "", false
	for released < n {
		want := n - released
		ts, last, err := h.store.Held(ctx, scope, after, want+2)
		if err != nil {
			return released, err
		}
		if len(ts) == 0 {
			if after != "" || cleared {
				return released, nil
			}
			// None left: the flag is lowered, then the scope looked at
			// once more. A task set aside after the first look by a
			// consumer whose cache still showed the flag up was written
			// without raising it and may have no running task left to
			// release it: the second look finds it, raises the flag
			// again, and releases it here.
			if err := h.flags.ClearHeld(ctx, scope); err != nil {
				return released, err
			}
			cleared = true
			continue
		}
		if cleared {
			if err := h.flags.MarkHeld(ctx, scope); err != nil {
				return released, err
			}
			cleared = false
		}
		// Go on after the last task tried, not the last read: a task not
		// tried now must not be skipped, or it would start out of order.
		after = last
		var batch []*task.Task
		for _, t := range ts {
			if len(batch) == want {
				after = store.HeldSortKey(batch[len(batch)-1])
				break
			}
			if t.Status == triagetype.Queued && t.Held == scope {
				batch = append(batch, t)
			}
		}
		stamp := ""
		if r, ok := h.flags.(Reserver); ok && !at.IsZero() && len(batch) > 0 {
			k, res, err := r.Reserve(ctx, scope, at, len(batch))
			if err != nil {
				return released, err
			}
			if k < len(batch) {
				// The window has no room for the rest: they stay held,
				// first in line for the next window.
				batch, n = batch[:k], released+k
			}
			stamp = res
		}
		got, err := h.release(ctx, batch, at, stamp)
		released += got
		if err != nil && !errors.Is(err, store.ErrConflict) {
			return released, err
		}
	}
	return released, nil
}

// release re-dispatches ts (in order), grouped by priority, and counts the
// tasks moved.
func (h *Holds) release(ctx context.Context, ts []*task.Task, at time.Time, reservation string) (int, error) {
	var delay time.Duration
	if !at.IsZero() {
		delay = max(time.Until(at), 0) // at the send, after the query
	}
	var order []triagetype.Priority
	by := map[triagetype.Priority][]enqueue.Move{}
	for _, t := range ts {
		p := t.EffectivePriority
		if _, ok := by[p]; !ok {
			order = append(order, p)
		}
		by[p] = append(by[p], enqueue.Move{Task: t, Delay: delay, Apply: func(n *task.Task) { n.Held, n.Released, n.RateWindow = "", true, reservation }})
	}
	moved := 0
	var errs []error
	for _, p := range order {
		done, err := h.mover.RedispatchBatch(ctx, triagetype.Queued, p, by[p])
		moved += len(done)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return moved, errors.Join(errs...)
}

// ReleaseWindow releases scope's first Window tasks: what a resume does.
// It has control.Runnable's shape.
func (h *Holds) ReleaseWindow(ctx context.Context, scope string) error {
	_, err := h.Release(ctx, scope, Window)
	return err
}

// Scopes lists the scopes to sweep and whether each can run now
// (*control.Controls).
type Scopes interface {
	HeldScopes(ctx context.Context, recent time.Duration) (map[string]bool, error)
}

// RateWindows is how the sweep takes its turn in a rate-limited scope's
// window claims (*control.Controls; package dispatch's window releasers
// claim the same way).
type RateWindows interface {
	RateHeld(ctx context.Context, scope string) (control.RateHeld, error)
	ClaimWindow(ctx context.Context, scope string, next time.Time) (bool, error)
}

// Sweeper is the promoter's safety net: each run it releases a window of
// every runnable scope that holds tasks, or held them lately. It covers a
// trigger lost to a crash, and a task set aside by a consumer whose cached
// flag was up just after a release lowered it.
//
// A rate-limited scope's window is claimed first, as its consumers'
// releasers claim them (when Scopes is also RateWindows): while a live
// releaser runs, it has claimed the next window already and the sweep
// releases nothing there (before, its ten tasks would mostly have been
// refused by a spent window and set aside again, each costing a receive,
// a read and two writes); with none, the sweep wins the next window and
// releases its starts, visible as it opens. One read (cached) and one
// conditional write per rate-limited scope per run.
type Sweeper struct {
	Holds  *Holds
	Scopes Scopes
	// Recent is how long after its flag was lowered a scope is still
	// looked at (a minute: far beyond any consumer's cache TTL).
	Recent time.Duration
}

// Sweep runs once and returns how many tasks it released.
func (s Sweeper) Sweep(ctx context.Context) (int, error) {
	recent := s.Recent
	if recent <= 0 {
		recent = time.Minute
	}
	scopes, err := s.Scopes.HeldScopes(ctx, recent)
	if err != nil {
		return 0, err
	}
	total := 0
	var errs []error
	rw, _ := s.Scopes.(RateWindows)
	for scope, runnable := range scopes {
		if !runnable {
			continue
		}
		n, err := s.release(ctx, rw, scope)
		total += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	return total, errors.Join(errs...)
}

// release releases a window of scope: the next rate window's starts if it
// has a rate limit and the sweep wins that window, Window tasks if it has
// none.
func (s Sweeper) release(ctx context.Context, rw RateWindows, scope string) (int, error) {
	if rw != nil {
		w, err := rw.RateHeld(ctx, scope)
		if err == nil && w.N > 0 {
			if !w.Runnable {
				return 0, nil // its resume or its wait's end releases it
			}
			won, err := rw.ClaimWindow(ctx, scope, w.Next)
			if err != nil || !won {
				return 0, err // a live releaser has the window
			}
			return s.Holds.ReleaseAt(ctx, scope, w.N, w.Next)
		}
		// Not a rate scope (or not a control scope: RateHeld refuses fair
		// windows' scopes): released as before.
	}
	return s.Holds.Release(ctx, scope, Window)
}
