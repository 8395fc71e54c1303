package app

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/triagehq/triage/internal/config"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/handler/lambdainvoke"
	"github.com/triagehq/triage/internal/handler/webhook"
)

// routeHandler returns the handler for a route target: a Lambda function
// ARN is invoked through the SDK; an http(s) URL gets a signed webhook.
func (a *App) routeHandler(target string) (handler.Handler, error) {
	switch {
	case strings.HasPrefix(target, "arn:"):
		return lambdainvoke.New(lambda.NewFromConfig(a.AWS), target), nil
	case strings.HasPrefix(target, "http://"), strings.HasPrefix(target, "https://"):
		if a.Config.WebhookSecret == "" {
			return nil, errors.New(config.EnvWebhookSecret + " must be set to sign webhook requests")
		}
		return webhook.New(target, []byte(a.Config.WebhookSecret)), nil
	}
	return nil, fmt.Errorf("target %q is neither a Lambda ARN nor an http(s) URL", target)
}
