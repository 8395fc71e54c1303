// Command consumer is the consumer Lambda function: started by the
// priority queues' SQS event source mappings, it runs the messages it was
// handed, polls the queues while there is work and returns when they are
// empty, reporting the messages that must live on as batch item failures.
// Invoked by a schedule (the opt-in scheduled mode) or the promoter's
// fan-out, it polls until shortly before its deadline, then drains.
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
	lambda.Start(consumerapp.Function(a, reg, dispatch.Options{}, dispatch.Deps{}))
}
