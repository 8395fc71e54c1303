package dispatch

import (
	"math/rand/v2"
	"time"

	"github.com/triagehq/triage/internal/task"
)

// Backoff is the retry wait of one priority: exponential from Base, capped
// at Max, with up to Jitter (a fraction) taken off at random so retries of
// many tasks spread out. Waits round up to whole seconds, SQS's granularity.
// With Jitter at most 0.5, each wait is longer than the one before until the
// cap is reached.
type Backoff struct {
	Base   time.Duration
	Max    time.Duration
	Jitter float64
}

// DefaultBackoff follows the seed design's per-priority caps: high tasks
// retry within 10 s, medium within 30 s, low within 60 s.
func DefaultBackoff() map[task.Priority]Backoff {
	return map[task.Priority]Backoff{
		task.High:   {Base: time.Second, Max: 10 * time.Second, Jitter: 0.25},
		task.Medium: {Base: time.Second, Max: 30 * time.Second, Jitter: 0.25},
		task.Low:    {Base: time.Second, Max: 60 * time.Second, Jitter: 0.25},
	}
}

// Wait returns the wait before the retry that follows failed attempt n (1-based).
func (b Backoff) Wait(n int, rng *rand.Rand) time.Duration {
	d := b.Base
	for i := 1; i < n && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	if b.Jitter > 0 {
		d -= time.Duration(rng.Float64() * b.Jitter * float64(d))
	}
	return (d + time.Second - 1).Truncate(time.Second)
}
