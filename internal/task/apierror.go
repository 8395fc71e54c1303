package task

import (
	"github.com/triagehq/triage/internal/fault"
	"github.com/triagehq/triage/triagetype"
)

// Fault is the refusal of a field that failed validation: invalid_field
// (ErrBadRequest), or too_large (ErrTooLarge) for a payload over its
// limit, naming the field after prefix ("tasks[3]." for an item of a
// batch, else "").
func (e *FieldError) Fault(prefix string) *fault.Error {
	if e.TooLarge {
		return &fault.Error{Kind: triagetype.ErrTooLarge, Code: triagetype.CodeTooLarge, Message: e.Error(), Field: prefix + e.Field}
	}
	return &fault.Error{Kind: triagetype.ErrBadRequest, Code: triagetype.CodeInvalidField, Message: e.Error(), Field: prefix + e.Field}
}

// APIError is Fault as a client sees it. The HTTP client's local checks
// answer with it, so a bad field reads the same on every path.
func (e *FieldError) APIError(prefix string) *triagetype.Error {
	return e.Fault(prefix).Public()
}
