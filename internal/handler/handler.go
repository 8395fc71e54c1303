// Package handler defines how a task's work is run, and the registry that
// maps a task type to the handler for it.
//
// A handler is in-process Go code, a Lambda function invoked by ARN, or an
// HTTP webhook; the dispatcher treats them alike. A handler's error is
// retriable unless it is marked with Permanent.
package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/triagehq/triage/internal/task"
)

// Request is what a handler gets to run one attempt of a task.
type Request struct {
	ID          string          `json:"id"`
	Type        string          `json:"type"`
	Payload     json.RawMessage `json:"payload"`
	Priority    task.Priority   `json:"priority"`
	Attempt     int             `json:"attempt"`
	MaxAttempts int             `json:"max_attempts"`
	TraceID     string          `json:"trace_id,omitempty"`
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
func Retriable(err error) bool { return !errors.Is(err, ErrPermanent) }

// ErrNoHandler is returned for a task type with no registered handler.
var ErrNoHandler = errors.New("no handler registered for task type")

// Registry maps task types to handlers. Build it before the consumer starts;
// it is read-only afterwards.
type Registry struct {
	byType map[string]Handler
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{byType: map[string]Handler{}} }

// Register sets the handler of typ, replacing any earlier one.
func (r *Registry) Register(typ string, h Handler) { r.byType[typ] = h }

// Lookup returns the handler of typ.
func (r *Registry) Lookup(typ string) (Handler, error) {
	h, ok := r.byType[typ]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNoHandler, typ)
	}
	return h, nil
}

// Types lists the registered task types.
func (r *Registry) Types() []string {
	out := make([]string, 0, len(r.byType))
	for t := range r.byType {
		out = append(out, t)
	}
	return out
}
