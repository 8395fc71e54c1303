// Command api is the API Gateway (HTTP API, payload v2) Lambda function: it
// serves triage's HTTP API through aws-lambda-go-api-proxy.
package main

import (
	"context"
	"log"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/triagehq/triage/internal/app"
)

func main() {
	ctx := context.Background()
	a, err := app.FromEnvironment(ctx)
	if err != nil {
		log.Fatal(err)
	}
	h, err := a.LambdaAPI(ctx)
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(h)
}
