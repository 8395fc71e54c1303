// Package enqueue hands tasks to their SQS queues.
//
// It is the one place that sends a task's message, so the rule that keeps
// messages and task records consistent lives here: a task's record names the
// version of its one live message (dispatch_version), and any other message
// for it is stale. A new task's record is written before its message; a
// re-dispatch sends the new message before the record points at it, so a
// crash in between leaves a stale message, never a task without one.
package enqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
)

// Store is the part of the task store enqueueing needs.
type Store interface {
	Create(ctx context.Context, t *task.Task) (*task.Task, bool, error)
	Discard(ctx context.Context, t *task.Task) error
	Transition(ctx context.Context, cur *task.Task, to task.Status, apply func(*task.Task)) (*task.Task, error)
	Now() time.Time
}

// Sender is the part of the queues enqueueing needs.
type Sender interface {
	Send(ctx context.Context, p task.Priority, body string, delay time.Duration) (string, error)
	SendBatch(ctx context.Context, p task.Priority, msgs []queue.Outgoing) error
}

// Enqueuer creates and (re)dispatches tasks.
type Enqueuer struct {
	store  Store
	queues Sender
}

// New returns an Enqueuer.
func New(s Store, q Sender) *Enqueuer { return &Enqueuer{store: s, queues: q} }

// ErrNotSent means a new task's message could not be sent; the task was
// not accepted and nothing of it remains.
var ErrNotSent = errors.New("task message not sent")

// Body is the SQS body of t's message at dispatch version v.
func Body(t *task.Task, v int64) string {
	b, _ := json.Marshal(task.Message{ID: t.ID, Version: v, Priority: t.EffectivePriority})
	return string(b)
}

// Submit records a new task and, unless it is scheduled, sends its message
// (with a delay when run_at is near). created is false when the task's
// idempotency key was already used: the existing task is returned and
// nothing is sent.
func (e *Enqueuer) Submit(ctx context.Context, t *task.Task) (*task.Task, bool, error) {
	saved, created, err := e.store.Create(ctx, t)
	if err != nil || !created {
		return saved, created, err
	}
	if saved.Status != task.Queued {
		return saved, true, nil
	}
	if _, err := e.queues.Send(ctx, saved.EffectivePriority, Body(saved, saved.DispatchVersion), e.delay(saved)); err != nil {
		if derr := e.store.Discard(context.WithoutCancel(ctx), saved); derr != nil {
			return nil, false, fmt.Errorf("%w: %v; and the record could not be removed: %v", ErrNotSent, err, derr)
		}
		return nil, false, fmt.Errorf("%w: %v", ErrNotSent, err)
	}
	return saved, true, nil
}

// Result is the outcome of one task of a batch.
type Result struct {
	Task    *task.Task
	Created bool
	Err     error
}

// SubmitBatch records and sends many tasks, batching the sends per priority.
func (e *Enqueuer) SubmitBatch(ctx context.Context, ts []*task.Task) []Result {
	res := make([]Result, len(ts))
	unsent := map[string]error{} // task id -> why its send failed
	byPrio := map[task.Priority][]int{}
	for i, t := range ts {
		saved, created, err := e.store.Create(ctx, t)
		res[i] = Result{Task: saved, Created: created, Err: err}
		if err == nil && created && saved.Status == task.Queued {
			byPrio[saved.EffectivePriority] = append(byPrio[saved.EffectivePriority], i)
		}
	}
	for p, idx := range byPrio {
		msgs := make([]queue.Outgoing, len(idx))
		for j, i := range idx {
			t := res[i].Task
			msgs[j] = queue.Outgoing{ID: fmt.Sprint(j), Body: Body(t, t.DispatchVersion), Delay: e.delay(t)}
		}
		err := e.queues.SendBatch(ctx, p, msgs)
		if err == nil {
			continue
		}
		var be *queue.BatchError
		if !errors.As(err, &be) {
			be = &queue.BatchError{Failed: map[string]string{}}
			for j := range idx {
				be.Failed[fmt.Sprint(j)] = err.Error()
			}
		}
		for j, i := range idx {
			reason, failed := be.Failed[fmt.Sprint(j)]
			if !failed {
				continue
			}
			if derr := e.store.Discard(context.WithoutCancel(ctx), res[i].Task); derr != nil {
				reason += "; and the record could not be removed: " + derr.Error()
			}
			id := res[i].Task.ID
			res[i] = Result{Err: fmt.Errorf("%w: %s", ErrNotSent, reason)}
			unsent[id] = res[i].Err
		}
	}
	// A later item with the same idempotency key got the first one's task:
	// if that task was not sent (and is gone), neither is this item.
	for i := range res {
		if r := res[i]; r.Err == nil && !r.Created && r.Task != nil && unsent[r.Task.ID] != nil {
			res[i] = Result{Err: unsent[r.Task.ID]}
		}
	}
	return res
}

