package triage

import (
	"errors"

	"github.com/triagehq/triage/internal/task"
)

// ValidateRequest checks r with the code every deployment runs on a
// submit, and returns nil or the *Error the deployment would answer with:
// ErrBadRequest or ErrTooLarge, its Field naming the field at fault. Only
// the deployment can check what depends on it: its task types
// (TRIAGE_TYPES) and its queues' depth.
//
// NewRequest, and so Submit, call it, so a bad submit fails the same way,
// before anything is sent, on every transport.
func ValidateRequest(r SubmitRequest) error {
	err := (*task.Request)(&r).Validate()
	var fe *task.FieldError
	if errors.As(err, &fe) {
		return fe.APIError("")
	}
	return err
}
