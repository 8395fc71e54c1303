// Package direct is triage's transport for code that runs inside AWS next
// to the dispatcher (a Lambda function, a container with the table's and
// queues' IAM rights): it writes a task's DynamoDB record and sends its
// SQS message itself, with no HTTP hop.
//
//	tr, err := direct.New(ctx, awsCfg, direct.Options{}) // the TRIAGE_* settings of the environment
//	if err != nil { ... }
//	c := triage.NewClient(tr)
//
// It runs the API's own operations (internal/service) rather than a
// second implementation: internal/task's validation and defaults, the
// store's transactional idempotency key, the enqueuer's message-then-record
// order, the queue depth backpressure and the known task types. So a task submitted
// directly is indistinguishable from one submitted over HTTP, an
// idempotency key means the same on both paths, and every failure is the
// *triage.Error the API would have answered with (its Status is the
// API's; its Cause, unlike over HTTP, is the underlying error). A test in
// this package runs one table of scenarios through both transports.
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
	"github.com/triagehq/triage/internal/deadletter"
	"github.com/triagehq/triage/internal/schedule"
	"github.com/triagehq/triage/internal/service"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/triageconfig"
)

// Transport is the direct transport; it implements triage.Transport and
// is safe for concurrent use. Make one with New.
type Transport struct {
	// svc runs every call, as it runs the API's (internal/service).
	svc *service.Service
}

var _ triage.Transport = (*Transport)(nil)

// Options configures New, as worker.Options configures a worker: one
// triageconfig.Config for the deployment, and a logger.
type Options struct {
	// Config is the deployment's configuration, the same type the worker
	// and the dispatcher's own functions read: which deployment (Prefix,
	// or Table, Bucket and QueueURLs when they do not follow the prefix),
	// Shards, TypeIndex, Retention, MaxDepth and MaxDepthHigh, and Types
	// matter here.
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
	return &Transport{svc: service.New(service.Deps{
		Store: a.Store, Enqueuer: a.Enqueuer, Queues: a.Queues, Controls: a.Controls,
		DLQ: deadletter.New(a.Queues, a.Store, a.Enqueuer), Counters: a.Counters, Workers: a.Workers, Flow: a.Flow,
		Schedules: schedule.StoreOn(a.DynamoDB, a.Config.Table, a.Store),
	}, service.Options{
		KnownTypes: a.Config.Types, MaxDepth: a.Config.MaxDepth, MaxDepthHigh: a.Config.MaxDepthHigh,
		Tracing: a.Tracing, // the program's global provider
		Logger:  log,
	})}, nil
}
