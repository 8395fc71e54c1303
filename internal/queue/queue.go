// Package queue sends and receives triage's messages on SQS: one standard
// queue per priority, each with its own dead-letter queue.
//
// It knows queue URLs and message plumbing, nothing about task state. Batch
// calls split their input into SQS's limit of ten entries per request.
package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// SQS is the part of the SQS client the queues use.
type SQS interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, opts ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, opts ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// MaxBatch is SQS's limit of entries per batch request and messages per receive.
const MaxBatch = 10

// MaxDelay is SQS's longest DelaySeconds.
const MaxDelay = 15 * time.Minute

// MaxVisibility is SQS's longest visibility timeout.
const MaxVisibility = 12 * time.Hour

// MaxWait is the longest long-poll SQS allows on a receive.
const MaxWait = 20 * time.Second

// ReasonAttribute is the message attribute that says why a message is in a DLQ.
const ReasonAttribute = "triage-reason"

// Reasons a consumer gives when it moves a message to the DLQ because its
// task's record was still missing, or behind, OrphanAfter after the first
// send. Such a record can land later (a write slower than that), so the
// promoter's reconciliation looks these messages up again for a while and
// re-sends each whose task now waits for it. A reason starts with its
// constant.
const (
	ReasonNoTask = "no task"
	ReasonAhead  = "message version ahead of its task"
)

// FirstSentAttribute is the message attribute of a fresh copy that
// replaced a message (see Replace): the first send's time, in Unix
// milliseconds. SQS's SentTimestamp is the copy's own, so without it a
// replaced message would look newly sent.
const FirstSentAttribute = "triage-first-sent"

// TraceparentAttribute is the message attribute carrying a W3C
// traceparent: set on the messages of tasks that have one, and read from
// direct sends, whose producer may set it.
const TraceparentAttribute = "traceparent"

// MaxReasonBytes bounds a DLQ reason; longer ones are cut (never inside a
// UTF-8 character).
const MaxReasonBytes = 1024

// Queues addresses the three priority queues and their DLQs.
type Queues struct {
	sqs  SQS
	urls map[triagetype.Priority]string
	dlqs map[triagetype.Priority]string
}

// Resolve returns queues for the spec. URLs given in urls and dlqs are used
// as they are; the rest are looked up by name with GetQueueUrl.
func Resolve(ctx context.Context, client SQS, s spec.Spec, urls, dlqs map[triagetype.Priority]string) (*Queues, error) {
	q := &Queues{sqs: client, urls: map[triagetype.Priority]string{}, dlqs: map[triagetype.Priority]string{}}
	for _, qs := range s.Queues {
		for _, pair := range []struct {
			given map[triagetype.Priority]string
			name  string
			dst   map[triagetype.Priority]string
		}{{urls, qs.Name, q.urls}, {dlqs, qs.DLQName, q.dlqs}} {
			if u := pair.given[qs.Priority]; u != "" {
				pair.dst[qs.Priority] = u
				continue
			}
			out, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(pair.name)})
			if err != nil {
				return nil, fmt.Errorf("look up queue %s: %w", pair.name, err)
			}
			pair.dst[qs.Priority] = aws.ToString(out.QueueUrl)
		}
	}
	return q, nil
}

// URL is the queue URL of priority p.
func (q *Queues) URL(p triagetype.Priority) string { return q.urls[p] }

// DLQURL is the dead-letter queue URL of priority p.
func (q *Queues) DLQURL(p triagetype.Priority) string { return q.dlqs[p] }

// Outgoing is one message to send.
type Outgoing struct {
	ID    string // batch entry id; must be unique within a batch
	Body  string
	Delay time.Duration
	// Traceparent, when set, travels as the message's traceparent
	// attribute: the task's trace context, for whatever reads the queue.
	Traceparent string
	// Group, when set, is the task's fairness key, sent as the message's
	// MessageGroupId (see GroupID): SQS fair queues on standard queues.
	Group string
}

// Send sends one message to priority p's queue and returns its message id.
func (q *Queues) Send(ctx context.Context, p triagetype.Priority, body string, delay time.Duration) (string, error) {
	out, err := q.sqs.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl: aws.String(q.urls[p]), MessageBody: aws.String(body), DelaySeconds: delaySeconds(delay),
	})
	if err != nil {
		return "", fmt.Errorf("send to %s queue: %w", p, err)
	}
	return aws.ToString(out.MessageId), nil
}

