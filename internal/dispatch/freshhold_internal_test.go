package dispatch

import (
	"testing"
	"time"

	"github.com/triagehq/triage/internal/queue"
)

// Only an original message on its first receive, younger than recordLag,
// is held, and never longer than recordLag.
func TestFreshHold(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		m    queue.Received
		want time.Duration
	}{
		{"fresh", queue.Received{ReceiveCount: 1, SentAt: now.Add(-10 * time.Millisecond)}, 20 * time.Millisecond},
		{"just sent", queue.Received{ReceiveCount: 1, SentAt: now}, recordLag},
		{"sent ahead of this clock", queue.Received{ReceiveCount: 1, SentAt: now.Add(time.Second)}, recordLag},
		{"old enough", queue.Received{ReceiveCount: 1, SentAt: now.Add(-recordLag)}, 0},
		{"a backlog's", queue.Received{ReceiveCount: 1, SentAt: now.Add(-time.Minute)}, 0},
		{"received before", queue.Received{ReceiveCount: 2, SentAt: now}, 0},
		{"a copy", queue.Received{ReceiveCount: 1, SentAt: now, FirstSentAt: now.Add(-time.Minute)}, 0},
		{"no send time", queue.Received{ReceiveCount: 1}, 0},
	} {
		if got := freshHold(tc.m, now); got != tc.want {
			t.Errorf("%s: freshHold = %v, want %v", tc.name, got, tc.want)
		}
	}
}
