package direct

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/internal/enqueue"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
)

// The errors below are the API's answers to the same failures
// (internal/api): status, code, field and, in substance, message. The
// tests compare the two transports call by call.

// fieldError is the answer to a field that failed validation; prefix, for
// a batch item, is "tasks[i].".
func fieldError(err error, prefix string) *triage.Error {
	var fe *task.FieldError
	if !errors.As(err, &fe) {
		return &triage.Error{Status: http.StatusBadRequest, Code: "bad_request", Message: err.Error()}
	}
	return fe.APIError(prefix)
}

// invalid is a bad parameter other than a submit's fields.
func invalid(field, msg string) *triage.Error {
	return &triage.Error{Status: http.StatusBadRequest, Code: "invalid_field", Message: field + ": " + msg, Field: field}
}

// checkID refuses an id that could never name a task.
func checkID(id string) error {
	if fe := task.CheckID(id); fe != nil {
		return fe.APIError("")
	}
	return nil
}

// checkType refuses a malformed type parameter (name is the parameter).
func checkType(typ, name string) error {
	if typ == "" {
		return nil
	}
	if err := task.ValidateType(typ); err != nil {
		return invalid(name, err.Error())
	}
	return nil
}

// overloaded is the answer to a submit refused by backpressure.
func overloaded(err error) (*triage.Error, bool) {
	var oe *enqueue.OverloadedError
	if !errors.As(err, &oe) {
		return nil, false
	}
	return &triage.Error{Status: http.StatusTooManyRequests, Code: "too_many_requests", Message: oe.Error(), RetryAfter: oe.RetryAfter}, true
}

// notAccepted is the answer to a submit the queue or the table did not
// take: nothing was accepted, and the same call may be repeated safely
// (with the same idempotency key too).
func notAccepted(err error) (*triage.Error, bool) {
	var msg string
	switch {
	case errors.Is(err, enqueue.ErrNotSent):
		msg = "the queue did not accept the task; nothing was recorded, try again"
	case errors.Is(err, enqueue.ErrNotRecorded):
		msg = "the task could not be recorded; it was not accepted, try again"
	default:
		return nil, false
	}
	return &triage.Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: msg, RetryAfter: time.Second, Cause: err}, true
}

// taskError is the answer to a failed operation on task id.
func taskError(what, id string, err error) error {
	var se *store.StateError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound):
		return &triage.Error{Status: http.StatusNotFound, Code: "not_found", Field: "id", Message: fmt.Sprintf("no task with id %q", id)}
	case errors.As(err, &se):
		return &triage.Error{Status: http.StatusConflict, Code: "conflict", Message: se.Error()}
	case errors.Is(err, store.ErrConflict):
		return &triage.Error{Status: http.StatusConflict, Code: "conflict", Message: "the task changed while this request ran; try again", Cause: err}
	}
	return internal(what, err)
}

// internal is any other failure; unlike the API, it keeps the cause.
func internal(what string, err error) *triage.Error {
	if e, ok := notAccepted(err); ok {
		return e
	}
	return &triage.Error{Status: http.StatusInternalServerError, Code: "internal", Message: what + " failed: " + err.Error(), Cause: err}
}
