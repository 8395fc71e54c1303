package dispatch

import (
	"testing"
	"time"
)

// A message that keeps landing on consumers without its handler is hidden
// longer each time, so they stop winning the race for it against the
// worker that can run it; the wait is bounded.
func TestHandBackForGrowsAndIsBounded(t *testing.T) {
	for _, tc := range []struct {
		receives int
		want     time.Duration
	}{
		{0, 2 * time.Second},
		{1, 2 * time.Second},
		{2, 4 * time.Second},
		{3, 8 * time.Second},
		{4, 8 * time.Second},
		{1000, 8 * time.Second},
	} {
		if got := handBackFor(tc.receives); got != tc.want {
			t.Errorf("receive %d: hidden %v, want %v", tc.receives, got, tc.want)
		}
	}
}