// Replace sends a fresh copy of m, with body, to m's queue after delay,
// carrying m's origin (FirstSentAttribute) and trace parent, so the copy
// starts a new count of receives but not a new age. The caller deletes m
// once the copy is sent.
func (q *Queues) Replace(ctx context.Context, m Received, body string, delay time.Duration) error {
	var attrs map[string]types.MessageAttributeValue
	if m.Traceparent != "" || !m.Origin().IsZero() {
		attrs = map[string]types.MessageAttributeValue{}
	}
	if o := m.Origin(); !o.IsZero() {
		attrs[FirstSentAttribute] = types.MessageAttributeValue{DataType: aws.String("Number"), StringValue: aws.String(strconv.FormatInt(o.UnixMilli(), 10))}
	}
	if m.Traceparent != "" {
		attrs[TraceparentAttribute] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(m.Traceparent)}
	}
	_, err := q.sqs.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl: aws.String(q.urls[m.Priority]), MessageBody: aws.String(body), DelaySeconds: delaySeconds(delay),
		MessageAttributes: attrs,
	})
	if err != nil {
		return fmt.Errorf("send a copy to %s queue: %w", m.Priority, err)
	}
	return nil
}

// BatchError lists the entries a batch request could not handle.
type BatchError struct {
	Failed map[string]string // entry id -> reason
}

func (e *BatchError) Error() string {
	return fmt.Sprintf("%d batch entries failed", len(e.Failed))
}

// SendBatch sends msgs to priority p's queue, ten per request. When some
// entries fail, it returns a *BatchError naming them; the others were sent.
func (q *Queues) SendBatch(ctx context.Context, p triagetype.Priority, msgs []Outgoing) error {
	failed := map[string]string{}
	for start := 0; start < len(msgs); start += MaxBatch {
		chunk := msgs[start:min(start+MaxBatch, len(msgs))]
		entries := make([]types.SendMessageBatchRequestEntry, len(chunk))
		for i, m := range chunk {
			entries[i] = types.SendMessageBatchRequestEntry{
				Id: aws.String(m.ID), MessageBody: aws.String(m.Body), DelaySeconds: delaySeconds(m.Delay),
			}
			if m.Group != "" {
				entries[i].MessageGroupId = aws.String(GroupID(m.Group))
			}
			if m.Traceparent != "" {
				entries[i].MessageAttributes = map[string]types.MessageAttributeValue{
					TraceparentAttribute: {DataType: aws.String("String"), StringValue: aws.String(m.Traceparent)},
				}
			}
		}
		out, err := q.sqs.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(q.urls[p]), Entries: entries})
		if err != nil {
			for _, m := range chunk {
				failed[m.ID] = err.Error()
			}
			continue
		}
		for _, f := range out.Failed {
			failed[aws.ToString(f.Id)] = aws.ToString(f.Message)
		}
	}
	if len(failed) > 0 {
		return &BatchError{Failed: failed}
	}
	return nil
}

func delaySeconds(d time.Duration) int32 {
	if d <= 0 {
		return 0
	}
	return wholeSeconds(min(d, MaxDelay))
}

// wholeSeconds rounds d up to SQS's granularity of whole seconds, so a
// short wait is never rounded down to no wait at all.
func wholeSeconds(d time.Duration) int32 { return int32((d + time.Second - 1) / time.Second) }

// Received is a message taken from a queue.
type Received struct {
	Priority      triagetype.Priority
	MessageID     string
	ReceiptHandle string
	Body          string
	ReceiveCount  int
	SentAt        time.Time
	// FirstSentAt is when the first of the copies that replaced one
	// another was sent (FirstSentAttribute); zero for an original.
	FirstSentAt time.Time
	Reason      string // set on DLQ messages triage moved there
	// Traceparent is the message's W3C traceparent attribute: a direct
	// send's producer may set it to put the task in its trace.
	Traceparent string
}

// Origin is when the message was first sent: FirstSentAt for a copy made
// by Replace, SentAt otherwise (zero when SQS did not say).
func (r Received) Origin() time.Time {
	if !r.FirstSentAt.IsZero() {
		return r.FirstSentAt
	}
	return r.SentAt
}

// Receive takes up to n messages (at most ten) from priority p's queue,
// waiting up to wait for the first one (0 returns at once), and hides them
// for visibility (0 keeps the queue's default).
func (q *Queues) Receive(ctx context.Context, p triagetype.Priority, n int, wait, visibility time.Duration) ([]Received, error) {
	return q.receive(ctx, p, q.urls[p], n, wait, visibility)
}

// ReceiveDLQ takes messages from priority p's dead-letter queue.
func (q *Queues) ReceiveDLQ(ctx context.Context, p triagetype.Priority, n int, wait, visibility time.Duration) ([]Received, error) {
	return q.receive(ctx, p, q.dlqs[p], n, wait, visibility)
}

