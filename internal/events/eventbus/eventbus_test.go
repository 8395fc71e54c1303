package eventbus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/triagehq/triage/internal/events"
	"github.com/triagehq/triage/internal/events/eventbus"
)

// bus records PutEvents calls; fail(call, entry) decides which entries
// it refuses.
type bus struct {
	calls [][]string // detail ids per call
	fail  func(call int, id string) bool
	err   error
}

func (b *bus) PutEvents(_ context.Context, in *eventbridge.PutEventsInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	if b.err != nil {
		return nil, b.err
	}
	out := &eventbridge.PutEventsOutput{}
	var ids []string
	for _, e := range in.Entries {
		var ev events.Event
		if err := json.Unmarshal([]byte(aws.ToString(e.Detail)), &ev); err != nil {
			return nil, err
		}
		if aws.ToString(e.Source) != eventbus.Source || aws.ToString(e.DetailType) != string(ev.Type) || aws.ToString(e.EventBusName) != "orders" {
			return nil, fmt.Errorf("entry %+v: wrong source, detail-type or bus", e)
		}
		ids = append(ids, ev.ID)
		r := ebtypes.PutEventsResultEntry{EventId: aws.String("eb-" + ev.ID)}
		if b.fail != nil && b.fail(len(b.calls), ev.ID) {
			r = ebtypes.PutEventsResultEntry{ErrorCode: aws.String("ThrottlingException"), ErrorMessage: aws.String("slow down")}
			out.FailedEntryCount++
		}
		out.Entries = append(out.Entries, r)
	}
	b.calls = append(b.calls, ids)
	return out, nil
}

func batch(n int) []events.Event {
	out := make([]events.Event, n)
	for i := range out {
		out[i] = events.Event{ID: fmt.Sprintf("t-%02d", i), Type: events.Completed, TaskID: "t"}
	}
	return out
}

func TestPublishBatches(t *testing.T) {
	cases := []struct {
		name    string
		n       int
		fail    func(call int, id string) bool
		err     error
		want    [][]string
		wantErr bool
	}{
		{name: "nothing", n: 0, want: nil},
		{name: "23 events in calls of 10, in order", n: 23, want: [][]string{
			{"t-00", "t-01", "t-02", "t-03", "t-04", "t-05", "t-06", "t-07", "t-08", "t-09"},
			{"t-10", "t-11", "t-12", "t-13", "t-14", "t-15", "t-16", "t-17", "t-18", "t-19"},
			{"t-20", "t-21", "t-22"},
		}},
		{name: "refused entries are put again, alone", n: 3, fail: func(call int, id string) bool { return call == 0 && id != "t-01" },
			want: [][]string{{"t-00", "t-01", "t-02"}, {"t-00", "t-02"}}},
		{name: "still refused after 3 calls: an error", n: 2, fail: func(_ int, id string) bool { return id == "t-01" },
			want: [][]string{{"t-00", "t-01"}, {"t-01"}, {"t-01"}}, wantErr: true},
		{name: "call errors are tried again too, then returned", n: 1, err: errors.New("no route"), wantErr: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := &bus{fail: c.fail, err: c.err}
			err := eventbus.New(b, "orders").Publish(context.Background(), batch(c.n))
			if (err != nil) != c.wantErr {
				t.Fatalf("error %v, want error %v", err, c.wantErr)
			}
			if !slices.EqualFunc(b.calls, c.want, slices.Equal) {
				t.Fatalf("calls %v, want %v", b.calls, c.want)
			}
		})
	}
}
