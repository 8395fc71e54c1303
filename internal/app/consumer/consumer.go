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
	"encoding/json"
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
	"github.com/triagehq/triage/internal/queue"
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

// lambdaConsumer is the consumer a function invocation runs: the drain
// timeout fits LambdaReserve, metrics go to stdout as EMF unless
// deps.Metrics is set, and the registry lists it as a Lambda worker.
func lambdaConsumer(a *app.App, reg *handler.Registry, opt dispatch.Options, deps dispatch.Deps) (*dispatch.Consumer, dispatch.Metrics) {
	opt.DrainTimeout = LambdaReserve - lambdaRecordReserve
	if deps.Metrics == nil {
		deps.Metrics = lambdaMetrics(a)
	}
	if deps.Kind == "" {
		deps.Kind = triagetype.WorkerKindLambda
	}
	return New(a, reg, opt, deps), deps.Metrics
}

// tracingFlushed wraps a function handler so each invocation's spans are
// exported before it returns: a frozen environment exports nothing.
func tracingFlushed[E, R any](a *app.App, h func(context.Context, E) (R, error)) func(context.Context, E) (R, error) {
	return func(ctx context.Context, e E) (R, error) {
		r, err := h(ctx, e)
		if ferr := a.Tracing.Flush(context.WithoutCancel(ctx)); ferr != nil {
			a.Log.Warn("export spans failed", "error", ferr)
		}
		return r, err
	}
}

// Lambda returns the handler of a consumer function started on a schedule,
// running the handlers of reg: each invocation polls until LambdaReserve
// before its deadline, then drains (LambdaHandler). Its metrics go to
// stdout as EMF (unless deps.Metrics is set), flushed during and at the end
// of each invocation.
func Lambda(a *app.App, reg *handler.Registry, opt dispatch.Options, deps dispatch.Deps) func(context.Context, events.EventBridgeEvent) (LambdaSummary, error) {
	c, m := lambdaConsumer(a, reg, opt, deps)
	return tracingFlushed(a, flushing(LambdaHandler(c, LambdaReserve), m, a.Log))
}

// Function returns the consumer function's handler, running the handlers
// of reg (FunctionHandler): the queues' event source mappings start it
// with SQS events; the opt-in schedule and the promoter's fan-out with
// other events. Metrics and spans are flushed as Lambda's are.
func Function(a *app.App, reg *handler.Registry, opt dispatch.Options, deps dispatch.Deps) func(context.Context, Invocation) (Response, error) {
	c, m := lambdaConsumer(a, reg, opt, deps)
	return tracingFlushed(a, flushing(FunctionHandler(c, a.Queues, LambdaReserve), m, a.Log))
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
		pollCtx, cancel := beforeDeadline(ctx, reserve)
		defer cancel()
		err := c.Run(pollCtx)
		return LambdaSummary{WorkerID: c.WorkerID(), PolledMS: time.Since(start).Milliseconds()}, err
	}
}

// beforeDeadline is ctx ending reserve before its deadline (ctx as it is
// without one).
func beforeDeadline(ctx context.Context, reserve time.Duration) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok {
		return context.WithDeadline(ctx, dl.Add(-reserve))
	}
	return context.WithCancel(ctx)
}

// Records turns SQS event records into received messages (*queue.Queues).
type Records interface {
	FromRecord(r events.SQSMessage) (queue.Received, error)
}

// Invocation is one event the consumer function is invoked with: an SQS
// event from a queue's event source mapping, or any other event (an
// EventBridge schedule's, the promoter's fan-out), which starts a
// scheduled run.
type Invocation struct {
	// SQS is the event when its records come from SQS (nil otherwise).
	SQS *events.SQSEvent
	// Other is the event otherwise, read as EventBridge's.
	Other events.EventBridgeEvent
}

// UnmarshalJSON reads an SQS event when b has Records from aws:sqs, and
// any other event as EventBridge's.
func (in *Invocation) UnmarshalJSON(b []byte) error {
	var probe struct {
		Records []struct {
			EventSource string `json:"eventSource"`
		} `json:"Records"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return fmt.Errorf("consumer event: %w", err)
	}
	if len(probe.Records) > 0 && probe.Records[0].EventSource == "aws:sqs" {
		in.SQS = new(events.SQSEvent)
		return json.Unmarshal(b, in.SQS)
	}
	return json.Unmarshal(b, &in.Other)
}

// Response is what one consumer invocation returns: for an SQS event,
// exactly the shape Lambda reads with ReportBatchItemFailures; otherwise
// the scheduled run's summary.
type Response struct {
	SQS     *events.SQSEventResponse
	Summary LambdaSummary
}

// MarshalJSON writes the SQS response when there is one, else the summary.
func (r Response) MarshalJSON() ([]byte, error) {
	if r.SQS != nil {
		return json.Marshal(r.SQS)
	}
	return json.Marshal(r.Summary)
}

// FunctionHandler returns the consumer function's handler. An SQS event
// runs its messages through the consumer (dispatch.Consumer.RunEvent,
// polling ending reserve before the deadline): every record the consumer
// did not delete (handed back, put off, retrying, or one whose delete
// failed), and every record from no priority queue, is listed as a batch
// item failure, since with ReportBatchItemFailures Lambda deletes every
// record not listed when the invocation returns. Any other event polls as
// LambdaHandler does. reserve must exceed DrainTimeout.
func FunctionHandler(c *dispatch.Consumer, recs Records, reserve time.Duration) func(context.Context, Invocation) (Response, error) {
	scheduled := LambdaHandler(c, reserve)
	return func(ctx context.Context, in Invocation) (Response, error) {
		if in.SQS == nil {
			sum, err := scheduled(ctx, in.Other)
			return Response{Summary: sum}, err
		}
		resp := &events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
		msgs := make([]queue.Received, 0, len(in.SQS.Records))
		for _, r := range in.SQS.Records {
			m, err := recs.FromRecord(r)
			if err != nil {
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
				continue
			}
			msgs = append(msgs, m)
		}
		pollCtx, cancel := beforeDeadline(ctx, reserve)
		defer cancel()
		for _, m := range c.RunEvent(pollCtx, msgs) {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageID})
		}
		return Response{SQS: resp}, nil
	}
}
