// Package direct is triage's transport for code that runs inside AWS next
// to the dispatcher (a Lambda function, a container with the table's and
// queues' IAM rights): it writes a task's DynamoDB record and sends its
// SQS message itself, with no HTTP hop.
//
//	tr, err := direct.New(ctx, awsCfg, direct.Options{}) // the TRIAGE_* settings of the environment
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
	"github.com/triagehq/triage/internal/control"
	"github.com/triagehq/triage/internal/counters"
	"github.com/triagehq/triage/internal/deadletter"
	"github.com/triagehq/triage/internal/enqueue"
	"github.com/triagehq/triage/internal/flow"
	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/internal/schedule"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/submit"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/internal/workers"
	"github.com/triagehq/triage/triageconfig"
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

	// schedules answers the schedule calls (schedules.go).
	schedules *schedule.Service
	flow      *flow.Flow
	known     task.KnownTypes
}

var _ triage.Transport = (*Transport)(nil)

// Options configures New, as worker.Options configures a worker: one
// triageconfig.Config for the deployment, and a logger.
type Options struct {
	// Config is the deployment's configuration, the same type the worker
	// and the dispatcher's own functions read: which deployment (Prefix,
	// or Table, Bucket and QueueURLs when they do not follow the prefix),
	// Shards, Retention, MaxDepth and MaxDepthHigh, and Types matter here.
	// nil reads the process environment (the TRIAGE_* variables), which is
	// right in a function deployed with the dispatcher's environment.
	// Fields left zero take their defaults (triageconfig.Load).
	Config *triageconfig.Config
	// Logger logs the transitions the transport makes (cancels, retries)
	// and failed depth reads; nil logs nothing.
	Logger *slog.Logger
}

// New returns the transport for the deployment opt.Config names: table
// "<prefix>-tasks", queues "<prefix>-high" and so on, unless Table or
// QueueURLs say otherwise. The AWS configuration decides credentials,
// region and endpoints, exactly as for the dispatcher's own functions. New
// looks up every queue URL it was not given, which proves at start-up that
// the deployment exists. A setting that breaks its rule is a
// *triageconfig.Error.
func New(ctx context.Context, awsCfg aws.Config, opt Options) (*Transport, error) {
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg, err := triageconfig.Load(opt.Config)
	if err != nil {
		return nil, fmt.Errorf("direct transport: %w", err)
	}
	// The parts are the ones every triage process shares (internal/app:
	// store with its payload bucket, queues, enqueuer, controls, counters),
	// assembled by the same code with the same settings; the API, consumer
	// and promoter are not linked.
	a, err := app.Assemble(ctx, cfg, log, awsCfg, store.NewClient(awsCfg), sqs.NewFromConfig(awsCfg), blob.NewClient(awsCfg))
	if err != nil {
		return nil, fmt.Errorf("direct transport for table %s: %w", cfg.Table, err)
	}
	st, qs, enq := a.Store, a.Queues, a.Enqueuer
	return &Transport{
		store:  st,
		queues: qs,
		enq:    enq,
		submit: submit.New(enq, submit.Options{
			Pressure: enqueue.NewBackpressure(qs, a.Config.MaxDepth, a.Config.MaxDepthHigh, log),
			Known:    task.NewKnownTypes(a.Config.Types),
			Now:      st.Now,
			Tracing:  a.Tracing, // the program's global provider
			Fair:     a.Controls,
		}),
		controls: a.Controls,
		counters: a.Counters,
		dlq:      deadletter.New(qs, st, enq),
		workers:  a.Workers,

		schedules: schedule.NewService(schedule.StoreOn(a.DynamoDB, a.Config.Table, a.Store), a.Config.Types),
		flow:      a.Flow,
		known:     task.NewKnownTypes(a.Config.Types),
	}, nil
}
