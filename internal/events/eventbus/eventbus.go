// Package eventbus is the lifecycle event sink for an Amazon EventBridge
// bus, in a package of its own so that only the stream consumer's binary
// links the EventBridge client (the API serves events.Event too).
package eventbus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/triagehq/triage/internal/events"
)

// Source is the EventBridge source of every event; the detail-type is the
// event type, so a rule selects events with
// {"source": ["triage"], "detail-type": ["task.completed"]}, or one task's
// with {"detail": {"task_id": ["..."]}}.
const Source = "triage"

// PutEventsBatch is the most entries PutEvents takes in one call.
const PutEventsBatch = 10

// PutEventsAPI is the part of the EventBridge client the sink uses.
type PutEventsAPI interface {
	PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, opts ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error)
}

// Sink is the events.Sink that puts every event on a bus, in calls of
// PutEventsBatch entries, in order. Entries the bus refuses (throttling,
// an internal failure) are put again, up to Attempts calls; if some still
// fail, Publish fails and the stream batch is delivered again (every
// event is put again: rules see duplicates, which share the event id).
// EventBridge itself does not keep the order of what it delivers to
// targets: a target that needs one task's events in order sorts them by
// the version at the end of the id.
type Sink struct {
	api      PutEventsAPI
	bus      string
	attempts int
	backoff  time.Duration
}

// New returns the sink putting events on bus (a name or ARN).
func New(api PutEventsAPI, bus string) *Sink {
	return &Sink{api: api, bus: bus, attempts: 3, backoff: 200 * time.Millisecond}
}

// Publish puts evs on the bus (see Sink).
func (b *Sink) Publish(ctx context.Context, evs []events.Event) error {
	for start := 0; start < len(evs); start += PutEventsBatch {
		chunk := evs[start:min(start+PutEventsBatch, len(evs))]
		entries := make([]ebtypes.PutEventsRequestEntry, len(chunk))
		for i, e := range chunk {
			detail, err := json.Marshal(e)
			if err != nil {
				return fmt.Errorf("encode event %s: %w", e.ID, err)
			}
			entries[i] = ebtypes.PutEventsRequestEntry{
				EventBusName: aws.String(b.bus),
				Source:       aws.String(Source),
				DetailType:   aws.String(string(e.Type)),
				Detail:       aws.String(string(detail)),
				Time:         aws.Time(e.Time),
			}
		}
		if err := b.put(ctx, entries); err != nil {
			return err
		}
	}
	return nil
}

// put sends entries, then again those that failed.
func (b *Sink) put(ctx context.Context, entries []ebtypes.PutEventsRequestEntry) error {
	wait := b.backoff
	for try := 1; ; try++ {
		out, err := b.api.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: entries})
		var failed []ebtypes.PutEventsRequestEntry
		var reason string
		if err == nil {
			for i, r := range out.Entries {
				if r.ErrorCode != nil && i < len(entries) {
					failed = append(failed, entries[i])
					reason = aws.ToString(r.ErrorCode) + ": " + aws.ToString(r.ErrorMessage)
				}
			}
			if len(failed) == 0 {
				return nil
			}
			entries = failed
			err = fmt.Errorf("%d of the entries failed, e.g. %s", len(failed), reason)
		}
		if try >= b.attempts {
			return fmt.Errorf("put events on %s: %w", b.bus, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(fmt.Errorf("put events on %s: %w", b.bus, err), ctx.Err())
		case <-t.C:
		}
		wait *= 2
	}
}
