// Package execution is how one attempt of a task is put to its handler
// and how what the handler did is read: the request it gets, the timeout
// it runs under, a panic, a result that cannot be stored, and whether the
// attempt completes, retries, snoozes, holds its scope (a Retry-After),
// cancels or dead-letters the task (Decide).
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

	"github.com/triagehq/triage/internal/durable"
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

// Kind is what becomes of a task after an attempt.
type Kind int

const (
	// Complete: the handler succeeded with a result that can be stored;
	// Outcome.Result is the task's result.
	Complete Kind = iota + 1
	// Retry: a retriable error with attempts left; the task runs again
	// after its backoff.
	Retry
	// Snooze: the handler asked (handler.Snooze) to run again after
	// Outcome.Snooze, without spending the attempt.
	Snooze
	// Hold: the handler asked (handler.RetryAfter) for the task's scope
	// (Outcome.RetryAfter.Scope: its key, type, or type and key) to wait
	// until Outcome.RetryAfter.Until; the task is set aside there without
	// spending the attempt.
	Hold
	// Suspend: the handler slept or waits for a signal (package durable);
	// the task waits without spending the attempt until
	// Outcome.Suspend.WakeAt, or its signal.
	Suspend
	// Cancel: the handler cancelled the task (handler.Cancel); it is not
	// retried and Outcome.Message is the reason.
	Cancel
	// DeadLetter: a permanent error (handler.Permanent, a panic, a result
	// that cannot be stored), or a retriable one on the last attempt; the
	// task fails for good.
	DeadLetter
)

// String names the kind as the task's history and logs do.
func (k Kind) String() string {
	switch k {
	case Complete:
		return "complete"
	case Retry:
		return "retry"
	case Snooze:
		return "snooze"
	case Hold:
		return "hold"
	case Suspend:
		return "suspend"
	case Cancel:
		return "cancel"
	case DeadLetter:
		return "dead_letter"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Outcome is what Decide makes of an attempt.
type Outcome struct {
	Kind Kind
	// Result is the task's result, for Complete (nil: none).
	Result json.RawMessage
	// Err is the attempt's error as read, nil for Complete: the handler's,
	// the timeout (named) in its place when the attempt ran out of time,
	// or the permanent error of a result that cannot be stored.
	Err error
	// Message is what the task records: the error, the cancel's reason,
	// "snoozed for 30s", and for a dead letter after a retriable error the
	// attempts it ran out of.
	Message string
	// Retriable reports, for DeadLetter, that the error itself was
	// retriable and the attempts ran out.
	Retriable bool
	// TimedOut reports that the attempt's timeout passed (Err names it).
	TimedOut bool
	// Snooze is how long a snoozed task waits.
	Snooze time.Duration
	// RetryAfter is, for Hold, the scope that waits and until when.
	RetryAfter *handler.RetryAfterError
	// Suspend is, for Suspend, until when the task waits, and for which
	// signal.
	Suspend *durable.SuspendError
}

// Decide reads what attempt attempt (from 1) of a task allowed
// maxAttempts did: result and err are what Run returned, under ctx, the
// attempt's context from WithTimeout. It is the one statement of the
// rules, in this order:
//
//   - no error and a result that can be stored (CheckResult): Complete;
//   - the attempt's timeout passed: the timeout is the error, whatever
//     the handler returned (a RetryAfter or Snooze that arrives too late
//     is not honoured), then read as below;
//   - a RetryAfter: Hold; a durable sleep or signal wait
//     (durable.SuspendError): Suspend; a Snooze: Snooze; a Cancel: Cancel;
//   - a retriable error while attempts remain: Retry;
//   - anything else (Permanent, a panic, a result that cannot be stored,
//     a retriable error on the last attempt): DeadLetter.
//
// What needs a deployment is the caller's: the consumer answers a cancel
// request or a shutdown before it applies the outcome.
func Decide(ctx context.Context, result json.RawMessage, err error, attempt, maxAttempts int) Outcome {
	if err == nil {
		if err = CheckResult(result); err == nil {
			return Outcome{Kind: Complete, Result: result}
		}
	}
	timedOut := false
	if expired := Expired(ctx); expired != nil {
		err, timedOut = expired, true // the timeout, named
	}
	if ra, ok := handler.RetryAfterOf(err); ok {
		return Outcome{Kind: Hold, Err: err, Message: ra.Error(), RetryAfter: ra}
	}
	if se, ok := durable.SuspendOf(err); ok {
		return Outcome{Kind: Suspend, Err: err, Message: se.Error(), Suspend: se}
	}
	if d, ok := handler.SnoozeOf(err); ok {
		return Outcome{Kind: Snooze, Err: err, Message: fmt.Sprintf("snoozed for %s", d), Snooze: d}
	}
	if errors.Is(err, handler.ErrCancel) {
		return Outcome{Kind: Cancel, Err: err, Message: err.Error()}
	}
	retriable := handler.Retriable(err)
	if retriable && attempt < maxAttempts {
		return Outcome{Kind: Retry, Err: err, Message: err.Error(), Retriable: true, TimedOut: timedOut}
	}
	msg := err.Error()
	if retriable {
		msg = fmt.Sprintf("%s (attempt %d of %d, none left)", msg, attempt, maxAttempts)
	}
	return Outcome{Kind: DeadLetter, Err: err, Message: msg, Retriable: retriable, TimedOut: timedOut}
}
