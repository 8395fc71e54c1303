// Package execution is how one attempt of a task is put to its handler
// and how what the handler did is read: the request it gets, the timeout
// it runs under, a panic, a result that cannot be stored, and whether its
// error completes, retries, snoozes, cancels or dead-letters the task.
//
// It is the single statement of those rules, shared by the consumer
// (internal/dispatch), which then writes the outcome to the task, and by
// package workertest, which reports it to a test. So a handler tested with
// workertest is read exactly as the consumer will read it in production.
// Only what needs a deployment stays in the consumer: the claim, the
// lease and heartbeat, cancel requests, shutdown and the writes.
package execution

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/task"
)

// Request is what t's handler gets for its current attempt (t.Attempts,
// counted at the claim), with payload as read for it. The fields that need
// the running consumer (Traceparent, ProgressURL, Reporter) are the
// caller's to set.
func Request(t *task.Task, payload json.RawMessage) handler.Request {
	return handler.Request{
		ID: t.ID, Type: t.Type, Key: t.Key, Payload: payload,
		Priority: t.Priority, EffectivePriority: t.EffectivePriority,
		Attempt: t.Attempts, MaxAttempts: t.MaxAttempts, TraceID: t.TraceID,
		Checkpoint: t.Checkpoint, ProgressToken: t.ProgressToken,
	}
}

// WithTimeout bounds an attempt by its task's timeout. When it passes, the
// context's cause (see Expired) is the error the attempt fails with, which
// names the limit.
func WithTimeout(ctx context.Context, timeoutSeconds int) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, time.Duration(timeoutSeconds)*time.Second,
		fmt.Errorf("timeout: the handler ran longer than timeout_seconds=%d", timeoutSeconds))
}

// Expired returns why an attempt's context ended when that is something
// other than a plain cancellation (its timeout, from WithTimeout), and nil
// otherwise: the error to record in place of whatever the handler
// returned, since a handler that times out usually reports only
// "context deadline exceeded".
func Expired(ctx context.Context) error {
	if ctx.Err() == nil {
		return nil
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return nil
}

// Panic is the error of a handler that panicked; Run makes it permanent,
// since running the same code on the same input would panic again.
type Panic struct{ Value any }

func (p *Panic) Error() string { return fmt.Sprintf("handler panicked: %v", p.Value) }

// Run calls h for r, turning a panic into a permanent *Panic error so that
// one bad handler cannot take its consumer down.
func Run(ctx context.Context, h handler.Handler, r handler.Request) (res json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			res, err = nil, handler.Permanent(&Panic{Value: p})
		}
	}()
	return h.Handle(ctx, r)
}

// CheckResult returns the permanent error of a result that cannot be a
// task's result (not JSON, or over task.MaxResultBytes), and nil for one
// that can: running the handler again would only return it again.
func CheckResult(result json.RawMessage) error {
	switch {
	case result != nil && !json.Valid(result):
		return handler.Permanent(errors.New("handler returned a result that is not valid JSON"))
	case len(result) > task.MaxResultBytes:
		return handler.Permanent(fmt.Errorf("result is %d bytes; the limit is %d", len(result), task.MaxResultBytes))
	}
	return nil
}

// Kind is what becomes of a task after an attempt that failed.
type Kind int

const (
	// Retry: a retriable error with attempts left; the task runs again
	// after its backoff.
	Retry Kind = iota + 1
	// Snooze: the handler asked (handler.Snooze) to run again after
	// Outcome.Snooze, without spending the attempt.
	Snooze
	// Cancel: the handler cancelled the task (handler.Cancel); it is not
	// retried and Outcome.Message is the reason.
	Cancel
	// DeadLetter: a permanent error, or a retriable one on the last
	// attempt; the task fails for good.
	DeadLetter
)

// Outcome is what Decide makes of a failed attempt.
type Outcome struct {
	Kind Kind
	// Message is the error the task records: the handler's, and for a
	// dead letter after a retriable error, the attempts it ran out of.
	Message string
	// Retriable reports, for DeadLetter, that the error itself was
	// retriable and the attempts ran out.
	Retriable bool
	// Snooze is how long a snoozed task waits.
	Snooze time.Duration
}

// Decide reads err, the non-nil error of attempt attempt (from 1) of a
// task allowed maxAttempts: a snooze, a cancel, a retry while attempts
// remain, and a dead letter otherwise.
func Decide(err error, attempt, maxAttempts int) Outcome {
	if d, ok := handler.SnoozeOf(err); ok {
		return Outcome{Kind: Snooze, Message: fmt.Sprintf("snoozed for %s", d), Snooze: d}
	}
	if errors.Is(err, handler.ErrCancel) {
		return Outcome{Kind: Cancel, Message: err.Error()}
	}
	retriable := handler.Retriable(err)
	if retriable && attempt < maxAttempts {
		return Outcome{Kind: Retry, Message: err.Error(), Retriable: true}
	}
	msg := err.Error()
	if retriable {
		msg = fmt.Sprintf("%s (attempt %d of %d, none left)", msg, attempt, maxAttempts)
	}
	return Outcome{Kind: DeadLetter, Message: msg, Retriable: retriable}
}
