// Package consumerapp assembles the consumer on an app.App: its options
// from the configuration, the handler registry (Go handlers, demo handlers
// when enabled, and the Lambda and webhook routes), and the Lambda entry
// point. The consumer function, `triage dev` and the public worker build
// it here, and link neither the API nor the promoter.
package consumerapp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/config"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/handler/demo"
	"github.com/triagehq/triage/internal/handler/lambdainvoke"
	"github.com/triagehq/triage/internal/handler/webhook"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// New returns a consumer running handlers from reg, with the polling
// settings of the configuration unless opt sets them.
func New(a *app.App, reg *handler.Registry, opt dispatch.Options) *dispatch.Consumer {
	return dispatch.New(a.Store, a.Queues, a.Enqueuer, reg, options(a, opt))
}

// options is opt with the settings it leaves unset taken from the
// configuration (a nil Strict: TRIAGE_STRICT; set, it wins either way).
// ReservedHigh is taken with Concurrency, since it only means something
// beside it.
func options(a *app.App, opt dispatch.Options) dispatch.Options {
	c := a.Config
	if opt.Weights == nil {
		opt.Weights = c.Weights
	}
	if opt.Strict == nil {
		opt.Strict = new(c.Strict)
	}
	if opt.Concurrency == 0 {
		opt.Concurrency = c.Concurrency
		if opt.ReservedHigh == 0 {
			opt.ReservedHigh = max(c.ReservedHigh, 0) // config.Off: none
		}
	}
	if opt.PollWait == 0 {
		opt.PollWait = c.PollWait
	}
	if opt.Lease == 0 {
		opt.Lease = c.Lease
	}
	if opt.APIURL == "" {
		opt.APIURL = c.APIURL
	}
	if opt.Logger == nil {
		opt.Logger = a.Log
	}
	if opt.Gate == nil {
		opt.Gate = a.Controls
	}
	if opt.Holds == nil && a.Holds != nil {
		opt.Holds = a.Holds
	}
	if opt.Tracing == nil {
		opt.Tracing = a.Tracing
	}
	if opt.Workers == nil && a.Workers != nil {
		opt.Workers = a.Workers
	}
	if opt.Backoff == nil {
		opt.Backoff = c.RetryBackoff
	}
	if opt.UnhandledAfter == 0 {
		opt.UnhandledAfter = c.UnhandledAfter
	}
	if opt.MaxReceiveCount == 0 {
		if q, ok := c.Spec().Queue(task.High); ok {
			opt.MaxReceiveCount = q.MaxReceiveCount
		}
	}
	return opt
}

// Handlers returns the handler registry: the demo handlers when
// Config.DemoHandlers is set (TRIAGE_DEMO_HANDLERS=true; `triage dev` sets
// it always), then the configured routes (which win on a name clash).
func Handlers(a *app.App) (*handler.Registry, error) {
	reg := handler.NewRegistry()
	if a.Config.DemoHandlers {
		demo.Register(reg)
	}
	if err := AddRoutes(a, reg, true); err != nil {
		return nil, err
	}
	return reg, nil
}

// AddRoutes registers the Lambda and webhook handlers of TRIAGE_ROUTES in
// reg. A route for a type reg already has replaces it when override is
// set, and is an error naming the type otherwise.
func AddRoutes(a *app.App, reg *handler.Registry, override bool) error {
	for typ, target := range a.Config.Routes {
		if reg.Has(typ) && !override {
			return fmt.Errorf("task type %q has a Go handler and a route in %s; give it one", typ, config.EnvRoutes)
		}
		h, err := routeHandler(a, target)
		if err != nil {
			return fmt.Errorf("route %s: %w", typ, err)
		}
		reg.Replace(typ, h)
	}
	return nil
}

// routeHandler returns the handler for a route target: a Lambda function
// ARN is invoked through the SDK; an http(s) URL gets a signed webhook.
func routeHandler(a *app.App, target string) (handler.Handler, error) {
	switch {
	case strings.HasPrefix(target, "arn:"):
		return lambdainvoke.New(lambda.NewFromConfig(a.AWS), target), nil
	case strings.HasPrefix(target, "http://"), strings.HasPrefix(target, "https://"):
		if a.Config.WebhookSecret == "" {
			return nil, errors.New(config.EnvWebhookSecret + " must be set to sign webhook requests")
		}
		return webhook.New(target, []byte(a.Config.WebhookSecret)), nil
	}
	return nil, fmt.Errorf("target %q is neither a Lambda ARN nor an http(s) URL", target)
}

// LambdaReserve is how long before its deadline the consumer
// function stops polling: the drain timeout plus time to record outcomes.
const LambdaReserve = 40 * time.Second

// lambdaRecordReserve is the part of LambdaReserve kept for
// recording outcomes after the drain timeout.
const lambdaRecordReserve = 10 * time.Second

// Lambda returns the consumer function's handler, running the
// handlers of reg: each scheduled invocation polls until
// LambdaReserve before its deadline, then drains. Its metrics go to
// stdout as EMF (unless opt.Metrics is set), flushed during and at the end
// of each invocation.
func Lambda(a *app.App, reg *handler.Registry, opt dispatch.Options) func(context.Context, events.EventBridgeEvent) (LambdaSummary, error) {
	opt.DrainTimeout = LambdaReserve - lambdaRecordReserve
	if opt.Metrics == nil {
		opt.Metrics = lambdaMetrics(a)
	}
	if opt.Kind == "" {
		opt.Kind = triagetype.WorkerKindLambda
	}
	c := New(a, reg, opt)
	h := flushing(LambdaHandler(c, LambdaReserve), opt.Metrics, a.Log)
	return func(ctx context.Context, e events.EventBridgeEvent) (LambdaSummary, error) {
		sum, err := h(ctx, e)
		// A frozen environment exports nothing: the invocation's spans go now.
		if ferr := a.Tracing.Flush(context.WithoutCancel(ctx)); ferr != nil {
			a.Log.Warn("export spans failed", "error", ferr)
		}
		return sum, err
	}
}

// LambdaSummary is what one scheduled consumer invocation reports.
type LambdaSummary struct {
	WorkerID string `json:"worker_id"`
	PolledMS int64  `json:"polled_ms"`
}

// LambdaHandler returns the handler of the consumer function. Invoked on a
// schedule, it polls until reserve before the invocation's deadline, then
// drains: running tasks get until DrainTimeout to finish, and any still
// running after that are handed back to their queue, so the function never
// freezes with a claimed task. reserve must exceed DrainTimeout.
func LambdaHandler(c *dispatch.Consumer, reserve time.Duration) func(context.Context, events.EventBridgeEvent) (LambdaSummary, error) {
	return func(ctx context.Context, _ events.EventBridgeEvent) (LambdaSummary, error) {
		start := time.Now()
		pollCtx := ctx
		if dl, ok := ctx.Deadline(); ok {
			var cancel context.CancelFunc
			pollCtx, cancel = context.WithDeadline(ctx, dl.Add(-reserve))
			defer cancel()
		}
		err := c.Run(pollCtx)
		return LambdaSummary{WorkerID: c.WorkerID(), PolledMS: time.Since(start).Milliseconds()}, err
	}
}
