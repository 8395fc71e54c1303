// Command counters is the counters Lambda function: the table's DynamoDB
// stream triggers it with batches of changes, which it folds into the
// counters behind GET /stats and into the counter shards of the batches
// and workflows whose members finished, completing those that are done
// (see internal/counters and internal/flow), then publishes the batch's
// lifecycle events to the configured sinks (see internal/events).
// Its trigger must not bisect failed batches: a retried batch is
// recognised by its first record.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/app/eventsapp"
	"github.com/triagehq/triage/internal/tracing/otlpenv"
)

func main() {
	a, err := app.FromEnvironment(context.Background(), otlpenv.FromEnv)
	if err != nil {
		slog.New(slog.NewJSONHandler(os.Stderr, nil)).Error("start counters function", "error", err)
		os.Exit(1)
	}
	if _, err := eventsapp.Attach(a, os.Getenv); err != nil {
		a.Log.Error("start counters function", "error", err)
		os.Exit(1)
	}
	lambda.Start(a.Counters.HandleEvent)
}
