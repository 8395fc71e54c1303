package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/triagetype"
)

// A record of an SQS event reads as a receive of its queue would: the
// priority from the event source's queue name, the receive count, the
// send time, and triage's own attributes (reason, trace parent, and the
// first send of a copy that replaced a message).
func TestFromRecord(t *testing.T) {
	s := spec.New("rec")
	urls, dlqs := map[triagetype.Priority]string{}, map[triagetype.Priority]string{}
	for _, q := range s.Queues {
		urls[q.Priority] = "http://127.0.0.1:1/000000000000/" + q.Name
		dlqs[q.Priority] = "http://127.0.0.1:1/000000000000/" + q.DLQName
	}
	qs, err := queue.Resolve(context.Background(), nil, s, urls, dlqs)
	if err != nil {
		t.Fatal(err)
	}
	str := func(v string) *string { return &v }
	rec := events.SQSMessage{
		MessageId: "m1", ReceiptHandle: "r1", Body: `{"id":"x"}`,
		EventSourceARN: queue.ARN(urls[triagetype.Medium], "us-east-1"),
		Attributes:     map[string]string{"ApproximateReceiveCount": "3", "SentTimestamp": "1700000001000"},
		MessageAttributes: map[string]events.SQSMessageAttribute{
			queue.FirstSentAttribute:   {StringValue: str("1700000000000"), DataType: "Number"},
			queue.TraceparentAttribute: {StringValue: str("00-abc-def-01"), DataType: "String"},
		},
	}
	m, err := qs.FromRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	if m.Priority != triagetype.Medium || m.ReceiveCount != 3 || m.ReceiptHandle != "r1" || m.Traceparent != "00-abc-def-01" ||
		!m.SentAt.Equal(time.UnixMilli(1700000001000)) || !m.Origin().Equal(time.UnixMilli(1700000000000)) {
		t.Fatalf("FromRecord = %+v (origin %v)", m, m.Origin())
	}
	delete(rec.MessageAttributes, queue.FirstSentAttribute)
	if m, _ := qs.FromRecord(rec); !m.Origin().Equal(m.SentAt) {
		t.Fatalf("an original's origin is %v, want its send %v", m.Origin(), m.SentAt)
	}
	rec.EventSourceARN = "arn:aws:sqs:us-east-1:000000000000:elsewhere"
	if _, err := qs.FromRecord(rec); err == nil {
		t.Fatal("a record from no priority queue was read")
	}
}
