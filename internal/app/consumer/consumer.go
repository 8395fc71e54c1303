// Package consumer assembles the consumer on an app.App: its options from
// the configuration, its dependencies from the app, the Lambda and webhook
// routes of TRIAGE_ROUTES, and the Lambda entry point. It registers no
// handlers of its own: the public worker builds on it with its Go
// handlers, and so links no demo handlers; package consumerapp adds the
// demo handlers for the stock consumer function and `triage dev`. Neither
// links the API nor the promoter.
package consumer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/handler/lambdainvoke"
	"github.com/triagehq/triage/internal/handler/webhook"
	"github.com/triagehq/triage/internal/metrics"
	"github.com/triagehq/triage/triageconfig"
	"github.com/triagehq/triage/triagetype"
)

// New returns a consumer running handlers from reg: its settings are the
// configuration's (dispatch.OptionsFrom) under the ones opt sets, and its
// dependencies the app's (logger, controls, tracing, worker registry)
// where deps leaves them unset.
func New(a *app.App, reg *handler.Registry, opt dispatch.Options, deps dispatch.Deps) *dispatch.Consumer {
	if deps.Logger == nil {
		deps.Logger = a.Log
	}
	if deps.Gate == nil {
		deps.Gate = a.Controls
	}
	if deps.Tracing == nil {
		deps.Tracing = a.Tracing
	}
	if deps.Workers == nil && a.Workers != nil {
		deps.Workers = a.Workers
	}
	if deps.Holds == nil && a.Holds != nil {
		deps.Holds = a.Holds
	}
	if rec, ok := deps.Metrics.(*metrics.Recorder); ok && a.Controls != nil {
		// Keys with keyed controls by name, the rest as one (bounded).
		rec.LabelKeys(a.Controls.KeyLabel)
	}
	return dispatch.New(a.Store, a.Queues, a.Enqueuer, reg, opt.Over(dispatch.OptionsFrom(a.Config)), deps)
}

// AddRoutes registers the Lambda and webhook handlers of TRIAGE_ROUTES in
// reg. A route for a type reg already has replaces it when override is
// set, and is an error naming the type otherwise.
func AddRoutes(a *app.App, reg *handler.Registry, override bool) error {
	for typ, target := range a.Config.Routes {
		if reg.Has(typ) && !override {
			return fmt.Errorf("task type %q has a Go handler and a route in %s; give it one", typ, triageconfig.EnvRoutes)
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
			return nil, errors.New(triageconfig.EnvWebhookSecret + " must be set to sign webhook requests")
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
// stdout as EMF (unless deps.Metrics is set), flushed during and at the end
// of each invocation.
func Lambda(a *app.App, reg *handler.Registry, opt dispatch.Options, deps dispatch.Deps) func(context.Context, events.EventBridgeEvent) (LambdaSummary, error) {
	opt.DrainTimeout = LambdaReserve - lambdaRecordReserve
	if deps.Metrics == nil {
		deps.Metrics = lambdaMetrics(a)
	}
	if deps.Kind == "" {
		deps.Kind = triagetype.WorkerKindLambda
	}
	c := New(a, reg, opt, deps)
	h := flushing(LambdaHandler(c, LambdaReserve), deps.Metrics, a.Log)
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
