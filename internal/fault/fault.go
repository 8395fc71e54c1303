// Package fault is the refusal every operation of triage answers with, in
// no transport's terms: a kind (one of triagetype's sentinels), the wire
// code, the field at fault, a message, how long to wait before trying
// again, and the underlying cause.
//
// The services (internal/service, internal/submit, internal/schedule)
// return *Error; the HTTP API writes it as a status and an ErrorBody, and
// the direct transport returns its Public form. Status is the one mapping
// from kind to HTTP status, so a refusal carries the same status on both
// transports. Cause is never sent over HTTP.
package fault

import (
	"errors"
	"net/http"
	"time"

	"github.com/triagehq/triage/triagetype"
)

// Error is a refused or failed operation. Kind is what the caller's error
// matches with errors.Is; Code, Message and Field are the error body.
type Error struct {
	Kind    error
	Code    string
	Message string
	// Field names the input at fault ("priority", "tasks[3].payload",
	// "id"), when one is.
	Field string
	// RetryAfter is how long to wait before trying again, when the
	// refusal says (ErrTooMany, ErrUnavailable).
	RetryAfter time.Duration
	// Cause is the underlying failure, for the caller's log.
	Cause error
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Unwrap lets errors.Is match Kind and Cause.
func (e *Error) Unwrap() []error { return []error{e.Kind, e.Cause} }

// Public is e as a client sees it: the HTTP API's status for its kind,
// its code, message, field and Retry-After, and its cause.
func (e *Error) Public() *triagetype.Error {
	return &triagetype.Error{Status: Status(e.Kind), Code: e.Code, Message: e.Message, Field: e.Field, RetryAfter: e.RetryAfter, Cause: e.Cause}
}

// kinds maps each kind to its HTTP status. triagetype.Error maps a
// status back to its kind (Unwrap); TestStatusesRoundTrip checks that the
// two agree.
var kinds = []struct {
	kind   error
	status int
}{
	{triagetype.ErrBadRequest, http.StatusBadRequest},
	{triagetype.ErrUnauthorized, http.StatusUnauthorized},
	{triagetype.ErrForbidden, http.StatusForbidden},
	{triagetype.ErrNotFound, http.StatusNotFound},
	{triagetype.ErrConflict, http.StatusConflict},
	{triagetype.ErrTooLarge, http.StatusRequestEntityTooLarge},
	{triagetype.ErrTooMany, http.StatusTooManyRequests},
	{triagetype.ErrUnavailable, http.StatusServiceUnavailable},
	{triagetype.ErrInternal, http.StatusInternalServerError},
	{triagetype.ErrNotImplemented, http.StatusNotImplemented},
}

// Status is the HTTP status of a failure of kind: 500 for a kind that is
// none of triagetype's sentinels.
func Status(kind error) int {
	for _, k := range kinds {
		if errors.Is(kind, k.kind) {
			return k.status
		}
	}
	return http.StatusInternalServerError
}

// Invalid is a field or parameter that breaks its rule: ErrBadRequest,
// invalid_field, the message prefixed with the field's name.
func Invalid(field, msg string) *Error {
	return &Error{Kind: triagetype.ErrBadRequest, Code: triagetype.CodeInvalidField, Field: field, Message: field + ": " + msg}
}

// TooLarge is a field over its size limit: ErrTooLarge, too_large.
func TooLarge(field, msg string) *Error {
	return &Error{Kind: triagetype.ErrTooLarge, Code: triagetype.CodeTooLarge, Field: field, Message: field + ": " + msg}
}

// NotFound is a missing task, batch, workflow or schedule, named by field.
func NotFound(field, msg string) *Error {
	return &Error{Kind: triagetype.ErrNotFound, Code: triagetype.CodeNotFound, Field: field, Message: msg}
}

// Conflict is an operation its target's state does not allow.
func Conflict(field, msg string, cause error) *Error {
	return &Error{Kind: triagetype.ErrConflict, Code: triagetype.CodeConflict, Field: field, Message: msg, Cause: cause}
}

// NotImplemented is an operation this deployment does not offer.
func NotImplemented(msg string) *Error {
	return &Error{Kind: triagetype.ErrNotImplemented, Code: triagetype.CodeNotImplemented, Message: msg}
}

// Internal is any other failure of what ("list tasks"): the message says
// what failed, the cause why.
func Internal(what string, cause error) *Error {
	return &Error{Kind: triagetype.ErrInternal, Code: triagetype.CodeInternal, Message: what + " failed", Cause: cause}
}
