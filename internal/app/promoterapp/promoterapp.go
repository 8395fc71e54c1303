// Package promoterapp assembles the promoter on an app.App, with its
// consumer fan-out and Lambda entry point: the promoter function and
// `triage dev` build it here.
package promoterapp

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/cleanup"
	"github.com/triagehq/triage/internal/deadletter"
	"github.com/triagehq/triage/internal/hold"
	"github.com/triagehq/triage/internal/promote"
	"github.com/triagehq/triage/internal/schedule"
)

// New returns the promoter with the configured thresholds, ticking the
// table's schedules and working on cleanup jobs unless opt names its own.
func New(a *app.App, opt promote.Options) *promote.Promoter {
	if opt.LowAfter == 0 {
		opt.LowAfter = a.Config.LowAfter
	}
	if opt.MediumAfter == 0 {
		opt.MediumAfter = a.Config.MediumAfter
	}
	if opt.Logger == nil {
		opt.Logger = a.Log
	}
	if opt.Tracing == nil {
		opt.Tracing = a.Tracing
	}
	if opt.Schedules == nil {
		mx, _ := opt.Metrics.(schedule.Metrics)
		opt.Schedules = schedule.NewTicker(schedule.StoreOn(a.DynamoDB, a.Config.Table, a.Store), a.Store, a.Enqueuer, schedule.TickerOptions{Now: a.Store.Now, Logger: opt.Logger, Metrics: mx})
	}
	if opt.Flow == nil {
		opt.Flow = a.Flow
	}
	if opt.Held == nil && a.Holds != nil {
		opt.Held = hold.Sweeper{Holds: a.Holds, Scopes: a.Controls}
	}
	if opt.Cleanup == nil {
		host, _ := os.Hostname()
		opt.Cleanup = cleanup.NewRunner(a.Store, cleanup.Options{
			Owner:  fmt.Sprintf("promoter-%s-%d", host, os.Getpid()),
			Copies: deadletter.New(a.Queues, a.Store, a.Enqueuer, deadletter.WithLogger(opt.Logger)),
			Logger: opt.Logger,
		})
	}
	return promote.New(a.Store, a.Enqueuer, a.Queues, opt)
}

// FanOut returns the promoter's consumer fan-out, configured by
// TRIAGE_CONSUMER_FUNCTION, TRIAGE_FANOUT_PER and TRIAGE_FANOUT_MAX.
func FanOut(a *app.App) promote.FanOut {
	f := promote.FanOut{Depths: a.Queues, FunctionARN: a.Config.ConsumerARN, PerConsumer: a.Config.FanOutPer, Max: max(a.Config.FanOutMax, 0)}
	if f.FunctionARN != "" {
		f.Invoker = lambda.NewFromConfig(a.AWS)
	}
	return f
}

// LambdaHandler returns the handler of the promoter function: each
// EventBridge scheduled event runs one sweep, then fans out extra consumers
// if the backlog calls for it, and returns its report. Errors of single
// tasks are counted, not returned, so one bad task does not make the
// schedule retry the whole sweep.
func LambdaHandler(p *promote.Promoter, fan promote.FanOut, log *slog.Logger) func(context.Context, events.EventBridgeEvent) (promote.Report, error) {
	return func(ctx context.Context, ev events.EventBridgeEvent) (promote.Report, error) {
		r, err := p.RunOnce(ctx)
		if err != nil {
			log.Warn("promoter run had errors", "event_id", ev.ID, "error", err)
		}
		n, err := fan.Run(ctx)
		r.ConsumersStarted = n
		if err != nil {
			r.Errors++
			log.Warn("consumer fan-out failed", "error", err)
		}
		return r, nil
	}
}

// Lambda returns the promoter function's handler on a's parts, with its
// metrics as EMF on stdout.
func Lambda(a *app.App) func(context.Context, events.EventBridgeEvent) (promote.Report, error) {
	h := lambdaWithMetrics(a)
	return func(ctx context.Context, ev events.EventBridgeEvent) (promote.Report, error) {
		r, err := h(ctx, ev)
		if ferr := a.Tracing.Flush(context.WithoutCancel(ctx)); ferr != nil {
			a.Log.Warn("export spans failed", "error", ferr)
		}
		return r, err
	}
}
