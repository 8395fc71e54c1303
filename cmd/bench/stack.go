package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"

	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/app/consumerapp"
	"github.com/triagehq/triage/internal/blob"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/emulators"
	"github.com/triagehq/triage/internal/handler/ledger"
	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/triageconfig"
)

// maxIdleConnsPerHost is raised from the SDK's default of 10 so that 16-32
// concurrent callers reuse loopback connections instead of opening a new
// one per call; every client in the run (ceiling and app) uses it.
const maxIdleConnsPerHost = 64

// startEmulators starts fauxqs and DynamoDB Local on loopback ports and
// points the SDK at them through its standard environment variables, the
// way internal/emulators/stacktest does for the integration tests.
func startEmulators(ctx context.Context, root string) (*emulators.Emulators, error) {
	// A warm emulator's steady rate is what the bench measures: keep the
	// JVM's C2 compiler (the tests run C1 only).
	emu, err := emulators.Start(ctx, root, emulators.FullJIT())
	if err != nil {
		return nil, fmt.Errorf("start emulators: %w", err)
	}
	for k, v := range emu.Env() {
		if err := os.Setenv(k, v); err != nil {
			emu.Stop()
			return nil, fmt.Errorf("set %s: %w", k, err)
		}
	}
	return emu, nil
}

// loadAWS loads the AWS configuration the standard way, with the counter's
// middlewares on every client built from it.
func loadAWS(ctx context.Context, c *counter) (aws.Config, error) {
	httpClient := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.MaxIdleConns = 4 * maxIdleConnsPerHost
		tr.MaxIdleConnsPerHost = maxIdleConnsPerHost
	})
	cfg, err := awsconfig.LoadDefaultConfig(ctx,
		awsconfig.WithHTTPClient(httpClient),
		awsconfig.WithAPIOptions([]func(*middleware.Stack) error{c.register}),
	)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS config: %w", err)
	}
	return cfg, nil
}

// clients are the instrumented AWS clients every scenario shares.
type clients struct {
	cfg aws.Config
	ddb *dynamodb.Client
	sqs *sqs.Client
	s3  *s3.Client
	cnt *counter // forgets a deployment's items at teardown (nil: nothing to forget)
}

func newClients(cfg aws.Config) clients {
	return clients{cfg: cfg, ddb: store.NewClient(cfg), sqs: sqs.NewFromConfig(cfg), s3: blob.NewClient(cfg)}
}

// deployment is one scenario's fresh table and queues, and triage's app
// assembled on them exactly as app.New does, but on the instrumented
// clients (app.New loads its own AWS configuration, which the counting
// middleware cannot reach). The API and the consumer then come from the
// app's own API and Consumer methods, so their settings (backpressure,
// controls gate, reserved slots, redrive threshold) are production's.
type deployment struct {
	app   *app.App
	res   emulators.Resources
	warns *warnings
}

// deploy bootstraps resources under prefix and assembles the app.
func deploy(ctx context.Context, cl clients, prefix string) (*deployment, error) {
	getenv := func(k string) string {
		if k == triageconfig.EnvPrefix {
			return prefix
		}
		return os.Getenv(k)
	}
	cfg, err := triageconfig.FromEnv(getenv)
	if err != nil {
		return nil, fmt.Errorf("configuration for %s: %w", prefix, err)
	}
	cfg.DemoHandlers = true // the bench's tasks are noop
	res, err := emulators.Bootstrap(ctx, cl.ddb, cl.sqs, cl.s3, spec.Of(cfg.Prefix, cfg.Table, cfg.Bucket))
	if err != nil {
		return nil, fmt.Errorf("bootstrap %s: %w", prefix, err)
	}
	warns := newWarnings()
	// Info records are formatted as in production and thrown away; warnings
	// and errors are kept for the report.
	log := slog.New(slog.NewMultiHandler(
		slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}),
		warns,
	))
	a, err := app.Assemble(ctx, cfg, log, cl.cfg, cl.ddb, cl.sqs, cl.s3)
	if err != nil {
		return nil, fmt.Errorf("assemble the app on %s: %w", prefix, err)
	}
	return &deployment{app: a, res: res, warns: warns}, nil
}

func (d *deployment) table() string { return d.app.Config.Table }

// consumer is app.Consumer with concurrency slots of which reserved only
// run high tasks, running the app's handlers with noop wrapped by the ledger.
func (d *deployment) consumer(concurrency, reserved int, l *ledger.Ledger) (*dispatch.Consumer, error) {
	reg, err := consumerapp.Handlers(d.app)
	if err != nil {
		return nil, fmt.Errorf("handlers: %w", err)
	}
	inner, err := reg.Lookup("noop")
	if err != nil {
		return nil, fmt.Errorf("handlers: %w", err)
	}
	l.SetInner(inner)
	reg.Replace("noop", l) // the ledger wraps the demo noop
	return consumerapp.New(d.app, reg, dispatch.Options{Concurrency: concurrency, ReservedHigh: reserved}, dispatch.Deps{}), nil
}

// teardown deletes the deployment's table and queues, so later scenarios
// run on an emulator holding only their own data. Failures are reported,
// not fatal.
func (d *deployment) teardown(ctx context.Context, cl clients) error {
	var errs []error
	if cl.cnt != nil {
		defer cl.cnt.forget(d.table())
	}
	if _, err := cl.ddb.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(d.table())}); err != nil {
		errs = append(errs, fmt.Errorf("delete table %s: %w", d.table(), err))
	}
	for _, urls := range []map[string]string{toStrings(d.res.QueueURLs), toStrings(d.res.DLQURLs)} {
		for _, u := range urls {
			if _, err := cl.sqs.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(u)}); err != nil {
				errs = append(errs, fmt.Errorf("delete queue %s: %w", u, err))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("teardown: %v", errs)
	}
	return nil
}

func toStrings[K ~string](m map[K]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[string(k)] = v
	}
	return out
}

// specIndexes are the task table's GSIs (the same for every prefix).
func specIndexes() []spec.Index { return spec.New("").Table.Indexes }

// consumers builds setup's consumers, all running their handlers through l.
func (d *deployment) consumers(setup consumerSetup, l *ledger.Ledger) ([]*dispatch.Consumer, error) {
	var cs []*dispatch.Consumer
	for range setup.Consumers {
		c, err := d.consumer(setup.Concurrency, setup.Reserved, l)
		if err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	return cs, nil
}
