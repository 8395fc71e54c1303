package consumerapp_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/triagehq/triage/internal/app/consumerapp"
	"github.com/triagehq/triage/internal/eventsource"
	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/triagetype"
)

// An SQS event is read as one, anything else as a schedule's; the answer
// to an SQS event is exactly Lambda's batch response.
func TestInvocationAndResponseShapes(t *testing.T) {
	var in consumerapp.Invocation
	if err := json.Unmarshal([]byte(`{"Records":[{"messageId":"m1","eventSource":"aws:sqs","body":"{}"}]}`), &in); err != nil {
		t.Fatal(err)
	}
	if in.SQS == nil || len(in.SQS.Records) != 1 || in.SQS.Records[0].MessageId != "m1" {
		t.Errorf("SQS event read as %+v", in)
	}
	var sched consumerapp.Invocation
	if err := json.Unmarshal([]byte(`{"source":"aws.events","detail-type":"Scheduled Event"}`), &sched); err != nil {
		t.Fatal(err)
	}
	if sched.SQS != nil || sched.Other.DetailType != "Scheduled Event" {
		t.Errorf("scheduled event read as %+v", sched)
	}
	b, err := json.Marshal(consumerapp.Response{SQS: &events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{{ItemIdentifier: "m1"}}}})
	if err != nil || string(b) != `{"batchItemFailures":[{"itemIdentifier":"m1"}]}` {
		t.Errorf("SQS response %s (%v)", b, err)
	}
	b, err = json.Marshal(consumerapp.Response{Summary: consumerapp.LambdaSummary{WorkerID: "w", PolledMS: 3}})
	if err != nil || string(b) != `{"worker_id":"w","polled_ms":3}` {
		t.Errorf("scheduled response %s (%v)", b, err)
	}
}

// A record the local event source makes of a received message reads back
// as the message a receive of that queue returns; a record of another
// queue is refused.
func TestRecordRoundTrip(t *testing.T) {
	s := spec.New("acme")
	urls, dlqs := map[triagetype.Priority]string{}, map[triagetype.Priority]string{}
	for _, q := range s.Queues {
		urls[q.Priority] = "https://sqs.eu-west-1.amazonaws.com/123456789012/" + q.Name
		dlqs[q.Priority] = "https://sqs.eu-west-1.amazonaws.com/123456789012/" + q.DLQName
	}
	qs, err := queue.Resolve(context.Background(), nil, s, urls, dlqs)
	if err != nil {
		t.Fatal(err)
	}
	m := types.Message{
		MessageId: aws.String("m1"), ReceiptHandle: aws.String("rh"), Body: aws.String(`{"id":"x","v":1}`),
		Attributes: map[string]string{"ApproximateReceiveCount": "3", "SentTimestamp": "1700000000123"},
		MessageAttributes: map[string]types.MessageAttributeValue{
			queue.TraceparentAttribute: {DataType: aws.String("String"), StringValue: aws.String("00-abc-def-01")},
		},
	}
	arn := queue.ARN(urls[triagetype.Medium], "us-east-1")
	if arn != "arn:aws:sqs:eu-west-1:123456789012:acme-medium" {
		t.Errorf("ARN %s", arn)
	}
	got, err := qs.FromRecord(eventsource.Record(m, arn, "eu-west-1"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Priority != triagetype.Medium || got.MessageID != "m1" || got.ReceiptHandle != "rh" || got.Body != `{"id":"x","v":1}` ||
		got.ReceiveCount != 3 || got.SentAt.UnixMilli() != 1700000000123 || got.Traceparent != "00-abc-def-01" {
		t.Errorf("record read back as %+v", got)
	}
	if _, err := qs.FromRecord(eventsource.Record(m, "arn:aws:sqs:eu-west-1:123456789012:other", "eu-west-1")); err == nil {
		t.Error("a record of another queue was read as one of triage's")
	}
}
