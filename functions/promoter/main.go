// Command promoter is the promoter Lambda function: an EventBridge schedule
// invokes it every interval to age, release, reconcile and recover tasks.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/app/promoterapp"
	"github.com/triagehq/triage/internal/tracing/otlpenv"
)

func main() {
	a, err := app.FromEnvironment(context.Background(), otlpenv.FromEnv)
	if err != nil {
		slog.New(slog.NewJSONHandler(os.Stderr, nil)).Error("start promoter function", "error", err)
		os.Exit(1)
	}
	lambda.Start(promoterapp.Lambda(a))
}
