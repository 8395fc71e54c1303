// Package app assembles the parts every triage process shares from the
// configuration: the AWS clients, the store (with its blob store), the
// queues, the enqueuer, the controls and the counters.
//
// The roles are assembled on top of it, each in a package of its own so a
// binary links only what it runs: apiapp (the HTTP API and dashboard),
// consumerapp (the consumer and its handlers) and promoterapp (the
// promoter). The Lambda mains, `triage dev` and the public worker all build
// their parts there, so a setting behaves the same in every place triage
// runs.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/triagehq/triage/internal/blob"
	"github.com/triagehq/triage/internal/control"
	"github.com/triagehq/triage/internal/counters"
	"github.com/triagehq/triage/internal/durable"
	"github.com/triagehq/triage/internal/enqueue"
	"github.com/triagehq/triage/internal/flow"
	"github.com/triagehq/triage/internal/hold"
	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/internal/tracing"
	"github.com/triagehq/triage/internal/workers"
	"github.com/triagehq/triage/triageconfig"
)

// App holds the assembled parts.
type App struct {
	Config   triageconfig.Config
	Log      *slog.Logger
	AWS      aws.Config
	DynamoDB *dynamodb.Client
	SQS      *sqs.Client
	S3       *s3.Client
	Blobs    *blob.Store
	Store    *store.Store
	Queues   *queue.Queues
	Enqueuer *enqueue.Enqueuer
	Controls *control.Controls
	// Holds sets aside tasks that cannot start and releases them in
	// submit order (package hold); a resume through Controls releases.
	Holds    *hold.Holds
	Counters *counters.Keeper
	// Tracing is where spans go: the program's global provider, or OTLP
	// when OTEL_* names an endpoint in the programs that export themselves
	// (the Lambda functions through FromEnvironment, the dev server; see
	// package otlpenv).
	Tracing *tracing.Provider
	// Workers is the registry of consumer instances (GET /workers).
	Workers *workers.Registry
	// Flow resolves dependencies, workflows and batches: the store calls
	// it when a task with children finishes, the counters when they have
	// counted batch members, the enqueuer when a task naming parents is
	// submitted, the promoter sweeps with it.
	Flow *flow.Flow
}

// New loads the AWS configuration the standard way (environment, shared
// files, instance roles; endpoints from AWS_ENDPOINT_URL*), then assembles
// the parts on clients built from it.
func New(ctx context.Context, cfg triageconfig.Config, log *slog.Logger) (*App, error) {
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("load AWS config: %w", err)
	}
	return Assemble(ctx, cfg, log, awsCfg, store.NewClient(awsCfg), sqs.NewFromConfig(awsCfg), blob.NewClient(awsCfg))
}

// TracingFromEnv makes a process's tracing provider from its environment:
// otlpenv.FromEnv, passed in by the programs that export spans themselves,
// so that only they link the OTLP exporter (a worker does not).
type TracingFromEnv func(ctx context.Context, service string, getenv func(string) string) (*tracing.Provider, error)

// FromEnvironment builds the app the way a Lambda function does: settings
// from the process environment, JSON logs to stderr, and the tracing
// provider spans made from the environment (the global one when
// tracingFromEnv is nil).
func FromEnvironment(ctx context.Context, tracingFromEnv TracingFromEnv) (*App, error) {
	cfg, err := triageconfig.FromEnv(os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	a, err := New(ctx, cfg, NewLogger(os.Stderr, cfg.LogLevel))
	if err != nil {
		return nil, err
	}
	if tracingFromEnv == nil {
		return a, nil
	}
	if a.Tracing, err = tracingFromEnv(ctx, "triage", os.Getenv); err != nil {
		return nil, err
	}
	return a, nil
}

// Assemble builds the store, counters, queues (resolved), enqueuer and
// controls on the given clients. New calls it; the bench calls it with
// clients that count every request.
//
// cfg may come from code with fields unset: Assemble applies its defaults
// and refuses it when it breaks a rule, so App.Config is always complete
// and valid.
func Assemble(ctx context.Context, cfg triageconfig.Config, log *slog.Logger, awsCfg aws.Config, ddb *dynamodb.Client, sqsClient *sqs.Client, s3Client *s3.Client) (*App, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &App{Config: cfg, Log: log, AWS: awsCfg, DynamoDB: ddb, SQS: sqsClient, S3: s3Client, Tracing: tracing.Global()}
	a.Blobs = blob.New(s3Client, cfg.Bucket)
	a.Store = store.New(a.DynamoDB, cfg.Table, store.WithLogger(log), store.WithRetention(cfg.Retention), store.WithShards(cfg.Shards), store.WithTypeIndex(cfg.TypeIndex), store.WithBlobs(a.Blobs))
	a.Counters = counters.New(a.DynamoDB, cfg.Table, a.Store.Shards())
	a.Counters.Reap(a.Blobs.Delete)
	var err error
	a.Queues, err = queue.Resolve(ctx, a.SQS, spec.Of(cfg.Prefix, cfg.Table, cfg.Bucket), cfg.QueueURLs, cfg.DLQURLs)
	if err != nil {
		return nil, err
	}
	a.Enqueuer = enqueue.New(a.Store, a.Queues)
	a.Flow = flow.New(a.Store, a.Enqueuer, flow.Options{Logger: log})
	children := durable.Notifier{Signal: a.Store.Signal, Redispatch: a.Enqueuer.Redispatch}
	a.Store.OnFinish(func(ctx context.Context, t *task.Task) {
		a.Flow.Finished(ctx, t)
		// Delivered already, a parent that finished or is gone, a wake
		// another waker made: nothing to repair.
		if err := children.Finished(ctx, t); err != nil && !errors.Is(err, store.ErrSignalExists) && !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrNotFound) {
			log.Warn("a child task's outcome did not reach its parent; the parent reads it at its next recheck", "task_id", t.ID, "error", err)
		}
	})
	a.Enqueuer.SetLinker(a.Flow)
	// Batch members are counted from the stream: the stream consumer (the
	// counters Lambda, or CounterPoller) completes the batches it counted.
	a.Counters.OnBatchShards(a.Flow.ShardsCounted)
	a.Controls = control.New(a.DynamoDB, cfg.Table, control.DefaultCacheTTL)
	a.Holds = hold.New(a.Store, a.Enqueuer, a.Controls, log)
	a.Controls.OnRunnable(a.Holds.ReleaseWindow)
	a.Workers = workers.New(a.DynamoDB, cfg.Table, a.Store.Shards())
	return a, nil
}

// CounterPoller returns the stream reader that keeps the /stats counters
// where no Lambda trigger does (triage dev, tests, the bench).
func (a *App) CounterPoller() *counters.Poller {
	return &counters.Poller{Keeper: a.Counters, Tables: a.DynamoDB, Streams: dynamodbstreams.NewFromConfig(a.AWS), Logger: a.Log}
}

// NewLogger returns a JSON logger at level ("debug", "info", "warn", "error").
func NewLogger(w io.Writer, level string) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: ParseLevel(level)}))
}

// ParseLevel reads a TRIAGE_LOG_LEVEL value; anything unknown is info.
func ParseLevel(level string) slog.Level {
	switch strings.ToLower(level) {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}
