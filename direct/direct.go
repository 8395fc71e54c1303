// Package direct is triage's transport for code that runs inside AWS next
// to the dispatcher (a Lambda function, a container with the table's and
// queues' IAM rights): it writes a task's DynamoDB record and sends its
// SQS message itself, with no HTTP hop.
//
//	tr, err := direct.New(ctx, awsCfg, "triage", direct.WithEnv(os.Getenv))
//	if err != nil { ... }
//	c := triage.NewClient(tr)
//
// It runs the API's own code paths rather than a second implementation:
// internal/task's validation and defaults, the store's transactional
// idempotency key, the enqueuer's message-then-record order, the queue
// depth backpressure and the known task types. So a task submitted
// directly is indistinguishable from one submitted over HTTP, an
// idempotency key means the same on both paths, and every failure is the
// *triage.Error the API would have answered with (its Status is the
// API's; its Cause, unlike over HTTP, is the underlying error). A test in
// this package runs the same calls through both transports and compares.
//
// It lives apart from package triage so that programs which only talk
// HTTP do not link the AWS SDK.
package direct

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/blob"
	"github.com/triagehq/triage/internal/config"
	"github.com/triagehq/triage/internal/control"
	"github.com/triagehq/triage/internal/counters"
	"github.com/triagehq/triage/internal/deadletter"
	"github.com/triagehq/triage/internal/enqueue"
	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/submit"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/internal/workers"
)

// Transport is the direct transport; it implements triage.Transport and
// is safe for concurrent use. Make one with New.
type Transport struct {
	store    *store.Store
	queues   *queue.Queues
	enq      *enqueue.Enqueuer
	submit   *submit.Service
	controls *control.Controls
	counters *counters.Keeper
	dlq      *deadletter.DLQ
	workers  *workers.Registry
}

var _ triage.Transport = (*Transport)(nil)

// Option configures New.
type Option func(*options)

type options struct {
	getenv    func(string) string
	table     string
	queueURLs map[triage.Priority]string
	log       *slog.Logger
}

// WithEnv reads the deployment's TRIAGE_* settings through getenv, as the
// dispatcher's own functions do: TRIAGE_TABLE, TRIAGE_BUCKET (where
// payloads over 3 KiB go), TRIAGE_QUEUE_URL_*, TRIAGE_SHARDS,
// TRIAGE_RETENTION, TRIAGE_MAX_QUEUE_DEPTH(_HIGH) and TRIAGE_TYPES matter
// here. Give it os.Getenv in a function deployed with
// the dispatcher's environment. Without it every setting has its default,
// which is right for a deployment that changed none.
func WithEnv(getenv func(string) string) Option { return func(o *options) { o.getenv = getenv } }

// WithTable names the task table when it does not follow the prefix (a
// deployment's TRIAGE_TABLE). It overrides WithEnv.
func WithTable(name string) Option { return func(o *options) { o.table = name } }

// WithQueueURL gives priority p's queue URL, saving the look-up by name at
// start-up. It overrides WithEnv.
func WithQueueURL(p triage.Priority, url string) Option {
	return func(o *options) { o.queueURLs[p] = url }
}

// WithLogger logs the transitions the transport makes (cancels, retries)
// and failed depth reads; by default nothing is logged.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// New returns the transport for the deployment whose resources are named
// from prefix ("": TRIAGE_PREFIX through WithEnv, else "triage"): table
// "<prefix>-tasks", queues "<prefix>-high" and so on. The AWS
// configuration decides credentials, region and endpoints, exactly as for
// the dispatcher's own functions. New looks up every queue URL it was not
// given, which proves at start-up that the deployment exists.
func New(ctx context.Context, awsCfg aws.Config, prefix string, opts ...Option) (*Transport, error) {
	o := options{queueURLs: map[triage.Priority]string{}, log: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(&o)
	}
	cfg, err := config.FromEnv(func(k string) string {
		if k == config.EnvPrefix && prefix != "" {
			return prefix
		}
		if o.getenv == nil {
			return ""
		}
		return o.getenv(k)
	})
	if err != nil {
		return nil, fmt.Errorf("direct transport: %w", err)
	}
	if o.table != "" {
		cfg.Table = o.table
	}
	for p, url := range o.queueURLs {
		if _, err := triage.ParsePriority(string(p)); err != nil {
			return nil, fmt.Errorf("direct transport: queue URL: %w", err)
		}
		cfg.QueueURLs[p] = url
	}
	// The parts are the ones every triage process shares (internal/app:
	// store with its payload bucket, queues, enqueuer, controls, counters),
	// assembled by the same code with the same settings; the API, consumer
	// and promoter are not linked.
	a, err := app.Assemble(ctx, cfg, o.log, awsCfg, store.NewClient(awsCfg), sqs.NewFromConfig(awsCfg), blob.NewClient(awsCfg))
	if err != nil {
		return nil, fmt.Errorf("direct transport for table %s: %w", cfg.Table, err)
	}
	st, qs, enq := a.Store, a.Queues, a.Enqueuer
	return &Transport{
		store:  st,
		queues: qs,
		enq:    enq,
		submit: submit.New(enq, submit.Options{
			Pressure: enqueue.NewBackpressure(qs, a.Config.MaxDepth, a.Config.MaxDepthHigh, o.log),
			Known:    task.NewKnownTypes(a.Config.Types),
			Now:      st.Now,
			Tracing:  a.Tracing, // the program's global provider
			Fair:     a.Controls,
		}),
		controls: a.Controls,
		counters: a.Counters,
		dlq:      deadletter.New(qs, st, enq),
		workers:  a.Workers,
	}, nil
}
