package counters

import (
	"testing"
	"time"

	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

func TestWaitBucket(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int
	}{
		{0, 0}, {time.Millisecond, 0}, {1500 * time.Microsecond, 1}, {2 * time.Millisecond, 1},
		{3 * time.Millisecond, 2}, {10 * time.Millisecond, 4}, {time.Second, 10}, {10 * time.Second, 14},
		{35 * time.Minute, 22}, {time.Hour, 22}, {48 * time.Hour, 22},
	} {
		got := WaitBucket(c.d)
		if got != c.want {
			t.Errorf("WaitBucket(%v) = %d, want %d", c.d, got, c.want)
		}
		if c.d <= WaitBucketUpper(WaitBuckets-2) && c.d > WaitBucketUpper(got) {
			t.Errorf("%v is above its bucket's upper bound %v", c.d, WaitBucketUpper(got))
		}
		if got > 0 && c.d <= WaitBucketUpper(got-1) {
			t.Errorf("%v belongs in a lower bucket than %d", c.d, got)
		}
	}
}

func TestHistogramQuantiles(t *testing.T) {
	var h histogram
	if h.quantile(0.5) != 0 {
		t.Fatal("an empty histogram has a median")
	}
	h[WaitBucket(10*time.Millisecond)] = 98 // (8, 16] ms
	h[WaitBucket(10*time.Second)] = 2       // (8.2, 16.4] s
	if got := h.quantile(0.5); got != 16*time.Millisecond {
		t.Errorf("p50 = %v, want 16ms", got)
	}
	if got := h.quantile(0.98); got != 16*time.Millisecond {
		t.Errorf("p98 = %v, want 16ms (98 of 100 waits are in the 16 ms bucket)", got)
	}
	if got := h.quantile(0.99); got != 16384*time.Millisecond {
		t.Errorf("p99 = %v, want 16.384s", got)
	}
}

// A claim's wait is counted from a waiting task moved to executing and
// from a task recorded executing (an adopted direct send); other changes
// count none.
func TestClaimWait(t *testing.T) {
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	started := created.Add(30 * time.Millisecond)
	queued := &task.Task{Priority: triagetype.Low, Status: triagetype.Queued, CreatedAt: created}
	running := &task.Task{Priority: triagetype.Low, Status: triagetype.Executing, CreatedAt: created, StartedAt: &started}
	done := &task.Task{Priority: triagetype.Low, Status: triagetype.Completed, CreatedAt: created, StartedAt: &started}
	for _, c := range []struct {
		name string
		c    Change
		ok   bool
	}{
		{"claimed", Change{Old: queued, New: running}, true},
		{"recorded claimed", Change{New: running}, true},
		{"completed", Change{Old: running, New: done}, false},
		{"recorded queued", Change{New: queued}, false},
	} {
		minute, attr, ok := claimWait(c.c)
		if ok != c.ok || ok && (minute != started.Unix()/60 || attr != waitAttr(triagetype.Low, WaitBucket(30*time.Millisecond))) {
			t.Errorf("%s: claimWait = %d, %q, %t; want ok %t", c.name, minute, attr, ok, c.ok)
		}
	}
}
