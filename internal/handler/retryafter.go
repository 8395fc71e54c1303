package handler

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RetryScope says what a Retry-After holds back: every task of the task's
// key (the default), of its type, or of its type and key.
type RetryScope string

// The Retry-After scopes.
const (
	ScopeKey     RetryScope = "key"
	ScopeType    RetryScope = "type"
	ScopeTypeKey RetryScope = "type_key"
)

// ParseRetryScope reads a scope's name; "" is ScopeKey.
func ParseRetryScope(s string) (RetryScope, error) {
	switch RetryScope(strings.ToLower(strings.TrimSpace(s))) {
	case "", ScopeKey:
		return ScopeKey, nil
	case ScopeType:
		return ScopeType, nil
	case ScopeTypeKey:
		return ScopeTypeKey, nil
	}
	return "", fmt.Errorf("retry scope %q: want key, type or type_key", s)
}

// RetryAfterError asks for the task, and every task of its scope, to wait
// until Until: an upstream said so (a 429 with Retry-After). The attempt
// that asked is not spent, and the scope's tasks are set aside until then
// rather than tried and refused one by one.
type RetryAfterError struct {
	Until time.Time
	Scope RetryScope
}

func (e *RetryAfterError) Error() string {
	return fmt.Sprintf("retry after %s (%s)", e.Until.UTC().Format(time.RFC3339), e.Scope)
}

// RetryAfter returns the error that holds the task's scope until at, at
// most MaxSnooze from now.
func RetryAfter(at time.Time, scope RetryScope) error {
	if scope == "" {
		scope = ScopeKey
	}
	if limit := time.Now().Add(MaxSnooze); at.After(limit) {
		at = limit
	}
	return &RetryAfterError{Until: at, Scope: scope}
}

// RetryAfterOf reports whether err asks for a Retry-After wait.
func RetryAfterOf(err error) (*RetryAfterError, bool) {
	var ra *RetryAfterError
	if errors.As(err, &ra) {
		return ra, true
	}
	return nil, false
}

// HeaderRetryScope is the response header a webhook sets beside
// Retry-After to name the scope that waits (key, type or type_key).
const HeaderRetryScope = "Triage-Retry-Scope"

// ParseRetryAfter reads a Retry-After header value, delay-seconds or an
// HTTP date, as a time after now.
func ParseRetryAfter(v string, now time.Time) (time.Time, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, false
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return now.Add(time.Duration(s) * time.Second), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return t, true
	}
	return time.Time{}, false
}

// LambdaRetryField is the field of a Lambda handler's result object that
// asks for a Retry-After wait instead of completing:
//
//	{"triage_retry_after": {"seconds": 30, "scope": "key"}}
//
// ("at": an RFC 3339 time, may replace "seconds").
const LambdaRetryField = "triage_retry_after"

// LambdaRetryAfter reads a Lambda result: a retry-after error when it is
// an object with LambdaRetryField, nil otherwise.
func LambdaRetryAfter(result []byte, now time.Time) error {
	var body map[string]json.RawMessage
	if json.Unmarshal(result, &body) != nil || body[LambdaRetryField] == nil {
		return nil
	}
	var f struct {
		Seconds *float64   `json:"seconds"`
		At      *time.Time `json:"at"`
		Scope   string     `json:"scope"`
	}
	if err := json.Unmarshal(body[LambdaRetryField], &f); err != nil {
		return Permanent(fmt.Errorf("%s: %w", LambdaRetryField, err))
	}
	scope, err := ParseRetryScope(f.Scope)
	if err != nil {
		return Permanent(fmt.Errorf("%s: %w", LambdaRetryField, err))
	}
	switch {
	case f.At != nil:
		return RetryAfter(*f.At, scope)
	case f.Seconds != nil && *f.Seconds >= 0:
		return RetryAfter(now.Add(time.Duration(*f.Seconds*float64(time.Second))), scope)
	}
	return Permanent(fmt.Errorf("%s: give seconds (>= 0) or at", LambdaRetryField))
}
