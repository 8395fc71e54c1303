package triagetype

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors, one per kind of failure the API answers with. Every
// *Error matches exactly one of them with errors.Is, chosen by its Status;
// a status the API never sends (a proxy's 502, say) matches none.
var (
	ErrBadRequest   = errors.New("bad request")
	ErrUnauthorized = errors.New("unauthorized")
	ErrForbidden    = errors.New("forbidden")
	ErrNotFound     = errors.New("not found")
	ErrConflict     = errors.New("conflict")
	ErrTooLarge     = errors.New("payload too large")
	ErrTooMany      = errors.New("too many requests")
	ErrUnavailable  = errors.New("service unavailable")
	ErrInternal     = errors.New("internal server error")
)

// ErrNotImplemented is what a call answers when the deployment or the
// transport does not offer what it asks for (a server without schedules,
// a test's Transport that carries no workflows): an *Error with status
// 501 matches it.
var ErrNotImplemented = errors.New("not implemented")

// The codes of an error (Error.Code, ErrorDetail.Code): a client tells
// failures apart by them, or by the sentinel an *Error matches.
const (
	CodeBadRequest     = "bad_request"   // a body that cannot be read
	CodeInvalidJSON    = "invalid_json"  // a body that is not one JSON object
	CodeInvalidField   = "invalid_field" // a field or parameter that breaks its rule; Field names it
	CodeUnauthorized   = "unauthorized"  // no valid token
	CodeForbidden      = "forbidden"     // the token lacks the scope
	CodeNotFound       = "not_found"     // no such task, batch, workflow or schedule
	CodeConflict       = "conflict"      // the status or a concurrent change does not allow it
	CodeLimitReached   = "limit_reached" // a deployment-wide count is at its most
	CodeTooLarge       = "too_large"     // a payload or body over its limit
	CodeTooMany        = "too_many_requests"
	CodeRateLimited    = "rate_limited" // progress reported more often than allowed
	CodeUnavailable    = "unavailable"  // nothing was accepted; retry
	CodeInternal       = "internal"
	CodeNotImplemented = "not_implemented"
	CodeClientClosed   = "client_closed" // the client went away before the answer
)

// HTTP statuses the errors map from, named here so that this package
// needs no net/http.
const (
	statusCreated      = 201
	statusBadRequest   = 400
	statusUnauthorized = 401
	statusForbidden    = 403
	statusNotFound     = 404
	statusConflict     = 409
	statusTooLarge     = 413
	statusTooMany      = 429
	statusInternal     = 500
	statusNotImpl      = 501
	statusUnavailable  = 503
)

// Error is a failed request: an API error response, or the same failure
// found without a request (package direct reports the status the API
// would have answered).
type Error struct {
	// Status is the HTTP status; Code, Message and Field are the body's
	// {"code", "message", "field"}. Field names the input at fault
	// ("priority", "tasks[3].payload", "id"), when one is.
	Status  int
	Code    string
	Message string
	Field   string
	// RetryAfter is how long to wait before trying again, when the
	// failure says (429 and 503).
	RetryAfter time.Duration
	// Cause is the underlying error, when there is one to report: never
	// over HTTP, where the server keeps it to itself.
	Cause error
}

func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		msg = "error"
	}
	if e.Field != "" {
		return fmt.Sprintf("triage: %d %s: %s (field %s)", e.Status, e.Code, msg, e.Field)
	}
	return fmt.Sprintf("triage: %d %s: %s", e.Status, e.Code, msg)
}

// Unwrap gives errors.Is and errors.As the sentinel of e's Status and
// e's Cause.
func (e *Error) Unwrap() []error {
	var out []error
	if s := sentinel(e.Status); s != nil {
		out = append(out, s)
	}
	if e.Cause != nil {
		out = append(out, e.Cause)
	}
	return out
}

func sentinel(status int) error {
	switch status {
	case statusBadRequest:
		return ErrBadRequest
	case statusUnauthorized:
		return ErrUnauthorized
	case statusForbidden:
		return ErrForbidden
	case statusNotFound:
		return ErrNotFound
	case statusConflict:
		return ErrConflict
	case statusTooLarge:
		return ErrTooLarge
	case statusTooMany:
		return ErrTooMany
	case statusUnavailable:
		return ErrUnavailable
	case statusInternal:
		return ErrInternal
	case statusNotImpl:
		return ErrNotImplemented
	}
	return nil
}

// ErrorBody is the JSON shape of every API error response.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail says what went wrong, and which field when one is to blame:
// the body of an error response, and of a failed batch item.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}
