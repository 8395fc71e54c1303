package events

import (
	"context"
	"errors"
	"fmt"

	"github.com/triagehq/triage/internal/counters"
)

// Sink delivers events somewhere. Publish gets the events of one stream
// batch in stream order and returns only when they are delivered (or
// queued in-process, for the Broker); an error means the batch is to be
// delivered again, whole. A sink must therefore tolerate duplicates, and
// must give up on an event its receiver refuses for good (it is logged,
// not returned), or the batch would be retried for nothing.
type Sink interface {
	Publish(ctx context.Context, evs []Event) error
}

// FromChanges derives the events of a batch of stream changes, in order.
func FromChanges(changes []counters.Change) []Event {
	var out []Event
	for _, c := range changes {
		if c.Completed != nil {
			out = append(out, DeriveCompletion(c.Completed))
			continue
		}
		if ev, ok := Derive(c.Old, c.New); ok {
			out = append(out, ev)
		}
		if ev, ok := DeriveTick(c.Old, c.New); ok {
			out = append(out, ev)
		}
	}
	return out
}

// Fanout hands each batch's events to every sink. It is the counters
// stream consumer's publisher (counters.Keeper.Publish), so events ride
// on the one reader of the stream the deployment already has.
type Fanout struct {
	sinks []Sink
}

// NewFanout returns a Fanout over sinks (nil sinks are skipped).
func NewFanout(sinks ...Sink) *Fanout {
	f := &Fanout{}
	for _, s := range sinks {
		if s != nil {
			f.sinks = append(f.sinks, s)
		}
	}
	return f
}

// Len is the number of sinks.
func (f *Fanout) Len() int { return len(f.sinks) }

// PublishChanges derives the events of changes and publishes them to
// every sink, each sink tried even when another failed, so one failing
// sink delays the others' events by at most a redelivery. The error joins
// the sinks' errors.
func (f *Fanout) PublishChanges(ctx context.Context, changes []counters.Change) error {
	evs := FromChanges(changes)
	if len(evs) == 0 {
		return nil
	}
	var errs []error
	for _, s := range f.sinks {
		if err := s.Publish(ctx, evs); err != nil {
			errs = append(errs, fmt.Errorf("%T: %w", s, err))
		}
	}
	return errors.Join(errs...)
}
