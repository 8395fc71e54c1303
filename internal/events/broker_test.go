package events_test

import (
	"context"
	"testing"

	"github.com/triagehq/triage/internal/events"
)

func evs(types ...events.Type) []events.Event {
	out := make([]events.Event, len(types))
	for i, t := range types {
		out[i] = events.Event{ID: string(rune('a' + i)), Type: t, TaskID: "t1"}
	}
	return out
}

// A subscriber gets the events its filter selects, in order.
func TestBrokerFilters(t *testing.T) {
	b := events.NewBroker(8)
	all := b.Subscribe(events.Filter{})
	done := b.Subscribe(events.Filter{Types: []events.Type{events.Completed}})
	other := b.Subscribe(events.Filter{TaskID: "t2"})
	_ = b.Publish(context.Background(), evs(events.Submitted, events.Started, events.Completed))
	if got := drain(all); len(got) != 3 || got[0].Type != events.Submitted || got[2].Type != events.Completed {
		t.Fatalf("unfiltered subscriber got %v", got)
	}
	if got := drain(done); len(got) != 1 || got[0].Type != events.Completed {
		t.Fatalf("completed-only subscriber got %v", got)
	}
	if got := drain(other); len(got) != 0 {
		t.Fatalf("other task's subscriber got %v", got)
	}
}

// A subscriber that does not keep up is dropped with a reason; Publish
// never blocks, and the others keep receiving.
func TestBrokerDropsSlowSubscriber(t *testing.T) {
	b := events.NewBroker(2)
	slow := b.Subscribe(events.Filter{})
	fast := b.Subscribe(events.Filter{})
	for range 3 {
		_ = b.Publish(context.Background(), evs(events.Submitted)) // returns although slow never reads
		if got := drain(fast); len(got) != 1 {
			t.Fatalf("fast subscriber got %d events, want 1", len(got))
		}
	}
	n := 0
	for range slow.C { // closed after the two buffered events
		n++
	}
	if n != 2 || slow.Reason() != events.ReasonSlow {
		t.Fatalf("slow subscriber read %d events, reason %q; want 2 and %q", n, slow.Reason(), events.ReasonSlow)
	}
	if b.Subscribers() != 1 {
		t.Fatalf("%d subscribers left, want 1", b.Subscribers())
	}
	fast.Close()
	fast.Close() // harmless
	if _, open := <-fast.C; open || fast.Reason() != "" || b.Subscribers() != 0 {
		t.Fatalf("after Close: channel open %v, reason %q, subscribers %d", open, fast.Reason(), b.Subscribers())
	}
}

// drain reads what is buffered without waiting.
func drain(s *events.Subscription) []events.Event {
	var out []events.Event
	for {
		select {
		case e, ok := <-s.C:
			if !ok {
				return out
			}
			out = append(out, e)
		default:
			return out
		}
	}
}
