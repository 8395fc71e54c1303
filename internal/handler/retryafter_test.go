package handler

import (
	"testing"
	"time"
)

func TestLambdaRetryAfter(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	at := now.Add(time.Minute).Format(time.RFC3339)
	for _, c := range []struct {
		name, body string
		until      time.Time
		scope      RetryScope
		plain      bool // not a Retry-After (a result)
		permanent  bool
	}{
		{"result", `{"ok":true}`, time.Time{}, "", true, false},
		{"not an object", `[1]`, time.Time{}, "", true, false},
		{"seconds", `{"triage_retry_after":{"seconds":30}}`, now.Add(30 * time.Second), ScopeKey, false, false},
		{"at with type scope", `{"triage_retry_after":{"at":"` + at + `","scope":"type"}}`, now.Add(time.Minute), ScopeType, false, false},
		{"bad scope", `{"triage_retry_after":{"seconds":1,"scope":"x"}}`, time.Time{}, "", false, true},
		{"no time", `{"triage_retry_after":{}}`, time.Time{}, "", false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := LambdaRetryAfter([]byte(c.body), now)
			if c.plain {
				if err != nil {
					t.Fatalf("got %v, want a plain result", err)
				}
				return
			}
			if c.permanent {
				if err == nil || Retriable(err) {
					t.Fatalf("got %v, want a permanent error", err)
				}
				return
			}
			ra, ok := RetryAfterOf(err)
			if !ok || !ra.Until.Equal(c.until) || ra.Scope != c.scope {
				t.Fatalf("got %v, want until %v scope %s", err, c.until, c.scope)
			}
		})
	}
}
