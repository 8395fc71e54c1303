package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/triagehq/triage/internal/enqueue"
	"github.com/triagehq/triage/internal/execution"
	"github.com/triagehq/triage/internal/metrics"
	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// This file is the outcome phase: the conditional write that records how
// an attempt ended, and what happens to its message.

// finish records o, the outcome execution.Decide read from the attempt
// (the one decision the consumer and package workertest share), on the
// task and its message. stage is where the attempt's error arose, for the
// failures metric.
func (c *Consumer) finish(ctx context.Context, j *job, a triagetype.Attempt, o execution.Outcome, stage failStage) {
	switch o.Kind {
	case execution.Complete:
		a.Outcome = triagetype.AttemptCompleted
		c.complete(ctx, j, a, o.Result)
	case execution.Hold:
		a.Outcome = triagetype.AttemptSetAside
		c.retryAfter(ctx, j, a, o.RetryAfter)
	case execution.Snooze:
		a.Outcome = triagetype.AttemptSnoozed
		c.snooze(ctx, j, a, o.Snooze)
	case execution.Suspend:
		a.Outcome = triagetype.AttemptSuspended
		c.suspend(ctx, j, a, o.Suspend)
	case execution.Cancel:
		a.Error, a.Outcome = o.Err.Error(), triagetype.AttemptCancelled
		c.finishCancelled(ctx, j, a, task.NewError(o.Message, false))
	case execution.Retry:
		a.Error, a.Outcome = o.Err.Error(), triagetype.AttemptFailed
		c.mx.Failed(j.snapshot(), failure(o.Err, o.TimedOut, stage))
		c.retry(ctx, j, a, o.Message)
	default: // execution.DeadLetter
		a.Error, a.Outcome = o.Err.Error(), triagetype.AttemptFailed
		c.mx.Failed(j.snapshot(), failure(o.Err, o.TimedOut, stage))
		c.deadLetter(ctx, j, a, task.NewError(o.Message, o.Retriable))
	}
}

// finishWrite runs w through write and logs a lost lease.
func (c *Consumer) finishWrite(ctx context.Context, j *job, what string, w func(cur *task.Task) (*task.Task, error)) bool {
	_, err := c.write(ctx, j, w)
	return c.logWriteError(j, what, err)
}

// logWriteError logs why a finishing write failed and reports whether it
// succeeded (err is nil).
func (c *Consumer) logWriteError(j *job, what string, err error) bool {
	if err == nil {
		return true
	}
	t := j.snapshot()
	if errors.Is(err, errLeaseLost) {
		c.log.Warn("lease lost before "+what+"; outcome discarded", "task_id", t.ID, "worker_id", c.opt.WorkerID)
	} else {
		c.log.Error(what+" failed; the message will come back and the task will be retried", "task_id", t.ID, "error", err)
	}
	return false
}

// complete records a success. A result that cannot be stored (the task's
// record would pass DynamoDB's item limit) fails the task once and
// permanently, saying so: the handler is not run again for an outcome
// that can never be written.
func (c *Consumer) complete(ctx context.Context, j *job, a triagetype.Attempt, result json.RawMessage) {
	now := c.store.Now()
	_, err := c.write(ctx, j, func(cur *task.Task) (*task.Task, error) {
		return c.store.Transition(ctx, cur, triagetype.Completed, func(n *task.Task) {
			n.Result, n.Error = result, nil
			n.CompletedAt = &now
			n.WorkerID, n.LeaseUntil = "", nil
			n.AddAttempt(a)
			j.rep.apply(n)
		})
	})
	if errors.Is(err, store.ErrItemTooLarge) {
		t := j.snapshot()
		msg := fmt.Sprintf("the handler succeeded but its result (%d bytes) cannot be stored: with the payload (%d bytes) and history the task's record would pass DynamoDB's 400 KB item limit", len(result), len(t.Payload))
		c.log.Error("result too large to store; task dead-lettered", "task_id", t.ID, "result_bytes", len(result), "payload_bytes", len(t.Payload), "error", err)
		a.Error, a.Outcome = msg, triagetype.AttemptFailed
		c.mx.Failed(t, metrics.FailBadResult)
		c.deadLetter(ctx, j, a, task.NewError(msg, false))
		return
	}
	if c.logWriteError(j, "completion", err) {
		c.mx.Finished(j.snapshot(), metrics.Completed)
		c.del.add(j.msg.Priority, j.msg.ReceiptHandle)
	}
}

