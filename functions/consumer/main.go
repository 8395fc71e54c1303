// Command consumer is the consumer Lambda function: invoked on a schedule,
// it polls the priority queues and runs tasks until shortly before its
// deadline, then drains.
package main

import (
	"context"
	"log"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/triagehq/triage/internal/app"
)

func main() {
	a, err := app.FromEnvironment(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	reg, err := a.Handlers()
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(a.LambdaConsumer(reg))
}
