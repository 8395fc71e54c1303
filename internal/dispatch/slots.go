package dispatch

import (
	"sync"

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
	general  int // free general slots
	reserved int // free reserved slots
	changed  chan struct{}
}

func newSlots(total, reserved int) *slots {
	return &slots{general: total - reserved, reserved: reserved, changed: make(chan struct{})}
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

func (s *slots) release(k slotKind) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k == reservedSlot {
		s.reserved++
	} else {
		s.general++
	}
	close(s.changed)
	s.changed = make(chan struct{})
}