// finishCancelled records a cancelled task: on request (reason nil), or
// by its handler's Cancel (reason is its error, recorded on the task).
func (c *Consumer) finishCancelled(ctx context.Context, j *job, a triagetype.Attempt, reason *triagetype.TaskError) {
	now := c.store.Now()
	if c.finishWrite(ctx, j, "cancellation", func(cur *task.Task) (*task.Task, error) {
		return c.store.Transition(ctx, cur, triagetype.Cancelled, func(n *task.Task) {
			if reason != nil {
				n.Error = reason
			}
			n.CompletedAt = &now
			n.WorkerID, n.LeaseUntil = "", nil
			n.AddAttempt(a)
			j.rep.apply(n)
		})
	}) {
		c.mx.Finished(j.snapshot(), metrics.Cancelled)
		c.del.add(j.msg.Priority, j.msg.ReceiptHandle)
	}
}

// handBack returns an interrupted task to its queue at once. A message on
// its last receive is replaced by a fresh one instead of being made
// visible, so a hand-back never sends a task to the DLQ.
func (c *Consumer) handBack(ctx context.Context, j *job, a triagetype.Attempt) {
	apply := func(n *task.Task) {
		n.WorkerID, n.LeaseUntil = "", nil
		n.AddAttempt(a)
		j.rep.apply(n)
	}
	fresh := c.lastReceive(j.msg)
	if !c.finishWrite(ctx, j, "hand-back", func(cur *task.Task) (*task.Task, error) {
		if fresh {
			return c.redisp.Redispatch(ctx, cur, triagetype.Queued, cur.EffectivePriority, 0, apply)
		}
		return c.store.Transition(ctx, cur, triagetype.Queued, apply)
	}) {
		return
	}
	c.counts.handedBack.Add(1)
	c.mx.Finished(j.snapshot(), metrics.HandedBack)
	if fresh {
		c.del.add(j.msg.Priority, j.msg.ReceiptHandle)
		return
	}
	c.hide(ctx, j.msg, 0)
}

// retry records a retriable failure and keeps the task's message out of
// sight for the backoff. Attempts in DynamoDB are the only retry count:
// when the message has had its last receive before SQS would redrive it,
// the wait is done with a fresh message (DelaySeconds) instead of hiding
// the old one, so max_attempts is honoured whatever the redrive threshold.
// A wait longer than SQS can hide or delay a message parks the task with
// no message; the promoter sends one when it is due.
func (c *Consumer) retry(ctx context.Context, j *job, a triagetype.Attempt, msg string) {
	t := j.snapshot()
	c.rngMu.Lock()
	wait := c.opt.Backoff[t.Priority].Wait(t.Attempts, c.opt.Rand)
	c.rngMu.Unlock()
	if c.park(ctx, j, "retry", wait, func(n *task.Task) {
		n.Error = task.NewError(msg, true)
		n.AddAttempt(a)
	}) {
		c.mx.Finished(t, metrics.Retried)
		c.log.LogAttrs(ctx, slog.LevelInfo, "task will retry", slog.String("task_id", t.ID), slog.Duration("wait", wait), slog.Int("attempt", t.Attempts), slog.String("error", msg))
	}
}

