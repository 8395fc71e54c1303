package webhook

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/handler"
)

// A 429 with Retry-After is a wait of the named scope, not a failure.
func TestRetryAfter429(t *testing.T) {
	for _, c := range []struct {
		name, after, scope string
		want               handler.RetryScope
		wantWait           bool
	}{
		{"seconds, default scope", "7", "", handler.ScopeKey, true},
		{"type scope", "7", "type", handler.ScopeType, true},
		{"type and key", "7", "type_key", handler.ScopeTypeKey, true},
		{"http date", time.Now().Add(time.Minute).UTC().Format(http.TimeFormat), "", handler.ScopeKey, true},
		{"bad scope is a plain 429", "7", "tenant", "", false},
		{"bad value is a plain 429", "soon", "", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, _ := server(t, func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Retry-After", c.after)
				if c.scope != "" {
					w.Header().Set(handler.HeaderRetryScope, c.scope)
				}
				w.WriteHeader(http.StatusTooManyRequests)
			})
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			_, err := New(srv.URL, testSecret).Handle(ctx, testRequest())
			ra, ok := handler.RetryAfterOf(err)
			if ok != c.wantWait {
				t.Fatalf("error %v: Retry-After %v, want %v", err, ok, c.wantWait)
			}
			if ok && (ra.Scope != c.want || ra.Until.Before(time.Now().Add(5*time.Second))) {
				t.Fatalf("Retry-After %+v, want scope %s and at least 5 s away", ra, c.want)
			}
			if !ok && (err == nil || !handler.Retriable(err)) {
				t.Fatalf("plain 429: %v, want a retriable error", err)
			}
		})
	}
}