func (q *Queues) receive(ctx context.Context, p triagetype.Priority, url string, n int, wait, visibility time.Duration) ([]Received, error) {
	in := &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(url),
		MaxNumberOfMessages:         int32(min(max(n, 1), MaxBatch)),
		WaitTimeSeconds:             int32(min(max(wait, 0), MaxWait) / time.Second),
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount, types.MessageSystemAttributeNameSentTimestamp},
		MessageAttributeNames:       []string{ReasonAttribute, TraceparentAttribute, FirstSentAttribute},
	}
	if visibility > 0 {
		in.VisibilityTimeout = wholeSeconds(min(visibility, MaxVisibility))
	}
	out, err := q.sqs.ReceiveMessage(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("receive from %s: %w", url, err)
	}
	msgs := make([]Received, 0, len(out.Messages))
	for _, m := range out.Messages {
		r := Received{
			Priority: p, MessageID: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
		}
		r.ReceiveCount, _ = strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
		if ms, err := strconv.ParseInt(m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil {
			r.SentAt = time.UnixMilli(ms)
		}
		if a, ok := m.MessageAttributes[ReasonAttribute]; ok {
			r.Reason = aws.ToString(a.StringValue)
		}
		if a, ok := m.MessageAttributes[TraceparentAttribute]; ok {
			r.Traceparent = aws.ToString(a.StringValue)
		}
		if a, ok := m.MessageAttributes[FirstSentAttribute]; ok {
			if ms, err := strconv.ParseInt(aws.ToString(a.StringValue), 10, 64); err == nil {
				r.FirstSentAt = time.UnixMilli(ms)
			}
		}
		msgs = append(msgs, r)
	}
	return msgs, nil
}

// Delete removes a received message from priority p's queue.
func (q *Queues) Delete(ctx context.Context, p triagetype.Priority, receipt string) error {
	return q.delete(ctx, q.urls[p], receipt)
}

// DeleteDLQ removes a received message from priority p's DLQ.
func (q *Queues) DeleteDLQ(ctx context.Context, p triagetype.Priority, receipt string) error {
	return q.delete(ctx, q.dlqs[p], receipt)
}

func (q *Queues) delete(ctx context.Context, url, receipt string) error {
	if _, err := q.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: aws.String(receipt)}); err != nil {
		return fmt.Errorf("delete from %s: %w", url, err)
	}
	return nil
}

// DeleteBatch removes received messages from priority p's queue, ten per
// request, and returns a *BatchError naming the receipt handles that failed.
func (q *Queues) DeleteBatch(ctx context.Context, p triagetype.Priority, receipts []string) error {
	return inBatches(receipts, func(chunk []string) ([]types.BatchResultErrorEntry, error) {
		entries := make([]types.DeleteMessageBatchRequestEntry, len(chunk))
		for i, r := range chunk {
			entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(r)}
		}
		out, err := q.sqs.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(q.urls[p]), Entries: entries})
		if err != nil {
			return nil, err
		}
		return out.Failed, nil
	})
}

// inBatches sends receipts MaxBatch at a time through send, which names
// each entry by its index in the chunk and returns the entries that
// failed, and returns a *BatchError naming the receipt handles that
// failed (all of a chunk whose request failed).
func inBatches(receipts []string, send func(chunk []string) ([]types.BatchResultErrorEntry, error)) error {
	failed := map[string]string{}
	for start := 0; start < len(receipts); start += MaxBatch {
		chunk := receipts[start:min(start+MaxBatch, len(receipts))]
		bad, err := send(chunk)
		if err != nil {
			for _, r := range chunk {
				failed[r] = err.Error()
			}
			continue
		}
		for _, f := range bad {
			if i, err := strconv.Atoi(aws.ToString(f.Id)); err == nil && i < len(chunk) {
				failed[chunk[i]] = aws.ToString(f.Message)
			}
		}
	}
	if len(failed) > 0 {
		return &BatchError{Failed: failed}
	}
	return nil
}

// ChangeVisibility hides a received message for d from now (0 releases it at once).
func (q *Queues) ChangeVisibility(ctx context.Context, p triagetype.Priority, receipt string, d time.Duration) error {
	return q.changeVisibility(ctx, q.urls[p], receipt, d)
}

// ChangeVisibilityDLQ does the same for a message received from priority p's DLQ.
func (q *Queues) ChangeVisibilityDLQ(ctx context.Context, p triagetype.Priority, receipt string, d time.Duration) error {
	return q.changeVisibility(ctx, q.dlqs[p], receipt, d)
}