// snooze puts the task back to run again after d, as its handler asked,
// without counting the attempt that asked (so a task may snooze any
// number of times; max_attempts counts failures only).
func (c *Consumer) snooze(ctx context.Context, j *job, a triagetype.Attempt, d time.Duration) {
	a.Error = fmt.Sprintf("snoozed for %s", d)
	if c.park(ctx, j, "snooze", d, func(n *task.Task) {
		n.Attempts--
		n.AddAttempt(a)
	}) {
		c.mx.Finished(j.snapshot(), metrics.Snoozed)
		c.log.LogAttrs(ctx, slog.LevelInfo, "task snoozed", slog.String("task_id", j.snapshot().ID), slog.Duration("wait", d))
	}
}

// park moves an executing task to retrying, to run again after wait:
// by hiding its message, or with a fresh message when this receive is the
// last before SQS would redrive it, or with none (the promoter sends one
// when due) when the wait is longer than SQS can hide or delay a message.
// apply records why. It reports whether the task was parked.
func (c *Consumer) park(ctx context.Context, j *job, what string, wait time.Duration, apply func(n *task.Task)) bool {
	t := j.snapshot()
	now := c.store.Now()
	at := now.Add(wait)
	fresh := c.lastReceive(j.msg)
	noMessage := wait > queue.MaxVisibility || (fresh && wait > queue.MaxDelay)
	edit := func(n *task.Task) {
		apply(n)
		j.rep.apply(n) // a retry starts from the attempt's last checkpoint
		n.RetryAt = &at
		n.WorkerID, n.LeaseUntil = "", nil
		if noMessage {
			n.DispatchVersion = task.NoMessage // the promoter sends it when due
		}
	}
	if !c.finishWrite(ctx, j, what, func(cur *task.Task) (*task.Task, error) {
		if fresh && !noMessage {
			return c.redisp.Redispatch(ctx, cur, triagetype.Retrying, cur.EffectivePriority, wait, edit)
		}
		return c.store.Transition(ctx, cur, triagetype.Retrying, edit)
	}) {
		return false
	}
	if noMessage || fresh {
		c.del.add(j.msg.Priority, j.msg.ReceiptHandle)
		return true
	}
	err := c.queues.ChangeVisibility(ctx, j.msg.Priority, j.msg.ReceiptHandle, wait)
	if err == nil {
		return true
	}
	// The message is gone (its visibility ran out and someone deleted it as
	// busy, or SQS lost the receipt): give the task a new one.
	c.log.Warn("could not delay the message; sending a new one", "task_id", t.ID, "error", err)
	c.mx.Recovered(metrics.RecoveredMessage)
	if _, err := c.redisp.Redispatch(ctx, j.snapshot(), triagetype.Queued, t.EffectivePriority, min(wait, queue.MaxDelay), nil); err != nil {
		c.log.Error("re-send for retry failed; the promoter will re-send it", "task_id", t.ID, "error", err)
	}
	return true
}

// deadLetter records a terminal failure and moves the message to the DLQ.
func (c *Consumer) deadLetter(ctx context.Context, j *job, a triagetype.Attempt, e *triagetype.TaskError) {
	t := j.snapshot()
	now := c.store.Now()
	if a.Error == "" {
		a.Error = e.Message
	}
	if !c.finishWrite(ctx, j, "dead-letter", func(cur *task.Task) (*task.Task, error) {
		return c.store.Transition(ctx, cur, triagetype.DeadLetter, func(n *task.Task) {
			n.Error = e
			n.CompletedAt = &now
			n.WorkerID, n.LeaseUntil = "", nil
			n.AddAttempt(a)
			j.rep.apply(n)
		})
	}) {
		return
	}
	dead := j.snapshot()
	c.mx.Finished(dead, metrics.DeadLettered)
	if err := c.queues.SendDLQ(ctx, j.msg.Priority, enqueue.Body(dead, dead.Version), e.Message); err != nil {
		c.log.Error("copy to DLQ failed; the task is dead_letter in the table", "task_id", t.ID, "error", err)
	}
	c.del.add(j.msg.Priority, j.msg.ReceiptHandle)
}
