package events

import (
	"context"
	"sync"
)

// DefaultBuffer is a subscriber's buffer when NewBroker is given none.
const DefaultBuffer = 1024

// Broker is the in-process Sink behind Server-Sent Events: it copies each
// event to every subscriber whose filter selects it. It never blocks the
// stream consumer: each subscriber has a bounded buffer, and a subscriber
// whose buffer is full is dropped (its channel closed, with Reason set) so
// it can tell its client why the stream ended; the client reconnects and
// reads what it missed from the API.
type Broker struct {
	buffer int

	mu   sync.Mutex
	subs map[*Subscription]struct{}
}

// NewBroker returns a broker giving each subscriber buffer events of slack
// (DefaultBuffer if zero or less).
func NewBroker(buffer int) *Broker {
	if buffer <= 0 {
		buffer = DefaultBuffer
	}
	return &Broker{buffer: buffer, subs: map[*Subscription]struct{}{}}
}

// Subscription is one subscriber's stream of events.
type Subscription struct {
	// C carries the selected events in publish order. It is closed when the
	// subscriber is dropped or cancelled.
	C <-chan Event

	c      chan Event
	filter Filter
	b      *Broker
	reason string // why C was closed by the broker; guarded by b.mu
}

// ReasonSlow is the Reason of a subscriber dropped for falling behind.
const ReasonSlow = "subscriber too slow: buffer full, events dropped; reconnect and read the tasks' current state"

// Subscribe starts a subscription to the events f selects; Close ends it.
func (b *Broker) Subscribe(f Filter) *Subscription {
	c := make(chan Event, b.buffer)
	s := &Subscription{C: c, c: c, filter: f, b: b}
	b.mu.Lock()
	b.subs[s] = struct{}{}
	b.mu.Unlock()
	return s
}

// Subscribers is the number of live subscriptions.
func (b *Broker) Subscribers() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs)
}

// Close ends the subscription; C is closed. Closing twice is harmless.
func (s *Subscription) Close() {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	if _, ok := s.b.subs[s]; ok {
		delete(s.b.subs, s)
		close(s.c)
	}
}

// Reason says why the broker closed C ("" if it did not).
func (s *Subscription) Reason() string {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	return s.reason
}

// Publish copies evs to the subscribers. It never fails and never waits.
func (b *Broker) Publish(_ context.Context, evs []Event) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		for _, e := range evs {
			if !s.filter.Match(e) {
				continue
			}
			select {
			case s.c <- e:
			default:
				s.reason = ReasonSlow
				delete(b.subs, s)
				close(s.c)
			}
			if s.reason != "" {
				break
			}
		}
	}
	return nil
}