func (e *Enqueuer) delay(t *task.Task) time.Duration {
	if t.RunAt == nil {
		return 0
	}
	return t.RunAt.Sub(e.store.Now())
}

// Redispatch moves cur to status to (queued or retrying) with a fresh
// message on priority p's queue, visible after delay. apply may edit the
// next state further. The message is sent first and then the record is
// pointed at it; if the record write loses a race, the message is stale and
// the consumer drops it.
func (e *Enqueuer) Redispatch(ctx context.Context, cur *task.Task, to task.Status, p task.Priority, delay time.Duration, apply func(*task.Task)) (*task.Task, error) {
	moved, err := e.RedispatchBatch(ctx, to, p, []Move{{Task: cur, Delay: delay, Apply: apply}})
	if err != nil {
		return nil, fmt.Errorf("redispatch task %s: %w", cur.ID, err)
	}
	return moved[0], nil
}

// Move is one task of a batch re-dispatch.
type Move struct {
	Task  *task.Task
	Delay time.Duration
	Apply func(*task.Task)
}

// RedispatchBatch re-dispatches many tasks to priority p's queue in status
// to: one batched send for the lot, then one conditional write per task.
// It returns the tasks moved; a task whose send or write failed is left as
// it was (its message, if sent, is stale and will be dropped).
func (e *Enqueuer) RedispatchBatch(ctx context.Context, to task.Status, p task.Priority, moves []Move) ([]*task.Task, error) {
	if len(moves) == 0 {
		return nil, nil
	}
	msgs := make([]queue.Outgoing, len(moves))
	for i, m := range moves {
		next := m.Task.Clone()
		next.EffectivePriority = p
		msgs[i] = queue.Outgoing{ID: fmt.Sprint(i), Body: Body(next, m.Task.Version+1), Delay: m.Delay}
	}
	failed := map[string]string{}
	if err := e.queues.SendBatch(ctx, p, msgs); err != nil {
		var be *queue.BatchError
		if !errors.As(err, &be) {
			return nil, fmt.Errorf("redispatch batch to %s: %w", p, err)
		}
		failed = be.Failed
	}
	var moved []*task.Task
	var firstErr error
	now := e.store.Now()
	for i, m := range moves {
		if _, bad := failed[fmt.Sprint(i)]; bad {
			continue
		}
		v := m.Task.Version + 1
		t, err := e.store.Transition(ctx, m.Task, to, func(n *task.Task) {
			n.EffectivePriority = p
			n.DispatchVersion = v
			if to == task.Queued && m.Task.Status != task.Queued {
				n.EnqueuedAt = &now
			}
			if m.Apply != nil {
				m.Apply(n)
			}
		})
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		moved = append(moved, t)
	}
	if len(failed) > 0 && firstErr == nil {
		firstErr = fmt.Errorf("redispatch batch to %s: %d sends failed", p, len(failed))
	}
	return moved, firstErr
}

// Retry puts a dead-lettered task back on its original priority's queue
// with its attempts reset and its error cleared; its history is kept. A
// task in any other status is a *store.StateError.
func (e *Enqueuer) Retry(ctx context.Context, get func(context.Context, string) (*task.Task, error), id string) (*task.Task, error) {
	for range 5 {
		t, err := get(ctx, id)
		if err != nil {
			return nil, err
		}
		if t.Status != task.DeadLetter {
			return t, &store.StateError{ID: id, Status: t.Status, Op: "retry"}
		}
		next, err := e.Redispatch(ctx, t, task.Queued, t.Priority, 0, func(n *task.Task) {
			n.Attempts = 0
			n.Error, n.Result = nil, nil
			n.CompletedAt, n.RetryAt, n.StartedAt = nil, nil, nil
			n.ExpiresAt = 0
			n.CancelRequested = false
		})
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		return next, err
	}
	return nil, fmt.Errorf("retry task %s: %w (it kept changing)", id, store.ErrConflict)
}
