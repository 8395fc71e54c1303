// Package consumerapp is the stock consumer: package consumer's assembly
// plus the demo handlers (echo, sleep, fail, noop) when the configuration
// asks for them. The consumer function, `triage dev`, the bench and the
// tests build it here; the public worker builds on package consumer
// directly, so it never links the demo handlers.
package consumerapp

import (
	"context"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/app/consumer"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/handler/demo"
)

// Handlers returns the handler registry: the demo handlers when
// Config.DemoHandlers is set (TRIAGE_DEMO_HANDLERS=true; `triage dev` sets
// it always), then the configured routes (which win on a name clash).
func Handlers(a *app.App) (*handler.Registry, error) {
	reg := handler.NewRegistry()
	if a.Config.DemoHandlers {
		demo.Register(reg)
	}
	if err := consumer.AddRoutes(a, reg, true); err != nil {
		return nil, err
	}
	return reg, nil
}

// New is consumer.New: a consumer running handlers from reg.
func New(a *app.App, reg *handler.Registry, opt dispatch.Options, deps dispatch.Deps) *dispatch.Consumer {
	return consumer.New(a, reg, opt, deps)
}

// Lambda is consumer.Lambda: the consumer function's handler.
func Lambda(a *app.App, reg *handler.Registry, opt dispatch.Options, deps dispatch.Deps) func(context.Context, events.EventBridgeEvent) (LambdaSummary, error) {
	return consumer.Lambda(a, reg, opt, deps)
}

// LambdaSummary is what one scheduled consumer invocation reports.
type LambdaSummary = consumer.LambdaSummary

// LambdaReserve is how long before its deadline the consumer function
// stops polling (consumer.LambdaReserve).
const LambdaReserve = consumer.LambdaReserve

// Function is consumer.Function: the stock consumer function's handler,
// started by the queues' event source mappings (SQS events) or, in the
// opt-in scheduled mode, by a schedule.
func Function(a *app.App, reg *handler.Registry, opt dispatch.Options, deps dispatch.Deps) func(context.Context, Invocation) (Response, error) {
	return consumer.Function(a, reg, opt, deps)
}

// FunctionHandler is consumer.FunctionHandler.
func FunctionHandler(c *dispatch.Consumer, recs consumer.Records, reserve time.Duration) func(context.Context, Invocation) (Response, error) {
	return consumer.FunctionHandler(c, recs, reserve)
}

// Invocation, Response: consumer's.
type (
	Invocation = consumer.Invocation
	Response   = consumer.Response
)
