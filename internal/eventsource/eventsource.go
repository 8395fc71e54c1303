// Package eventsource is a local stand-in for Lambda's SQS event source
// mappings, so `triage dev` and the tests start the consumer the way AWS
// does and run the code that runs there.
//
// For each queue a poller long-polls with the mapping's batch size, gathers
// records for its batching window, and invokes a function handler with the
// SQS event JSON Lambda sends (marshalled from events.SQSEvent, read by the
// handler through aws-lambda-go's own JSON path). When the invocation
// returns, it deletes every record the response does not list as a batch
// item failure, as Lambda does with ReportBatchItemFailures; a failed
// invocation deletes nothing, and so does a response naming a record the
// event did not carry. Each mapping keeps at most MaxConcurrency
// invocations running. An invocation runs in an environment, started on
// first need (a cold start) and reused after, one invocation at a time.
//
// What it does not model: Lambda's pollers scale from five per mapping
// and each invocation is a process of its own; here one poller per queue
// feeds invocations in one process.
package eventsource

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/internal/spec"
)

// SQS is the part of the SQS client the event source uses.
type SQS interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

// Source is the event source mappings of one function: one per queue, all
// with the same settings. Its zero values get the defaults in parentheses.
type Source struct {
	SQS SQS
	// Queues are the URLs of the queues that start the function.
	Queues []string
	// Mapping is each mapping's batch size, window and maximum concurrency
	// (spec.DefaultMapping()).
	Mapping spec.Mapping
	// NewFunction starts an environment: the function's handler as Lambda
	// would run it (lambda.NewHandler of the function's handler func).
	NewFunction func() (lambda.Handler, error)
	// Timeout is the function timeout: each invocation's context ends then
	// (5 min, the consumer function's default).
	Timeout time.Duration
	// Wait is the pollers' long-poll wait (2 s). Lambda's pollers wait
	// 20 s; a message sent during a long poll is returned at once either
	// way, so this only bounds how long a shutdown waits for a poll.
	Wait time.Duration
	// Region names the records' region when a queue URL names none
	// ("us-east-1").
	Region string
	Log    *slog.Logger // (none)

	stats counters
	envs  envPool
}

// Stats are what an event source has done so far.
type Stats struct {
	Receives    int64 // receive requests its pollers made
	Invocations int64 // events it invoked the function with
	ColdStarts  int64 // environments it started
	Failures    int64 // records listed as batch item failures (or of failed invocations)
	Deleted     int64 // records it deleted after their invocation
	// Billed is the invocations' durations, each rounded up to the
	// millisecond as Lambda bills them: from the handler's call to its
	// return, the function's own work only.
	Billed time.Duration
}

type counters struct {
	receives, invocations, coldStarts, failures, deleted atomic.Int64
	billedMS                                             atomic.Int64
}

// Stats returns the counts so far.
func (s *Source) Stats() Stats {
	return Stats{
		Receives: s.stats.receives.Load(), Invocations: s.stats.invocations.Load(), ColdStarts: s.stats.coldStarts.Load(),
		Failures: s.stats.failures.Load(), Deleted: s.stats.deleted.Load(),
		Billed: time.Duration(s.stats.billedMS.Load()) * time.Millisecond,
	}
}

func (s *Source) mapping() spec.Mapping {
	m, def := s.Mapping, spec.DefaultMapping()
	if m.BatchSize <= 0 {
		m.BatchSize = def.BatchSize
	}
	if m.MaxConcurrency <= 0 {
		m.MaxConcurrency = def.MaxConcurrency
	}
	return m
}

// Run polls every queue until ctx ends, then waits for the invocations
// under way (their context ends with ctx, so the function drains) and
// returns.
func (s *Source) Run(ctx context.Context) error {
	if s.NewFunction == nil || s.SQS == nil {
		return errors.New("eventsource: SQS and NewFunction are required")
	}
	var wg sync.WaitGroup
	for _, u := range s.Queues {
		wg.Add(1)
		go func() { defer wg.Done(); s.poll(ctx, u, &wg) }()
	}
	wg.Wait()
	return nil
}