func (q *Queues) changeVisibility(ctx context.Context, url, receipt string, d time.Duration) error {
	_, err := q.sqs.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl: aws.String(url), ReceiptHandle: aws.String(receipt),
		VisibilityTimeout: wholeSeconds(min(max(d, 0), MaxVisibility)),
	})
	if err != nil {
		return fmt.Errorf("change visibility on %s: %w", url, err)
	}
	return nil
}

// ChangeVisibilityBatchDLQ hides messages received from priority p's DLQ
// for d from now (0 hands them back at once), ten per
// ChangeMessageVisibilityBatch request (which IAM authorizes as
// sqs:ChangeMessageVisibility), and returns a *BatchError naming the
// receipt handles that failed.
func (q *Queues) ChangeVisibilityBatchDLQ(ctx context.Context, p triagetype.Priority, receipts []string, d time.Duration) error {
	return inBatches(receipts, func(chunk []string) ([]types.BatchResultErrorEntry, error) {
		entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(chunk))
		for i, r := range chunk {
			entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{
				Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(r), VisibilityTimeout: wholeSeconds(min(max(d, 0), MaxVisibility)),
			}
		}
		out, err := q.sqs.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(q.dlqs[p]), Entries: entries})
		if err != nil {
			return nil, err
		}
		return out.Failed, nil
	})
}

// DLQCount is how many messages priority p's DLQ holds, visible or not
// (received by someone and not yet deleted or handed back): SQS's
// ApproximateNumberOfMessages plus ApproximateNumberOfMessagesNotVisible,
// one GetQueueAttributes. In SQS both are approximate and may lag changes
// by a little (fauxqs counts exactly).
func (q *Queues) DLQCount(ctx context.Context, p triagetype.Priority) (int, error) {
	names := []types.QueueAttributeName{
		types.QueueAttributeNameApproximateNumberOfMessages,
		types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
	}
	out, err := q.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(q.dlqs[p]), AttributeNames: names})
	if err != nil {
		return 0, fmt.Errorf("attributes of %s DLQ: %w", p, err)
	}
	n := 0
	for _, name := range names {
		v, _ := strconv.Atoi(out.Attributes[string(name)])
		n += v
	}
	return n, nil
}

// SendDLQ puts body on priority p's dead-letter queue with reason attached.
func (q *Queues) SendDLQ(ctx context.Context, p triagetype.Priority, body, reason string) error {
	if reason == "" {
		reason = "unspecified"
	}
	reason = task.Truncate(reason, MaxReasonBytes)
	_, err := q.sqs.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl: aws.String(q.dlqs[p]), MessageBody: aws.String(body),
		MessageAttributes: map[string]types.MessageAttributeValue{
			ReasonAttribute: {DataType: aws.String("String"), StringValue: aws.String(reason)},
		},
	})
	if err != nil {
		return fmt.Errorf("send to %s DLQ: %w", p, err)
	}
	return nil
}

// Depth is a queue's approximate message counts.
type Depth struct {
	Visible  int // ready to receive
	InFlight int // received, not yet deleted
	Delayed  int // sent with a delay that has not passed
	DLQ      int // visible in the dead-letter queue
}

// Depth reads priority p's queue and DLQ counts.
func (q *Queues) Depth(ctx context.Context, p triagetype.Priority) (Depth, error) {
	names := []types.QueueAttributeName{
		types.QueueAttributeNameApproximateNumberOfMessages,
		types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		types.QueueAttributeNameApproximateNumberOfMessagesDelayed,
	}
	main, err := q.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(q.urls[p]), AttributeNames: names})
	if err != nil {
		return Depth{}, fmt.Errorf("attributes of %s queue: %w", p, err)
	}
	dlq, err := q.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(q.dlqs[p]), AttributeNames: names[:1]})
	if err != nil {
		return Depth{}, fmt.Errorf("attributes of %s DLQ: %w", p, err)
	}
	atoi := func(m map[string]string, n types.QueueAttributeName) int {
		v, _ := strconv.Atoi(m[string(n)])
		return v
	}
	return Depth{
		Visible:  atoi(main.Attributes, names[0]),
		InFlight: atoi(main.Attributes, names[1]),
		Delayed:  atoi(main.Attributes, names[2]),
		DLQ:      atoi(dlq.Attributes, names[0]),
	}, nil
}

// IsGone reports whether err means the receipt handle or message no longer exists.
func IsGone(err error) bool {
	var rh *types.ReceiptHandleIsInvalid
	var mnf *types.MessageNotInflight
	return errors.As(err, &rh) || errors.As(err, &mnf)
}
