// Command consumer is the consumer Lambda function: invoked on a schedule,
// it polls the priority queues and runs tasks until shortly before its
// deadline, then drains.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/app/consumerapp"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/tracing/otlpenv"
)

func main() {
	a, err := app.FromEnvironment(context.Background(), otlpenv.FromEnv)
	if err != nil {
		slog.New(slog.NewJSONHandler(os.Stderr, nil)).Error("start consumer function", "error", err)
		os.Exit(1)
	}
	reg, err := consumerapp.Handlers(a)
	if err != nil {
		a.Log.Error("start consumer function", "error", err)
		os.Exit(1)
	}
	lambda.Start(consumerapp.Lambda(a, reg, dispatch.Options{}, dispatch.Deps{}))
}
