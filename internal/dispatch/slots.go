package dispatch

import (
	"sync"
	"time"

	"github.com/triagehq/triage/triagetype"
)

// slotKind says which pool a running task took its slot from.
type slotKind int

const (
	generalSlot slotKind = iota
	reservedSlot
)

// slots bounds how many tasks run at once. Reserved slots run only high
// priority work, so long low-priority tasks can never take every slot.
type slots struct {
	mu       sync.Mutex
	total    int
	general  int // free general slots
	reserved int // free reserved slots
	changed  chan struct{}
	// hold is a moving average of how long a task holds its slot (0 until
	// the first release): the turnover a receive's batch follows.
	hold time.Duration
}

func newSlots(total, reserved int) *slots {
	return &slots{total: total, general: total - reserved, reserved: reserved, changed: make(chan struct{})}
}

// turnover is how long, at the slots' recent turnover, until want general
// slots are free: the missing slots times the mean hold, spread over the
// busy slots (0 when want are free, nothing is busy or nothing was
// released yet). Reserved slots do not count: they take high work only,
// and a batch for the other queues must fit the general ones.
func (s *slots) turnover(want int) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	busy := s.total - s.general - s.reserved
	if s.general >= want || busy <= 0 || s.hold == 0 {
		return 0
	}
	return time.Duration(want-s.general) * s.hold / time.Duration(busy)
}

// free returns the free counts and a channel closed at the next release.
func (s *slots) free() (general, reserved int, released <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.general, s.reserved, s.changed
}

// take claims a slot for priority p: high prefers a reserved slot. It
// reports false when none fits.
func (s *slots) take(p triagetype.Priority) (slotKind, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p == triagetype.High && s.reserved > 0 {
		s.reserved--
		return reservedSlot, true
	}
	if s.general > 0 {
		s.general--
		return generalSlot, true
	}
	return 0, false
}

// release gives back a slot of kind k that was held for held.
func (s *slots) release(k slotKind, held time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hold == 0 {
		s.hold = held
	} else {
		s.hold += (held - s.hold) / 8 // an average over the last few releases
	}
	if k == reservedSlot {
		s.reserved++
	} else {
		s.general++
	}
	close(s.changed)
	s.changed = make(chan struct{})
}
