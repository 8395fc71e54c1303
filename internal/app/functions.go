package app

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/triagehq/triage/internal/api"
	"github.com/triagehq/triage/internal/config"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/handler/demo"
	"github.com/triagehq/triage/internal/promote"
)

// FromEnvironment builds the app the way a Lambda function does: settings
// from the process environment, JSON logs to stderr.
func FromEnvironment(ctx context.Context) (*App, error) {
	cfg, err := config.FromEnv(os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	return New(ctx, cfg, NewLogger(os.Stderr, cfg.LogLevel))
}

// Handlers returns the handler registry: the demo handlers when
// Config.DemoHandlers is set (TRIAGE_DEMO_HANDLERS=true; `triage dev` sets
// it always), then the configured routes (which win on a name clash).
func (a *App) Handlers() (*handler.Registry, error) {
	reg := handler.NewRegistry()
	if a.Config.DemoHandlers {
		demo.Register(reg)
	}
	if err := a.AddRoutes(reg, true); err != nil {
		return nil, err
	}
	return reg, nil
}

// AddRoutes registers the Lambda and webhook handlers of TRIAGE_ROUTES in
// reg. A route for a type reg already has replaces it when override is
// set, and is an error naming the type otherwise.
func (a *App) AddRoutes(reg *handler.Registry, override bool) error {
	for typ, target := range a.Config.Routes {
		if reg.Has(typ) && !override {
			return fmt.Errorf("task type %q has a Go handler and a route in %s; give it one", typ, config.EnvRoutes)
		}
		h, err := a.routeHandler(target)
		if err != nil {
			return fmt.Errorf("route %s: %w", typ, err)
		}
		reg.Replace(typ, h)
	}
	return nil
}

// Promoter returns the promoter with the configured thresholds.
func (a *App) Promoter(opt promote.Options) *promote.Promoter {
	if opt.LowAfter == 0 {
		opt.LowAfter = a.Config.LowAfter
	}
	if opt.MediumAfter == 0 {
		opt.MediumAfter = a.Config.MediumAfter
	}
	if opt.Logger == nil {
		opt.Logger = a.Log
	}
	return promote.New(a.Store, a.Enqueuer, a.Queues, opt)
}

// LambdaConsumerReserve is how long before its deadline the consumer
// function stops polling: the drain timeout plus time to record outcomes.
const LambdaConsumerReserve = 40 * time.Second

// lambdaRecordReserve is the part of LambdaConsumerReserve kept for
// recording outcomes after the drain timeout.
const lambdaRecordReserve = 10 * time.Second

// LambdaConsumer returns the consumer function's handler, running the
// handlers of reg: each scheduled invocation polls until
// LambdaConsumerReserve before its deadline, then drains.
func (a *App) LambdaConsumer(reg *handler.Registry) func(context.Context, events.EventBridgeEvent) (dispatch.LambdaSummary, error) {
	c := a.Consumer(reg, dispatch.Options{DrainTimeout: LambdaConsumerReserve - lambdaRecordReserve})
	return dispatch.LambdaHandler(c, LambdaConsumerReserve)
}

// LambdaAPI returns the API function's handler: API Gateway HTTP API
// (payload v2) events in, through the same http.Handler `triage dev` serves.
func (a *App) LambdaAPI(ctx context.Context) (func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), error) {
	tokens, err := a.Tokens(ctx, nil)
	if err != nil {
		return nil, err
	}
	return httpadapter.NewV2(a.API(tokens, api.Options{})).ProxyWithContext, nil
}

// FanOut returns the promoter's consumer fan-out, configured by
// TRIAGE_CONSUMER_FUNCTION, TRIAGE_FANOUT_PER and TRIAGE_FANOUT_MAX.
func (a *App) FanOut() promote.FanOut {
	f := promote.FanOut{Depths: a.Queues, FunctionARN: a.Config.ConsumerARN, PerConsumer: a.Config.FanOutPer, Max: a.Config.FanOutMax}
	if f.FunctionARN != "" {
		f.Invoker = lambda.NewFromConfig(a.AWS)
	}
	return f
}
