// Package direct is a producer for code that runs inside AWS next to the
// dispatcher: it writes a task's DynamoDB record and SQS message itself, with
// no HTTP hop, and behaves exactly like the API's submit. It lives apart from
// package client so that HTTP-only users do not import the AWS SDK.
package direct

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/triagehq/triage/client"
	"github.com/triagehq/triage/internal/enqueue"
	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
)

// Producer submits tasks from code that runs inside AWS next to the
// dispatcher (a Lambda function, a container with the table's IAM rights),
// without going through the HTTP API. It writes the DynamoDB record and
// sends the SQS message itself.
//
// It deliberately runs the API's own submit path — task.Request's
// validation and defaults, store.Store.Create's transactional idempotency
// key, enqueue.Enqueuer.Submit's record-then-message order and its cleanup
// when the send fails — instead of a second implementation, so a task
// submitted directly is indistinguishable from one submitted over HTTP, and
// an idempotency key means the same thing on both paths.
type Producer struct {
	store  *store.Store
	enq    *enqueue.Enqueuer
	window time.Duration
}

// Option configures New.
type Option func(*options)

type options struct {
	table     string
	queueURLs map[task.Priority]string
}

// WithTable names the task table when it does not follow the prefix (the
// TRIAGE_TABLE setting of a deployment).
func WithTable(name string) Option { return func(c *options) { c.table = name } }

// WithQueueURL gives a priority's queue URL ("high", "medium" or "low"),
// saving the GetQueueUrl look-up by name at start-up. Unknown priorities
// are reported by New.
func WithQueueURL(priority, url string) Option {
	return func(c *options) { c.queueURLs[task.Priority(priority)] = url }
}

// New returns a direct producer for the deployment whose resources
// are named from prefix ("" is the default, "triage"): table
// "<prefix>-tasks", queues "<prefix>-high" and so on. The AWS configuration
// decides credentials, region and endpoints, exactly as for the
// dispatcher's own functions.
func New(ctx context.Context, awsCfg aws.Config, prefix string, opts ...Option) (*Producer, error) {
	cfg := options{queueURLs: map[task.Priority]string{}}
	for _, o := range opts {
		o(&cfg)
	}
	for p := range cfg.queueURLs {
		if _, err := task.ParsePriority(string(p)); err != nil {
			return nil, fmt.Errorf("direct producer: queue URL: %w", err)
		}
	}
	sp := spec.New(prefix)
	if cfg.table != "" {
		sp.Table.Name = cfg.table
	}
	st := store.New(store.NewClient(awsCfg), sp.Table.Name)
	// Resolve looks up every queue and DLQ URL it was not given. Producer
	// only sends to the main queues, but resolving the DLQs too costs three
	// calls once and proves at start-up that the deployment is the
	// expected one.
	qs, err := queue.Resolve(ctx, sqs.NewFromConfig(awsCfg), sp, cfg.queueURLs, nil)
	if err != nil {
		return nil, fmt.Errorf("direct producer for table %s: %w", sp.Table.Name, err)
	}
	// Like the API: a task due within SQS's longest delay is sent now with
	// that delay; a later one starts scheduled and the promoter releases it.
	return &Producer{store: st, enq: enqueue.New(st, qs), window: queue.MaxDelay}, nil
}

// Submit validates r, records the task and sends its message. created is
// false when r's idempotency key was used within 24 h: the first task comes
// back and nothing is written or sent. Errors are *Error values shaped like
// the API's, so errors.Is(err, ErrBadRequest) (naming the field in
// Error.Field), ErrTooLarge and ErrUnavailable (the queue refused the
// message; nothing was recorded, so a retry is safe) work on both paths.
func (d *Producer) Submit(ctx context.Context, r client.SubmitRequest) (*client.Task, bool, error) {
	req := task.Request{
		Type: r.Type, Payload: r.Payload, Priority: r.Priority,
		MaxAttempts: r.MaxAttempts, TimeoutSeconds: r.TimeoutSeconds,
		RunAt: r.RunAt, DelaySeconds: r.DelaySeconds, IdempotencyKey: r.IdempotencyKey, TraceID: r.TraceID,
	}
	if err := req.Validate(); err != nil {
		return nil, false, fieldError(err)
	}
	t := req.NewTask(d.store.Now().UTC(), d.window)
	saved, created, err := d.enq.Submit(ctx, t)
	if errors.Is(err, enqueue.ErrNotSent) || errors.Is(err, enqueue.ErrNotRecorded) {
		return nil, false, &client.Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: err.Error()}
	}
	if err != nil {
		return nil, false, fmt.Errorf("direct submit of a %q task: %w", r.Type, err)
	}
	out, err := toClientTask(saved)
	if err != nil {
		return nil, false, err
	}
	return out, created, nil
}

// fieldError turns a validation failure into the *Error the API would
// have answered with.
func fieldError(err error) error {
	var fe *task.FieldError
	if !errors.As(err, &fe) {
		return &client.Error{Status: http.StatusBadRequest, Code: "bad_request", Message: err.Error()}
	}
	if fe.TooLarge {
		return &client.Error{Status: http.StatusRequestEntityTooLarge, Code: "too_large", Message: fe.Error(), Field: fe.Field}
	}
	return &client.Error{Status: http.StatusBadRequest, Code: "invalid_field", Message: fe.Error(), Field: fe.Field}
}

// toClientTask converts through the task's API JSON, which is the one
// contract the two types share; copying fields by hand would drift.
func toClientTask(t *task.Task) (*client.Task, error) {
	b, err := json.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("encode task %s: %w", t.ID, err)
	}
	var out client.Task
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("decode task %s: %w", t.ID, err)
	}
	return &out, nil
}
