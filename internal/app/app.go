// Package app assembles triage's parts from configuration: the AWS clients,
// the store, the queues, the API, the consumer and the promoter.
//
// The three Lambda mains and `triage dev` all build their parts here, so a
// setting behaves the same in every place triage runs.
package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/triagehq/triage/internal/api"
	"github.com/triagehq/triage/internal/auth"
	"github.com/triagehq/triage/internal/blob"
	"github.com/triagehq/triage/internal/config"
	"github.com/triagehq/triage/internal/control"
	"github.com/triagehq/triage/internal/counters"
	"github.com/triagehq/triage/internal/dashboard"
	"github.com/triagehq/triage/internal/deadletter"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/enqueue"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
)

// App holds the assembled parts.
type App struct {
	Config   config.Config
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
	Counters *counters.Keeper
}

// New loads the AWS configuration the standard way (environment, shared
// files, instance roles; endpoints from AWS_ENDPOINT_URL*), then assembles
// the parts on clients built from it.
func New(ctx context.Context, cfg config.Config, log *slog.Logger) (*App, error) {
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("load AWS config: %w", err)
	}
	return Assemble(ctx, cfg, log, awsCfg, store.NewClient(awsCfg), sqs.NewFromConfig(awsCfg), blob.NewClient(awsCfg))
}

// Assemble builds the store, counters, queues (resolved), enqueuer and
// controls on the given clients. New calls it; the bench calls it with
// clients that count every request.
func Assemble(ctx context.Context, cfg config.Config, log *slog.Logger, awsCfg aws.Config, ddb *dynamodb.Client, sqsClient *sqs.Client, s3Client *s3.Client) (*App, error) {
	a := &App{Config: cfg, Log: log, AWS: awsCfg, DynamoDB: ddb, SQS: sqsClient, S3: s3Client}
	a.Blobs = blob.New(s3Client, cfg.Spec.Bucket.Name)
	a.Store = store.New(a.DynamoDB, cfg.Spec.Table.Name, store.WithLogger(log), store.WithRetention(cfg.Retention), store.WithShards(cfg.Shards), store.WithBlobs(a.Blobs))
	a.Counters = counters.New(a.DynamoDB, cfg.Spec.Table.Name, a.Store.Shards())
	a.Counters.Reap(a.Blobs.Delete)
	var err error
	a.Queues, err = queue.Resolve(ctx, a.SQS, cfg.Spec, cfg.QueueURLs, cfg.DLQURLs)
	if err != nil {
		return nil, err
	}
	a.Enqueuer = enqueue.New(a.Store, a.Queues)
	a.Controls = control.New(a.DynamoDB, cfg.Spec.Table.Name, control.DefaultCacheTTL)
	return a, nil
}

// SecretReader reads a secret's value (Secrets Manager's GetSecretValue).
type SecretReader interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// Tokens returns the API tokens: TRIAGE_TOKEN as an admin token, the
// tokens in TRIAGE_TOKENS, and, when TRIAGE_TOKENS_SECRET_ARN is set, the
// tokens kept in that Secrets Manager secret (read through sm, or a client
// built from the AWS configuration when sm is nil).
func (a *App) Tokens(ctx context.Context, sm SecretReader) (*auth.Tokens, error) {
	toks, err := auth.Parse(a.Config.Tokens)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", config.EnvTokens, err)
	}
	if a.Config.Token != "" {
		toks.Add(a.Config.Token, auth.Admin)
	}
	if arn := a.Config.TokensSecretARN; arn != "" {
		if sm == nil {
			sm = secretsmanager.NewFromConfig(a.AWS)
		}
		out, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)})
		if err != nil {
			return nil, fmt.Errorf("read tokens secret %s: %w", arn, err)
		}
		fromSecret, err := auth.ParseSecret(aws.ToString(out.SecretString))
		if err != nil {
			return nil, fmt.Errorf("tokens secret %s: %w", arn, err)
		}
		toks.Merge(fromSecret)
	}
	if toks.Len() == 0 {
		return nil, fmt.Errorf("no API tokens: set %s, %s or %s", config.EnvToken, config.EnvTokens, config.EnvTokensSecretARN)
	}
	return toks, nil
}

// API returns the HTTP API handler.
func (a *App) API(tokens *auth.Tokens, opt api.Options) http.Handler {
	if opt.Logger == nil {
		opt.Logger = a.Log
	}
	if opt.Dashboard == nil {
		opt.Dashboard = dashboard.Handler()
	}
	if opt.MaxDepth == 0 {
		opt.MaxDepth = a.Config.MaxDepth
	}
	if opt.MaxDepthHigh == 0 {
		opt.MaxDepthHigh = a.Config.MaxDepthHigh
	}
	if opt.KnownTypes == nil {
		opt.KnownTypes = a.Config.Types
	}
	return api.New(api.Deps{
		Store: a.Store, Enqueuer: a.Enqueuer, Queues: a.Queues, Controls: a.Controls,
		DLQ: deadletter.New(a.Queues, a.Store, a.Enqueuer), Counters: a.Counters, Tokens: tokens,
	}, opt)
}

// Consumer returns a consumer running handlers from reg, with the polling
// settings of the configuration unless opt sets them.
func (a *App) Consumer(reg *handler.Registry, opt dispatch.Options) *dispatch.Consumer {
	return dispatch.New(a.Store, a.Queues, a.Enqueuer, reg, a.consumerOptions(opt))
}

// consumerOptions is opt with the settings it leaves unset taken from the
// configuration (a nil Strict: TRIAGE_STRICT; set, it wins either way).
func (a *App) consumerOptions(opt dispatch.Options) dispatch.Options {
	if opt.Weights == nil {
		opt.Weights = a.Config.Weights
	}
	if opt.Strict == nil {
		opt.Strict = new(a.Config.Strict)
	}
	if opt.Concurrency == 0 {
		opt.Concurrency = a.Config.Concurrency
		if opt.ReservedHigh == 0 {
			opt.ReservedHigh = a.Config.ReservedHigh
		}
	}
	if opt.PollWait == 0 {
		opt.PollWait = a.Config.PollWait
	}
	if opt.Lease == 0 {
		opt.Lease = a.Config.Lease
	}
	if opt.Logger == nil {
		opt.Logger = a.Log
	}
	if opt.Gate == nil {
		opt.Gate = a.Controls
	}
	if opt.Backoff == nil {
		opt.Backoff = RetryBackoff(a.Config.RetryBackoff)
	}
	if opt.MaxReceiveCount == 0 && len(a.Config.Spec.Queues) > 0 {
		opt.MaxReceiveCount = a.Config.Spec.Queues[0].MaxReceiveCount
	}
	return opt
}

// CounterPoller returns the stream reader that keeps the /stats counters
// where no Lambda trigger does (triage dev, tests, the bench).
func (a *App) CounterPoller() *counters.Poller {
	return &counters.Poller{Keeper: a.Counters, Tables: a.DynamoDB, Streams: dynamodbstreams.NewFromConfig(a.AWS), Logger: a.Log}
}

// RetryBackoff is the consumer's retry policy: dispatch.DefaultBackoff with
// the priorities TRIAGE_RETRY_BACKOFF sets replaced (same jitter).
func RetryBackoff(set map[task.Priority]config.Backoff) map[task.Priority]dispatch.Backoff {
	b := dispatch.DefaultBackoff()
	for p, v := range set {
		d := b[p]
		d.Base, d.Max = v.Base, v.Max
		b[p] = d
	}
	return b
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
