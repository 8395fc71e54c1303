package direct

import (
	"errors"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/internal/fault"
	"github.com/triagehq/triage/triagetype"
)

// public is err, an operation's *fault.Error, as the *triage.Error the
// API answers the same failure with: its status, code, field, message and
// Retry-After; unlike over HTTP, it keeps the cause, and an internal
// failure's message says what the cause was.
func public(err error) error {
	if err == nil {
		return nil
	}
	var e *fault.Error
	if !errors.As(err, &e) {
		e = fault.Internal("request", err)
	}
	pe := e.Public()
	if errors.Is(e.Kind, triagetype.ErrInternal) && e.Cause != nil {
		pe.Message += ": " + e.Cause.Error()
	}
	return pe
}

// result returns v, or no value and err as public makes it.
func result[T any](v *T, err error) (*T, error) {
	if err != nil {
		return nil, public(err)
	}
	return v, nil
}

var _ triage.Transport = (*Transport)(nil)
