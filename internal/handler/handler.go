// Package handler defines how a task's work is run, and the registry that
// maps a task type to the handler for it.
//
// A handler is in-process Go code, a Lambda function invoked by ARN, or an
// HTTP webhook; the dispatcher treats them alike. A handler's error is
// retriable unless it says otherwise: Permanent (dead-letter now), Cancel
// (the task is cancelled), or Snooze (run again later without spending an
// attempt). Middleware registered with Registry.Use wraps every attempt of
// every handler (tracing and metrics, say).
package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/triagehq/triage/internal/durable"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Request is what a handler gets to run one attempt of a task.
type Request struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	// Key is the task's fairness key (empty: the default key).
	Key         string              `json:"key,omitempty"`
	Payload     json.RawMessage     `json:"payload"`
	Priority    triagetype.Priority `json:"priority"`
	Attempt     int                 `json:"attempt"`
	MaxAttempts int                 `json:"max_attempts"`
	TraceID     string              `json:"trace_id,omitempty"`
	// EffectivePriority is the priority this attempt runs at, the queue
	// it was taken from; Priority is the one the task was submitted with.
	// It is higher than Priority when the promoter moved the task after
	// it waited too long (TRIAGE_PROMOTE_LOW_AFTER, _MEDIUM_AFTER), and
	// never lower. Log or meter by Priority, what the submitter asked
	// for; size the work for urgency by EffectivePriority.
	EffectivePriority triagetype.Priority `json:"effective_priority"`
	// Traceparent is the W3C traceparent of the attempt's span, for a
	// handler to continue the trace (webhooks also get it as the
	// traceparent header).
	Traceparent string `json:"traceparent,omitempty"`
	// Checkpoint is the last checkpoint saved for the task, by an earlier
	// attempt or a snoozed one: where this attempt may resume from.
	Checkpoint json.RawMessage `json:"checkpoint,omitempty"`
	// ProgressToken authorizes this attempt's progress reports to the API
	// (POST /api/v1/tasks/{id}/progress, Authorization: Bearer <token>),
	// for an external handler; it is void once the attempt ends.
	// ProgressURL is that endpoint's full URL when the consumer knows the
	// API's address (TRIAGE_API_URL).
	ProgressToken string `json:"progress_token,omitempty"`
	ProgressURL   string `json:"progress_url,omitempty"`
	// Parents are the tasks this one waited for (its after list), with
	// their status and result or error, in the order named.
	Parents []triagetype.Parent `json:"parents,omitempty"`
	// Reporter records an in-process handler's progress and checkpoints
	// (nil when nothing is listening, as in a unit test: see Report).
	Reporter Reporter `json:"-"`
	// Durable is the attempt's replay of the task's recorded steps, sleeps
	// and signal waits (package durable); nil when nothing records them.
	Durable *durable.State `json:"-"`
}

// Reporter records what a running attempt reports. Reports are cheap to
// make: they are kept in memory, latest wins, and written to the task at
// most once per task.ProgressInterval (with a heartbeat when one is due)
// and with the attempt's outcome, so a handler may report in a tight loop.
// A report is refused only when it is invalid (a *task.FieldError).
type Reporter interface {
	Progress(ctx context.Context, percent int, message string) error
	Checkpoint(ctx context.Context, data json.RawMessage) error
}

// ReportProgress reports r's progress to its Reporter, if it has one.
func (r Request) ReportProgress(ctx context.Context, percent int, message string) error {
	if fe := task.CheckProgress(percent, message); fe != nil {
		return fe
	}
	if r.Reporter == nil {
		return nil
	}
	return r.Reporter.Progress(ctx, percent, message)
}

// SaveCheckpoint saves data as r's checkpoint through its Reporter, if it
// has one.
func (r Request) SaveCheckpoint(ctx context.Context, data json.RawMessage) error {
	if fe := task.CheckCheckpoint(data); fe != nil {
		return fe
	}
	if r.Reporter == nil {
		return nil
	}
	return r.Reporter.Checkpoint(ctx, data)
}

// Handler runs one attempt of a task and returns its JSON result.
type Handler interface {
	Handle(ctx context.Context, r Request) (json.RawMessage, error)
}

// Func adapts an ordinary function to Handler.
type Func func(ctx context.Context, r Request) (json.RawMessage, error)

// Handle calls f.
func (f Func) Handle(ctx context.Context, r Request) (json.RawMessage, error) { return f(ctx, r) }

// ErrPermanent marks an error that retrying cannot fix: the task goes
// straight to dead_letter.
var ErrPermanent = errors.New("permanent failure")

