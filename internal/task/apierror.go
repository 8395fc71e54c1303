package task

import "github.com/triagehq/triage/triagetype"

// APIError is the answer the API gives to a field that failed validation:
// 400 invalid_field, or 413 too_large for a payload over its limit, naming
// the field after prefix ("tasks[3]." for an item of a batch, else "").
// The HTTP client's local check and the direct transport answer with it,
// so a bad field reads the same on every path.
func (e *FieldError) APIError(prefix string) *triagetype.Error {
	if e.TooLarge {
		return &triagetype.Error{Status: 413, Code: triagetype.CodeTooLarge, Message: e.Error(), Field: prefix + e.Field}
	}
	return &triagetype.Error{Status: 400, Code: triagetype.CodeInvalidField, Message: e.Error(), Field: prefix + e.Field}
}
