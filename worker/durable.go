package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/triagehq/triage/internal/durable"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/task"
)

// Durable steps, sleeps and signal waits. A task's handler runs from the
// top on every attempt (a retry, a crash, a lost lease, a wake from a
// sleep); what it met before is replayed from records kept on the task's
// item, in the order met:
//
//	charge, err := worker.Step(ctx, j.Task, "charge", func(ctx context.Context) (Receipt, error) {
//		return pay(ctx, j.Args.Order) // runs once per task
//	})
//	if err != nil {
//		return nil, err
//	}
//	ok, err := worker.WaitSignal[Approval](ctx, j.Task, "approval", 24*time.Hour)
//	if errors.Is(err, worker.ErrSignalTimeout) { ... refund ... }
//	if err != nil {
//		return nil, err // also how the wait suspends the task: return it
//	}
//
// The rules (package internal/durable states them in full): a step's
// function runs once per task, its JSON result or permanent error recorded
// before Step returns, fenced by the attempt's claim; a retriable error is
// not recorded, so the step runs again on the next attempt. Steps must be
// met in the same order, under the same names and result types, on every
// attempt: otherwise Step returns ErrNonDeterminism (permanent). Sleep and
// WaitSignal return an error the handler must return: it ends the attempt
// without spending it and frees the slot; the task waits in status
// retrying, with "suspended" showing until when and for what.
//
// Cost on AWS: a step is one conditional UpdateItem of the task's item
// (billed on the item's size: 1–2 write units for small results), plus an
// S3 PUT for a result over 3 KiB; replaying steps reads nothing (the claim
// brings the records). A sleep is one step write plus one park write (and
// a SendMessage when ≤ 15 min); a signal is one UpdateItem, plus a
// SendMessage and an UpdateItem when it wakes a waiting task.

// ErrNonDeterminism matches (errors.Is) the error of a step met out of
// the order recorded, under another name, or as another result type: a
// permanent failure, never a silent replay.
var ErrNonDeterminism = durable.ErrNonDeterminism

// ErrSignalTimeout is what WaitSignal returns when its timeout passed
// before the signal arrived.
var ErrSignalTimeout = durable.ErrSignalTimeout

// StepRecord is one recorded step of a task, as GET of the task shows it
// (its "steps"): name, kind, outcome, duration and result size.
type StepRecord = task.Step

func (t *Task) durable() *durable.State {
	if t.req.Durable == nil {
		t.req.Durable = durable.New(nil, nil, t.Attempt, nil, time.Now)
	}
	return t.req.Durable
}

// Step runs fn once per task under name (1 to 64 letters, digits, '_',
// '.', ':' or '-'), recording its result; later attempts get the recorded
// result (or permanent error) without running fn.
func Step[T any](ctx context.Context, t *Task, name string, fn func(context.Context) (T, error)) (T, error) {
	var zero T
	if fe := task.CheckStepName("name", name); fe != nil {
		return zero, handler.Permanent(fmt.Errorf("step: %w", fe))
	}
	typ := reflect.TypeFor[T]().String()
	raw, err := t.durable().Run(ctx, name, typ, func(ctx context.Context) (json.RawMessage, error) {
		v, err := fn(ctx)
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, handler.Permanent(fmt.Errorf("marshal result of step %q: %w", name, err))
		}
		return b, nil
	}, func(err error) bool { return !handler.Retriable(err) })
	if err != nil {
		if !handler.Retriable(err) {
			return zero, err
		}
		if _, replayed := err.(*durable.ReplayedError); replayed {
			return zero, handler.Permanent(err)
		}
		return zero, err
	}
	var v T
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &v); err != nil {
			return zero, handler.Permanent(fmt.Errorf("step %q: recorded result does not decode into %s: %w (%w)", name, typ, err, ErrNonDeterminism))
		}
	}
	return v, nil
}

// Sleep waits d durably: the first time it is met it returns an error
// the handler must return, which ends the attempt without spending it and
// frees the slot; the task resumes after d (its steps replayed), when
// Sleep returns nil. Up to 15 min the wake is an SQS delay; beyond, the
// promoter's scheduled path, so d may be months.
func Sleep(ctx context.Context, t *Task, d time.Duration) error {
	return SleepUntil(ctx, t, time.Now().Add(d))
}

// SleepUntil is Sleep until at.
func SleepUntil(ctx context.Context, t *Task, at time.Time) error {
	return t.durable().Sleep(ctx, "", at)
}

// WaitSignal waits for the signal name (sent with POST
// /tasks/{id}/signals/{name}, Client.Signal or `triage signal`), holding
// nothing meanwhile, and returns its JSON payload decoded into T. A signal
// sent before the wait is kept and returned at once. While it has not
// arrived, WaitSignal returns an error the handler must return: the task
// waits, with no message on any queue, until the signal wakes it or
// timeout (measured from the first wait) passes; then WaitSignal returns
// ErrSignalTimeout. One wait per signal name per task.
func WaitSignal[T any](ctx context.Context, t *Task, name string, timeout time.Duration) (T, error) {
	var zero T
	if fe := task.CheckStepName("name", name); fe != nil {
		return zero, handler.Permanent(fmt.Errorf("signal: %w", fe))
	}
	raw, err := t.durable().WaitSignal(ctx, name, timeout)
	if err != nil {
		return zero, err
	}
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		return zero, handler.Permanent(fmt.Errorf("signal %q: payload does not decode into %T: %w", name, v, err))
	}
	return v, nil
}
