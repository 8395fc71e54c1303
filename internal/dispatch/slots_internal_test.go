package dispatch

import (
	"testing"
	"time"

	"github.com/triagehq/triage/triagetype"
)

// A delete waits for nine others at most half the lease margin (the least
// time its message stays hidden after its task finished), at most a second.
func TestDeleteHoldStaysInsideTheMargin(t *testing.T) {
	for _, tc := range []struct{ margin, want time.Duration }{
		{5 * time.Second, time.Second},
		{time.Second, 500 * time.Millisecond},
		{40 * time.Millisecond, flushEvery},
	} {
		if got := deleteHold(tc.margin); got != tc.want {
			t.Errorf("deleteHold(%v) = %v, want %v", tc.margin, got, tc.want)
		}
	}
}

// Medium and low are skipped longer after each empty receive in a row, up
// to eight times EmptyBackoff, and at once again after a receive brings
// something; high always for EmptyBackoff (it is long-polled instead).
func TestEmptyBackoffGrowsForMediumAndLow(t *testing.T) {
	c := New(nil, nil, nil, nil, Options{EmptyBackoff: 100 * time.Millisecond}, Deps{})
	skipped := func(p triagetype.Priority) time.Duration {
		return time.Until(c.emptyUntil[p]).Round(50 * time.Millisecond)
	}
	for i, want := range []time.Duration{100, 200, 400, 800, 800} {
		c.markEmpty(triagetype.Low)
		if got := skipped(triagetype.Low); got != want*time.Millisecond {
			t.Errorf("low, empty receive %d: skipped %v, want %v", i+1, got, want*time.Millisecond)
		}
		c.markEmpty(triagetype.High)
		if got := skipped(triagetype.High); got != 100*time.Millisecond {
			t.Errorf("high, empty receive %d: skipped %v, want 100ms", i+1, got)
		}
	}
	if !c.foundEmpty(triagetype.High) {
		t.Error("high not found empty after empty receives")
	}
	c.clearEmpty(triagetype.Low)
	c.markEmpty(triagetype.Low)
	if got := skipped(triagetype.Low); got != 100*time.Millisecond {
		t.Errorf("low after a receive brought something: skipped %v, want 100ms", got)
	}
}