// poll is one mapping's poller: it receives while the mapping has room for
// another invocation and starts one per batch.
func (s *Source) poll(ctx context.Context, url string, wg *sync.WaitGroup) {
	m := s.mapping()
	room := make(chan struct{}, m.MaxConcurrency)
	for ctx.Err() == nil {
		select {
		case room <- struct{}{}:
		case <-ctx.Done():
			return
		}
		msgs := s.batch(ctx, url, m)
		if len(msgs) == 0 {
			<-room
			continue
		}
		if ctx.Err() != nil {
			s.release(url, msgs)
			<-room
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-room }()
			s.invoke(ctx, url, msgs)
		}()
	}
}

// batch receives up to the batch size: one long poll, then, within the
// batching window, more receives until the batch is full.
func (s *Source) batch(ctx context.Context, url string, m spec.Mapping) []types.Message {
	msgs := s.receive(ctx, url, m.BatchSize, s.wait())
	if len(msgs) == 0 || m.Window <= 0 {
		return msgs
	}
	until := time.Now().Add(m.Window)
	for len(msgs) < m.BatchSize && ctx.Err() == nil {
		left := time.Until(until)
		if left <= 0 {
			break
		}
		msgs = append(msgs, s.receive(ctx, url, m.BatchSize-len(msgs), min(left, s.wait()))...)
	}
	return msgs
}

func (s *Source) wait() time.Duration {
	if s.Wait > 0 {
		return min(s.Wait, queue.MaxWait)
	}
	return 2 * time.Second
}

// receive makes one receive request. It is not cut short by ctx: a
// receive cancelled in flight may have taken messages whose answer is
// lost, hiding them for the visibility timeout.
func (s *Source) receive(ctx context.Context, url string, n int, wait time.Duration) []types.Message {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait+10*time.Second)
	defer cancel()
	s.stats.receives.Add(1)
	out, err := s.SQS.ReceiveMessage(rctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(url),
		MaxNumberOfMessages:         int32(min(max(n, 1), queue.MaxBatch)),
		WaitTimeSeconds:             int32(wait / time.Second),
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	if err != nil {
		if ctx.Err() == nil {
			s.log().Warn("event source: receive failed", "queue", url, "error", err)
			sleepCtx(ctx, time.Second)
		}
		return nil
	}
	return out.Messages
}

// release makes messages received as the source stops visible again.
func (s *Source) release(url string, msgs []types.Message) {
	entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(msgs))
	for i, m := range msgs {
		entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.SQS.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(url), Entries: entries}); err != nil {
		s.log().Warn("event source: release failed", "queue", url, "error", err)
	}
}

// invoke runs one event through an environment and deletes the records
// the function did not report as failed.
func (s *Source) invoke(ctx context.Context, url string, msgs []types.Message) {
	arn := queue.ARN(url, s.region())
	ev := events.SQSEvent{Records: make([]events.SQSMessage, len(msgs))}
	for i, m := range msgs {
		ev.Records[i] = Record(m, arn, s.region())
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		s.log().Error("event source: marshal event", "error", err)
		return
	}
	h, err := s.envs.get(s.NewFunction, &s.stats.coldStarts)
	if err != nil {
		s.log().Error("event source: start function", "error", err)
		s.stats.failures.Add(int64(len(msgs)))
		return
	}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	s.stats.invocations.Add(1)
	ictx, cancel := context.WithTimeout(ctx, timeout)
	ictx = lambdacontext.NewContext(ictx, &lambdacontext.LambdaContext{
		AwsRequestID:       fmt.Sprintf("local-%d", s.stats.invocations.Load()),
		InvokedFunctionArn: "arn:aws:lambda:" + s.region() + ":000000000000:function:triage-consumer",
	})
	began := time.Now()
	out, err := h.Invoke(ictx, payload)
	s.stats.billedMS.Add(int64((time.Since(began) + time.Millisecond - 1) / time.Millisecond))
	cancel()
	s.envs.put(h)
	failed, err := Failures(ev, out, err)
	if err != nil {
		s.log().Warn("event source: invocation failed; its records stay on the queue", "queue", url, "records", len(msgs), "error", err)
	}
	s.stats.failures.Add(int64(len(failed)))
	var del []types.DeleteMessageBatchRequestEntry
	for i, r := range ev.Records {
		if !failed[r.MessageId] {
			del = append(del, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(r.ReceiptHandle)})
		}
	}
	if len(del) == 0 {
		return
	}
	dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer dcancel()
	res, err := s.SQS.DeleteMessageBatch(dctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: del})
	if err != nil {
		s.log().Warn("event source: delete failed", "queue", url, "error", err)
		return
	}
	s.stats.deleted.Add(int64(len(res.Successful)))
}

