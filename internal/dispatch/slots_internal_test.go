package dispatch

import (
	"context"
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
		c.markEmpty(triagetype.Low, false)
		if got := skipped(triagetype.Low); got != want*time.Millisecond {
			t.Errorf("low, empty receive %d: skipped %v, want %v", i+1, got, want*time.Millisecond)
		}
		c.markEmpty(triagetype.High, false)
		if got := skipped(triagetype.High); got != 100*time.Millisecond {
			t.Errorf("high, empty receive %d: skipped %v, want 100ms", i+1, got)
		}
	}
	if !c.foundEmpty(triagetype.High) {
		t.Error("high not found empty after empty receives")
	}
	c.clearEmpty(triagetype.Low)
	c.markEmpty(triagetype.Low, false)
	if got := skipped(triagetype.Low); got != 100*time.Millisecond {
		t.Errorf("low after a receive brought something: skipped %v, want 100ms", got)
	}
}

// A busy consumer's batch is sized by the general slots: the free reserved
// slot takes high work only, so it neither counts towards the batch nor
// shortens the wait for it (it did, and medium received 9 at a time).
func TestTurnoverCountsGeneralSlots(t *testing.T) {
	s := newSlots(32, 1)
	for range 31 {
		if _, ok := s.take(triagetype.Medium); !ok {
			t.Fatal("no general slot for medium")
		}
	}
	if got := s.turnover(10); got != 0 {
		t.Fatalf("turnover before any release = %v, want 0 (no hold known)", got)
	}
	for range 9 {
		s.release(generalSlot, 310*time.Millisecond)
	}
	gen, res, _ := s.free()
	if gen != 9 || res != 1 {
		t.Fatalf("free = %d general, %d reserved; want 9, 1", gen, res)
	}
	// One general slot missing, 22 busy, 310 ms held: 310/22 ms.
	if got, want := s.turnover(10), 310*time.Millisecond/22; got != want {
		t.Errorf("turnover(10) with 9 general and 1 reserved free = %v, want %v", got, want)
	}
	s.release(generalSlot, 310*time.Millisecond)
	if got := s.turnover(10); got != 0 {
		t.Errorf("turnover(10) with 10 general free = %v, want 0", got)
	}
}

// The busy consumer's wait for a batch ends on free general slots: nine
// general and the reserved one free is not ten (it waits out its timer),
// and the tenth general slot freed meanwhile ends it at once.
func TestWaitForSlotsCountsGeneralSlots(t *testing.T) {
	c := New(nil, nil, nil, nil, Options{Concurrency: 32, ReservedHigh: 1}, Deps{})
	for range 31 {
		if _, ok := c.slots.take(triagetype.Medium); !ok {
			t.Fatal("no general slot for medium")
		}
	}
	for range 9 {
		c.slots.release(generalSlot, time.Millisecond)
	}
	const d = 50 * time.Millisecond
	start := time.Now()
	gen, res := c.waitForSlots(t.Context(), 10, d)
	if waited := time.Since(start); waited < d || gen != 9 || res != 1 {
		t.Errorf("with 9 general and 1 reserved free: returned %d, %d after %v; want 9, 1 after the whole %v", gen, res, waited, d)
	}
	go func() {
		time.Sleep(10 * time.Millisecond)
		c.slots.release(generalSlot, time.Millisecond)
	}()
	// The timer is an hour and the context ends in a minute: only the
	// release can end the wait with ten free (the context's end returns
	// the nine counted before it), so no wall-clock bound is needed.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if gen, _ = c.waitForSlots(ctx, 10, time.Hour); gen != 10 {
		t.Errorf("a tenth general slot freed: returned %d general; want 10, on the release", gen)
	}
}
