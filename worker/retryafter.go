package worker

import (
	"time"

	"github.com/triagehq/triage/internal/handler"
)

// RetryScope says what a RetryAfter holds back.
type RetryScope = handler.RetryScope

// The scopes a RetryAfter can hold: every task of the task's key (the
// usual answer to a tenant's 429), of its type, or of its type and key.
const (
	ScopeKey     = handler.ScopeKey
	ScopeType    = handler.ScopeType
	ScopeTypeKey = handler.ScopeTypeKey
)

// RetryAfter makes the task, and every task of its scope, wait: for a
// time.Duration from now, or until a time.Time (at most 12 h away), as an
// upstream's Retry-After asks. No attempt is spent; the scope's tasks are
// set aside without SQS messages until then and start in submit order.
//
//	return nil, worker.RetryAfter(30*time.Second, worker.ScopeKey)
func RetryAfter[T time.Duration | time.Time](v T, scope RetryScope) error {
	switch x := any(v).(type) {
	case time.Duration:
		return handler.RetryAfter(time.Now().Add(x), scope)
	case time.Time:
		return handler.RetryAfter(x, scope)
	}
	panic("unreachable")
}
