// Command api is the API Gateway (HTTP API, payload v2) Lambda function: it
// serves triage's HTTP API through aws-lambda-go-api-proxy.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/app/apiapp"
	"github.com/triagehq/triage/internal/tracing/otlpenv"
)

func main() {
	ctx := context.Background()
	a, err := app.FromEnvironment(ctx, otlpenv.FromEnv)
	if err != nil {
		slog.New(slog.NewJSONHandler(os.Stderr, nil)).Error("start api function", "error", err)
		os.Exit(1)
	}
	h, err := apiapp.Lambda(ctx, a)
	if err != nil {
		a.Log.Error("start api function", "error", err)
		os.Exit(1)
	}
	lambda.Start(h)
}