type permanentError struct{ err error }

func (e *permanentError) Error() string   { return e.err.Error() }
func (e *permanentError) Unwrap() []error { return []error{e.err, ErrPermanent} }

// Permanent marks err as non-retriable.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// Retriable reports whether the task may be tried again after err.
// A non-determinism error (durable.ErrNonDeterminism) is never retriable:
// the same code meets the same records again.
func Retriable(err error) bool {
	return !errors.Is(err, ErrPermanent) && !errors.Is(err, ErrCancel) && !errors.Is(err, durable.ErrNonDeterminism)
}

// ErrCancel matches (errors.Is) every error made with Cancel.
var ErrCancel = errors.New("cancelled by its handler")

type cancelError struct{ err error }

func (e *cancelError) Error() string   { return e.err.Error() }
func (e *cancelError) Unwrap() []error { return []error{e.err, ErrCancel} }

// Cancel ends the task as cancelled, not failed: it is not retried and not
// dead-lettered, and err's message is recorded as the reason. For work
// that has become pointless (the order it was for is gone).
func Cancel(err error) error {
	if err == nil {
		err = errors.New("cancelled by its handler")
	}
	return &cancelError{err: err}
}

// MaxSnooze is the longest Snooze: a task's timeout's upper bound (12 h).
const MaxSnooze = time.Duration(task.MaxTimeoutSeconds) * time.Second

// SnoozeError asks for the task to run again After from now. The attempt
// it ended is not counted: snoozing is waiting, not failing.
type SnoozeError struct{ After time.Duration }

func (e *SnoozeError) Error() string { return fmt.Sprintf("snoozed for %s", e.After) }

// Snooze returns the error that puts the task back to run again after d
// (at least a second, at most MaxSnooze) without spending an attempt: for
// work that is not ready yet (a file still uploading, a rate limit upstream).
func Snooze(d time.Duration) error {
	return &SnoozeError{After: min(max(d, time.Second), MaxSnooze)}
}

// SnoozeOf reports whether err asks for a snooze, and for how long.
func SnoozeOf(err error) (time.Duration, bool) {
	var se *SnoozeError
	if errors.As(err, &se) {
		return se.After, true
	}
	return 0, false
}

// Middleware runs around every attempt: it may look at or change the
// request and context, call next (or not), and look at or change the
// outcome. Middleware is what tracing, metrics and logging hook into.
type Middleware func(ctx context.Context, r Request, next Func) (json.RawMessage, error)

// Chain wraps h in mws; the first runs outermost.
func Chain(h Handler, mws ...Middleware) Handler {
	for i := len(mws) - 1; i >= 0; i-- {
		mw, next := mws[i], h
		h = Func(func(ctx context.Context, r Request) (json.RawMessage, error) { return mw(ctx, r, next.Handle) })
	}
	return h
}

// ErrNoHandler is returned for a task type with no registered handler.
var ErrNoHandler = errors.New("no handler registered for task type")

// ErrDuplicate is returned when a task type is registered twice.
var ErrDuplicate = errors.New("task type already has a handler")

// Registry maps task types to handlers. Build it before the consumer starts;
// it is read-only afterwards.
type Registry struct {
	byType map[string]Handler
	mws    []Middleware
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{byType: map[string]Handler{}} }

// Register sets the handler of typ. A type that has one already is an
// error (ErrDuplicate), so two handlers can never silently fight over a
// type; Replace is for the one deliberate override.
func (r *Registry) Register(typ string, h Handler) error {
	if _, dup := r.byType[typ]; dup {
		return fmt.Errorf("%w: %q", ErrDuplicate, typ)
	}
	r.byType[typ] = h
	return nil
}

// Replace sets the handler of typ, replacing any earlier one.
func (r *Registry) Replace(typ string, h Handler) { r.byType[typ] = h }

// Use adds middleware around every handler Lookup returns, in order: the
// first added runs outermost.
func (r *Registry) Use(mws ...Middleware) { r.mws = append(r.mws, mws...) }

// Lookup returns the handler of typ, wrapped in the registry's middleware.
func (r *Registry) Lookup(typ string) (Handler, error) {
	h, ok := r.byType[typ]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNoHandler, typ)
	}
	return Chain(h, r.mws...), nil
}

// Has reports whether typ has a handler.
func (r *Registry) Has(typ string) bool {
	_, ok := r.byType[typ]
	return ok
}

// Types lists the registered task types.
func (r *Registry) Types() []string {
	out := make([]string, 0, len(r.byType))
	for t := range r.byType {
		out = append(out, t)
	}
	return out
}
