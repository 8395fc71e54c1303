package dispatch

import (
	"testing"
	"time"

	"github.com/triagehq/triage/internal/control"
)

// TestRateDone: when a rate-limited scope's window releaser may stop (the
// invariant in aside.go): never while the scope can run and holds tasks or
// before its first claim, nor while this consumer's last set-aside there is
// younger than rateLead windows before the last window it claimed (that
// window's claim may predate the hold); always once the scope cannot run.
func TestRateDone(t *testing.T) {
	claimed := time.Date(2026, 11, 26, 12, 0, 10, 0, time.UTC)
	const window = time.Second
	cases := []struct {
		name     string
		w        control.RateHeld
		claimed  time.Time
		lastHold time.Time
		stop     bool
	}{
		{"paused scope", control.RateHeld{Runnable: false, Held: true}, claimed, claimed, true},
		{"holds tasks", control.RateHeld{Runnable: true, Held: true}, claimed, time.Time{}, false},
		{"nothing claimed yet", control.RateHeld{Runnable: true}, time.Time{}, time.Time{}, false},
		{"hold younger than the claim's reach", control.RateHeld{Runnable: true}, claimed, claimed.Add(-rateLead*window + time.Millisecond), false},
		{"hold at the claim's reach", control.RateHeld{Runnable: true}, claimed, claimed.Add(-rateLead * window), false},
		{"hold older than the claim's reach", control.RateHeld{Runnable: true}, claimed, claimed.Add(-rateLead*window - time.Millisecond), true},
		{"never held here", control.RateHeld{Runnable: true}, claimed, time.Time{}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.w.Window = window
			c := &Consumer{}
			st := &rateState{lastHold: tc.lastHold}
			c.rates = map[string]*rateState{"key#k": st}
			if got := c.rateDone("key#k", st, tc.w, tc.claimed); got != tc.stop {
				t.Fatalf("rateDone = %v, want %v", got, tc.stop)
			}
			if _, running := c.rates["key#k"]; running == tc.stop {
				t.Fatalf("releaser still registered = %v after rateDone said stop = %v", running, tc.stop)
			}
		})
	}
}
