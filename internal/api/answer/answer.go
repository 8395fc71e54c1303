// Package answer is how the HTTP API answers the submit service
// (internal/submit): the HTTP status of each kind of refusal, and of an
// accepted submit. The API writes its responses with it, and the direct
// transport returns the *triage.Error the API would have answered with
// from it, so a request gets the same status on both transports while the
// shared submit service speaks no HTTP.
package answer

import (
	"errors"
	"net/http"

	"github.com/triagehq/triage/internal/submit"
	"github.com/triagehq/triage/triagetype"
)

// kinds maps each refusal kind to its HTTP status. triagetype.Error maps
// a status back to its kind (Unwrap); TestStatusesRoundTrip checks the two
// agree.
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

// Status is the HTTP status of a failure of kind (one of triagetype's
// sentinels): 500 for any other.
func Status(kind error) int {
	for _, k := range kinds {
		if errors.Is(kind, k.kind) {
			return k.status
		}
	}
	return http.StatusInternalServerError
}

// OutcomeStatus is the HTTP status of one submit's answer: 201 for a new
// task, 200 for the task of an earlier request with the same idempotency
// key, else the refusal's.
func OutcomeStatus(o submit.Outcome) int {
	switch {
	case o.Err != nil:
		return Status(o.Err.Kind)
	case o.Created:
		return http.StatusCreated
	}
	return http.StatusOK
}

// Error is the public error a refusal answers with: the API's status,
// code, message, field and Retry-After, and the cause (which the HTTP API
// never sends; the direct transport keeps it for its caller).
func Error(r *submit.Refused) *triagetype.Error {
	return &triagetype.Error{Status: Status(r.Kind), Code: r.Code, Message: r.Message, Field: r.Field, RetryAfter: r.RetryAfter, Cause: r.Cause}
}
