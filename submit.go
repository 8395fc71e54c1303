package triage

import (
	"encoding/json"
	"fmt"
	"time"
)

// SubmitOption sets one field of a submit.
type SubmitOption func(*SubmitRequest)

// WithPriority sets the task's priority (default Medium).
func WithPriority(p Priority) SubmitOption {
	return func(r *SubmitRequest) { r.Priority = p }
}

// WithMaxAttempts sets how many times the task may run before it is
// dead-lettered (default DefaultMaxAttempts, at most 100).
func WithMaxAttempts(n int) SubmitOption {
	return func(r *SubmitRequest) { r.MaxAttempts = &n }
}

// WithTimeout sets how long one attempt may run (default
// DefaultTimeoutSeconds), in whole seconds, rounded up.
func WithTimeout(d time.Duration) SubmitOption {
	s := seconds(d)
	return func(r *SubmitRequest) { r.TimeoutSeconds = &s }
}

// WithRunAt makes the task wait until at. It replaces WithDelay.
func WithRunAt(at time.Time) SubmitOption {
	return func(r *SubmitRequest) { r.RunAt, r.DelaySeconds = &at, nil }
}

// WithDelay makes the task wait d (whole seconds, rounded up) after it is
// submitted. It replaces WithRunAt.
func WithDelay(d time.Duration) SubmitOption {
	s := seconds(d)
	return func(r *SubmitRequest) { r.DelaySeconds, r.RunAt = &s, nil }
}

// WithIdempotencyKey makes a submit with the same key within 24 h return
// the first task instead of making another (created is false).
func WithIdempotencyKey(key string) SubmitOption {
	return func(r *SubmitRequest) { r.IdempotencyKey = key }
}

// WithKey sets the task's fairness key, a tenant id say (default
// DefaultKey): keys share each priority by weight, and keyed limits and
// Retry-After waits name them. It follows the type's rules.
func WithKey(key string) SubmitOption {
	return func(r *SubmitRequest) { r.Key = key }
}

// WithTraceID ties the task to the caller's trace in triage's logs (default:
// the task's id).
func WithTraceID(id string) SubmitOption {
	return func(r *SubmitRequest) { r.TraceID = id }
}

// seconds rounds d away from zero to whole seconds, so a negative d stays
// negative and the deployment names the field instead of quietly using 0.
func seconds(d time.Duration) int {
	if d < 0 {
		return -seconds(-d)
	}
	return int((d + time.Second - 1) / time.Second)
}

// NewRequest builds the request Submit sends, for SubmitBatch. payload is
// taken as Submit takes it. The request is checked with ValidateRequest:
// a bad field is the *Error the deployment would have answered with.
func NewRequest(typ string, payload any, opts ...SubmitOption) (SubmitRequest, error) {
	r, err := buildRequest(typ, payload, opts)
	if err != nil {
		return r, err
	}
	return r, ValidateRequest(r)
}

// buildRequest encodes payload and applies opts, without checking the
// result: the one place a submit's payload is encoded.
func buildRequest(typ string, payload any, opts []SubmitOption) (SubmitRequest, error) {
	r := SubmitRequest{Type: typ}
	switch p := payload.(type) {
	case nil:
	case json.RawMessage:
		r.Payload = p
	case []byte:
		r.Payload = json.RawMessage(p)
	default:
		b, err := json.Marshal(p)
		if err != nil {
			return r, fmt.Errorf("encode the payload of a %q task: %w", typ, err)
		}
		r.Payload = b
	}
	for _, o := range opts {
		o(&r)
	}
	return r, nil
}

// Args is a payload type that names its task type, as River's JobArgs
// does: Kind returns the type, and the value, encoded with encoding/json,
// is the payload. It is the one interface both ends use: SubmitArgs and
// SubmitArgsBatch take the type from it, and package worker's AddWorker
// registers the handler of the same Kind, so a producer and its worker
// cannot spell a type two ways. Kind must not depend on the value (a
// worker calls it on the zero value) and must be a name the API accepts.
type Args interface {
	Kind() string
}

// ArgsItem is one task of SubmitArgsBatch: its args, which give its type
// and payload, and its options.
type ArgsItem struct {
	Args Args
	Opts []SubmitOption
}

// argsRequest builds the request of a typed submit without checking it.
// Nil args have no type to submit: that is a bad request, as a missing
// type is.
func argsRequest(args Args, opts []SubmitOption) (SubmitRequest, error) {
	if args == nil {
		return SubmitRequest{}, invalid("type", "is required: a typed submit takes it from Args.Kind, and the args are nil")
	}
	return buildRequest(args.Kind(), args, opts)
}
