package direct

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/internal/api/answer"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/submit"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// The errors below are the API's answers to the same failures
// (internal/api): status, code, field and, in substance, message. The
// tests compare the two transports call by call.

// invalid is a bad parameter other than a submit's fields.
func invalid(field, msg string) *triage.Error {
	return &triage.Error{Status: http.StatusBadRequest, Code: triagetype.CodeInvalidField, Message: field + ": " + msg, Field: field}
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

// taskError is the answer to a failed operation on task id.
func taskError(what, id string, err error) error {
	var se *store.StateError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound):
		return &triage.Error{Status: http.StatusNotFound, Code: triagetype.CodeNotFound, Field: "id", Message: fmt.Sprintf("no task with id %q", id)}
	case errors.As(err, &se):
		return &triage.Error{Status: http.StatusConflict, Code: triagetype.CodeConflict, Message: se.Error()}
	case errors.Is(err, store.ErrConflict):
		return &triage.Error{Status: http.StatusConflict, Code: triagetype.CodeConflict, Message: "the task changed while this request ran; try again", Cause: err}
	}
	return internal(what, err)
}

// internal is any other failure; unlike the API, it keeps the cause.
func internal(what string, err error) *triage.Error {
	if e := submit.Refusal(err); errors.Is(e.Kind, triagetype.ErrUnavailable) {
		return answer.Error(e)
	}
	return &triage.Error{Status: http.StatusInternalServerError, Code: triagetype.CodeInternal, Message: what + " failed: " + err.Error(), Cause: err}
}
