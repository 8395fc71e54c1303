package counters_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/counters"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// publisher records each delivery and fails the first failFor of them.
type publisher struct {
	failFor    int
	deliveries [][]string // task ids per delivery
}

func (p *publisher) PublishChanges(_ context.Context, cs []counters.Change) error {
	var ids []string
	for _, c := range cs {
		ids = append(ids, c.New.ID)
	}
	p.deliveries = append(p.deliveries, ids)
	if len(p.deliveries) <= p.failFor {
		return errors.New("receiver down")
	}
	return nil
}

// A batch whose publishing fails is failed (so the trigger delivers it
// again) with its counters already applied; a redelivery is counted once
// and published again, in order; after the attempts budget a batch that
// still fails is given up, so the stream moves on.
func TestLambdaPublishAfterCounters(t *testing.T) {
	cases := []struct {
		name        string
		failFor     int
		wantErrs    int // deliveries that return an error
		deliveries  int // deliveries made
		budget      int
		publishings int // PublishChanges calls
	}{
		{name: "published first time", failFor: 0, deliveries: 1, budget: 3, publishings: 1},
		{name: "recovers on the third delivery", failFor: 2, wantErrs: 2, deliveries: 3, budget: 3, publishings: 3},
		{name: "given up after the budget", failFor: 99, wantErrs: 2, deliveries: 4, budget: 3, publishings: 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := stacktest.New(t)
			a := env.App(t, nil)
			pub := &publisher{failFor: c.failFor}
			a.Counters.Publish(pub, c.budget, nil)
			ev := insertEvent(t, a.Store.Item, 3)
			errs := 0
			for range c.deliveries {
				if err := a.Counters.HandleEvent(context.Background(), ev); err != nil {
					errs++
				}
			}
			if errs != c.wantErrs {
				t.Fatalf("%d of %d deliveries failed, want %d", errs, c.deliveries, c.wantErrs)
			}
			if len(pub.deliveries) != c.publishings {
				t.Fatalf("published %d times, want %d", len(pub.deliveries), c.publishings)
			}
			for _, d := range pub.deliveries {
				if len(d) != 3 || d[0] >= d[1] || d[1] >= d[2] {
					t.Fatalf("a delivery published %v, want the 3 tasks in stream order", d)
				}
			}
			snap, err := a.Counters.Read(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if got := snap.Tasks[triagetype.Queued][triagetype.Low]; got != 3 {
				t.Fatalf("queued low = %d, want 3 (counted once whatever the publisher did)", got)
			}
		})
	}
}

// insertEvent is a Lambda stream event inserting n queued tasks, in id order.
func insertEvent(t *testing.T, item func(*task.Task) (map[string]ddbtypes.AttributeValue, error), n int) events.DynamoDBEvent {
	t.Helper()
	now := time.Now().UTC()
	var recs []events.DynamoDBEventRecord
	for i := range n {
		tk := &task.Task{ID: task.NewID(now.Add(time.Duration(i) * time.Millisecond)), Type: "echo", Priority: triagetype.Low, EffectivePriority: triagetype.Low, Status: triagetype.Queued, CreatedAt: now, WaitingSince: now, Version: 1}
		av, err := item(tk)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, events.DynamoDBEventRecord{EventName: "INSERT", Change: events.DynamoDBStreamRecord{
			SequenceNumber: strconv.Itoa(2000 + i), NewImage: toEvent(t, av),
		}})
	}
	return events.DynamoDBEvent{Records: recs}
}