// Failures reads an invocation's outcome as Lambda does with
// ReportBatchItemFailures and returns the message ids of ev's records that
// stay on the queue: those the response lists, or all of them when the
// invocation failed or the response is not a batch response it can trust
// (not JSON, or naming an empty or unknown id). A null or empty response
// fails none.
func Failures(ev events.SQSEvent, out []byte, invokeErr error) (map[string]bool, error) {
	all := func() map[string]bool {
		f := make(map[string]bool, len(ev.Records))
		for _, r := range ev.Records {
			f[r.MessageId] = true
		}
		return f
	}
	if invokeErr != nil {
		return all(), invokeErr
	}
	var resp events.SQSEventResponse
	if len(out) > 0 {
		if err := json.Unmarshal(out, &resp); err != nil {
			return all(), fmt.Errorf("response %q is not a batch response: %w", out, err)
		}
	}
	known := all()
	failed := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		if !known[f.ItemIdentifier] {
			return all(), fmt.Errorf("response names %q, which is no record of the event", f.ItemIdentifier)
		}
		failed[f.ItemIdentifier] = true
	}
	return failed, nil
}

// Record is the SQS event record Lambda makes of a received message m of
// the queue arn names.
func Record(m types.Message, arn, region string) events.SQSMessage {
	r := events.SQSMessage{
		MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
		Md5OfBody: aws.ToString(m.MD5OfBody), Md5OfMessageAttributes: aws.ToString(m.MD5OfMessageAttributes),
		Attributes: map[string]string{}, MessageAttributes: map[string]events.SQSMessageAttribute{},
		EventSource: "aws:sqs", EventSourceARN: arn, AWSRegion: region,
	}
	for k, v := range m.Attributes {
		r.Attributes[k] = v
	}
	for k, v := range m.MessageAttributes {
		r.MessageAttributes[k] = events.SQSMessageAttribute{
			StringValue: v.StringValue, BinaryValue: v.BinaryValue, DataType: aws.ToString(v.DataType),
			StringListValues: []string{}, BinaryListValues: [][]byte{},
		}
	}
	return r
}

func (s *Source) region() string {
	if s.Region != "" {
		return s.Region
	}
	return "us-east-1"
}

func (s *Source) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.New(slog.DiscardHandler)
}

// envPool keeps the started environments that run no invocation now.
type envPool struct {
	mu   sync.Mutex
	idle []lambda.Handler
}

// get returns an idle environment, or starts one (counting the cold start).
func (p *envPool) get(start func() (lambda.Handler, error), cold *atomic.Int64) (lambda.Handler, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		h := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return h, nil
	}
	p.mu.Unlock()
	cold.Add(1)
	return start()
}

func (p *envPool) put(h lambda.Handler) {
	p.mu.Lock()
	p.idle = append(p.idle, h)
	p.mu.Unlock()
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
