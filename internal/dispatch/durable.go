package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/triagehq/triage/internal/durable"
	"github.com/triagehq/triage/internal/metrics"
	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// This file is durable execution's part of the consumer: the journal an
// attempt records its steps through, and the outcome of a handler that
// slept or waits for a signal (package durable).

// StepRecorder records an attempt's steps (*store.Store); a Store without
// it gives handlers steps that are not recorded (each attempt runs them).
type StepRecorder interface {
	RecordStep(ctx context.Context, id, token string, st task.Step, inline int) error
	StepResult(ctx context.Context, id string, st task.Step) ([]byte, error)
}

// journal is an attempt's durable.Journal: every record is fenced by the
// attempt's token, so an attempt that lost its claim cannot record.
type journal struct {
	rec   StepRecorder
	id    string
	token string
}

func (j journal) Record(ctx context.Context, st task.Step, inline int) error {
	return j.rec.RecordStep(context.WithoutCancel(ctx), j.id, j.token, st, inline)
}

func (j journal) Result(ctx context.Context, st task.Step) ([]byte, error) {
	return j.rec.StepResult(ctx, j.id, st)
}

// durableState is the replay state of claimed task t's attempt.
func (c *Consumer) durableState(t *task.Task) *durable.State {
	var j durable.Journal
	if rec, ok := c.store.(StepRecorder); ok && t.ProgressToken != "" {
		j = journal{rec: rec, id: t.ID, token: t.ProgressToken}
	}
	st := durable.New(t.Steps, t.Signals, t.Attempts, j, c.store.Now)
	sub, ok1 := c.redisp.(ChildSubmitter)
	cs, ok2 := c.store.(ChildStore)
	if ok1 && ok2 {
		st.SetSpawner(spawner{c: c, sub: sub, store: cs, parent: t})
	}
	return st
}

// ChildSubmitter submits a parent's child tasks (*enqueue.Enqueuer, the
// consumer's Redispatcher); a consumer without it gives handlers no child
// steps.
type ChildSubmitter interface {
	Submit(ctx context.Context, t *task.Task) (*task.Task, bool, error)
}

// ChildStore marks a child so its finish notifies its parent, delivers
// the outcome of a child that finished first, and reads a large result
// (*store.Store).
type ChildStore interface {
	MarkParent(ctx context.Context, id string) (*task.Task, error)
	LoadBodies(ctx context.Context, t *task.Task) error
	Signal(ctx context.Context, id string, sg task.Signal) (*task.Task, error)
}

// spawner is an attempt's durable.Spawner: it submits parent's children.
type spawner struct {
	c      *Consumer
	sub    ChildSubmitter
	store  ChildStore
	parent *task.Task
}

// Spawn submits the child with its ChildKey (a repeat gets the first
// child), then marks it (has_children) so that its terminal write calls
// the store's finish hook, which delivers its outcome (durable.Notifier). A
// child that finished before the mark is delivered here. Costs: the
// submit's writes (as any task: ≈ 5 units with its index entries), the
// mark (1 unit), no read beyond the idempotency key's.
func (sp spawner) Spawn(ctx context.Context, step string, r task.Request) (string, *durable.ChildOutcome, error) {
	r.IdempotencyKey = durable.ChildKey(sp.parent.ID, step)
	if r.TraceID == "" {
		r.TraceID = sp.parent.TraceID
	}
	if err := r.Validate(); err != nil {
		return "", nil, err
	}
	child, _, err := sp.sub.Submit(ctx, r.NewTask(sp.c.store.Now(), queue.MaxDelay))
	if err != nil {
		return "", nil, fmt.Errorf("submit child %q: %w", step, err)
	}
	marked, err := sp.store.MarkParent(ctx, child.ID)
	if err != nil {
		return "", nil, fmt.Errorf("mark child %q (task %s): %w", step, child.ID, err)
	}
	if !marked.Status.Terminal() {
		return child.ID, nil, nil
	}
	o := durable.OutcomeOf(marked)
	n := durable.Notifier{Signal: sp.store.Signal, Redispatch: sp.c.redisp.Redispatch}
	if err := n.Finished(ctx, marked); err != nil && !errors.Is(err, store.ErrSignalExists) && !errors.Is(err, store.ErrConflict) {
		sp.c.log.Warn("child finished before it was marked; its outcome is returned but not kept on the parent", "task_id", sp.parent.ID, "child_id", child.ID, "error", err)
	}
	return child.ID, &o, nil
}

// ChildOutcome reads child id (one GetItem): its outcome once it
// finished, nil while it has not.
func (sp spawner) ChildOutcome(ctx context.Context, id string) (*durable.ChildOutcome, error) {
	t, err := sp.c.store.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if !t.Status.Terminal() {
		return nil, nil
	}
	o := durable.OutcomeOf(t)
	return &o, nil
}

// ChildResult reads completed child id's result.
func (sp spawner) ChildResult(ctx context.Context, id string) (json.RawMessage, error) {
	t, err := sp.c.store.Get(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("read child %s: %w", id, err)
	}
	if err := sp.store.LoadBodies(ctx, t); err != nil {
		return nil, fmt.Errorf("read result of child %s: %w", id, err)
	}
	return t.Result, nil
}

// suspend parks a task whose handler slept or waits for a signal, without
// spending the attempt, until s.WakeAt: in status retrying with its
// Suspend set. A sleep of at most queue.MaxDelay (15 min) gets a fresh
// message with that delay; a longer one, and every signal wait, gets none
// (the promoter sends one when the wake time comes within its window), so
// a waiting task costs no receives. A signal wait whose signal arrived
// meanwhile is woken at once: the signal's write and this one are on the
// same item, so whichever comes second sees the other and wakes the task
// (a conditional re-dispatch on its version, so once).
func (c *Consumer) suspend(ctx context.Context, j *job, a triagetype.Attempt, s *durable.SuspendError) {
	now := c.store.Now()
	wait := max(s.WakeAt.Sub(now), 0)
	a.Error = s.Error()
	kind := task.StepSleep
	if s.Signal != "" {
		kind = task.StepWait
	}
	withMessage := s.Signal == "" && wait <= queue.MaxDelay
	edit := func(n *task.Task) {
		n.Attempts--
		n.AddAttempt(a)
		j.rep.apply(n)
		at := s.WakeAt.UTC()
		n.RetryAt = &at
		n.Suspend = &task.Suspend{Kind: kind, Signal: s.Signal, WakeAt: at}
		n.WorkerID, n.LeaseUntil = "", nil
		if !withMessage {
			n.DispatchVersion = task.NoMessage
		}
	}
	saved, err := c.write(ctx, j, func(cur *task.Task) (*task.Task, error) {
		if withMessage {
			return c.redisp.Redispatch(ctx, cur, triagetype.Retrying, cur.EffectivePriority, wait, edit)
		}
		return c.store.Transition(ctx, cur, triagetype.Retrying, edit)
	})
	if !c.logWriteError(j, "suspend", err) {
		return
	}
	c.del.add(j.msg.Priority, j.msg.ReceiptHandle)
	c.mx.Finished(saved, metrics.Snoozed)
	c.log.LogAttrs(ctx, slog.LevelInfo, "task suspended", slog.String("task_id", saved.ID), slog.String("kind", kind), slog.String("signal", s.Signal), slog.Time("wake_at", s.WakeAt))
	if s.Signal != "" {
		if _, arrived := saved.SignalNamed(s.Signal); arrived {
			c.wake(ctx, saved)
		}
	}
}

// wake re-dispatches a suspended task now; losing the race to another
// waker (the signal's sender, the promoter) is fine.
func (c *Consumer) wake(ctx context.Context, t *task.Task) {
	if _, err := c.redisp.Redispatch(ctx, t, triagetype.Queued, t.EffectivePriority, 0, func(n *task.Task) { n.RetryAt = nil }); err != nil {
		c.log.Debug("wake of a signalled task lost its race", "task_id", t.ID, "error", err)
	}
}
