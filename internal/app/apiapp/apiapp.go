// Package apiapp assembles the HTTP API (and the dashboard it serves) on
// an app.App: the API function's main and `triage dev` build it here, and
// nothing else links the API, the dashboard or the Secrets Manager client.
package apiapp

import (
	"context"
	"fmt"
	"net/http"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/triagehq/triage/internal/api"
	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/auth"
	"github.com/triagehq/triage/internal/dashboard"
	"github.com/triagehq/triage/internal/deadletter"
	"github.com/triagehq/triage/internal/metrics"
	"github.com/triagehq/triage/internal/schedule"
	"github.com/triagehq/triage/triageconfig"
)

// SecretReader reads a secret's value (Secrets Manager's GetSecretValue).
type SecretReader interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// Tokens returns the fixed API tokens: TRIAGE_TOKEN as an admin token,
// the tokens in TRIAGE_TOKENS, and, when TRIAGE_TOKENS_SECRET_ARN is set,
// the tokens kept in that Secrets Manager secret (read through sm, or a
// client built from the AWS configuration when sm is nil). None at all is
// an error. The API function and `triage dev` add the table's tokens
// (TableAuth).
func Tokens(ctx context.Context, a *app.App, sm SecretReader) (*auth.Tokens, error) {
	toks, err := fixedTokens(ctx, a, sm)
	if err != nil {
		return nil, err
	}
	if toks.Len() == 0 {
		return nil, fmt.Errorf("no API tokens: set %s, %s or %s", triageconfig.EnvToken, triageconfig.EnvTokens, triageconfig.EnvTokensSecretARN)
	}
	return toks, nil
}

// fixedTokens is Tokens without the rule that there be one.
func fixedTokens(ctx context.Context, a *app.App, sm SecretReader) (*auth.Tokens, error) {
	toks, err := auth.Parse(a.Config.Tokens)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", triageconfig.EnvTokens, err)
	}
	if a.Config.Token != "" {
		toks.Add(a.Config.Token, auth.Admin)
	}
	if arn := a.Config.TokensSecretARN; arn != "" {
		if sm == nil {
			sm = secretsmanager.NewFromConfig(a.AWS)
		}
		out, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)})
		if err != nil {
			return nil, fmt.Errorf("read tokens secret %s: %w", arn, err)
		}
		fromSecret, err := auth.ParseSecret(aws.ToString(out.SecretString))
		if err != nil {
			return nil, fmt.Errorf("tokens secret %s: %w", arn, err)
		}
		toks.Merge(fromSecret)
	}
	return toks, nil
}

// Handler returns the HTTP API handler (the dashboard included) on a's
// parts, with the configured limits unless opt sets them.
func Handler(a *app.App, tokens api.Authorizer, opt api.Options) http.Handler {
	if opt.Logger == nil {
		opt.Logger = a.Log
	}
	if opt.Dashboard == nil {
		opt.Dashboard = dashboard.Handler()
	}
	if opt.MaxDepth == 0 {
		opt.MaxDepth = a.Config.MaxDepth
	}
	if opt.MaxDepthHigh == 0 {
		opt.MaxDepthHigh = a.Config.MaxDepthHigh
	}
	if opt.KnownTypes == nil {
		opt.KnownTypes = a.Config.Types
	}
	if opt.Tracing == nil {
		opt.Tracing = a.Tracing
	}
	if opt.Aging == (api.Aging{}) {
		opt.Aging = api.Aging{LowAfter: a.Config.LowAfter, MediumAfter: a.Config.MediumAfter, Interval: a.Config.PromoteInterval}
	}
	return api.New(api.Deps{
		Store: a.Store, Enqueuer: a.Enqueuer, Queues: a.Queues, Controls: a.Controls,
		DLQ: deadletter.New(a.Queues, a.Store, a.Enqueuer, deadletter.WithLogger(a.Log)), Counters: a.Counters, Tokens: tokens,
		Workers: a.Workers, Schedules: schedule.StoreOn(a.DynamoDB, a.Config.Table, a.Store), Flow: a.Flow,
	}, opt)
}

// Lambda returns the API function's handler: API Gateway HTTP API
// (payload v2) events in, through the same http.Handler `triage dev` serves.
func Lambda(ctx context.Context, a *app.App) (func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), error) {
	tokens, err := TableAuth(ctx, a, nil, 0)
	if err != nil {
		return nil, err
	}
	rec := metrics.New(metrics.NewEMF(os.Stdout, a.Config.MetricsNamespace, nil))
	proxy := httpadapter.NewV2(Handler(a, tokens, api.Options{Metrics: rec})).ProxyWithContext
	return func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		resp, err := proxy(ctx, req)
		// The request's submitted-task counts, as EMF on stdout (nothing
		// is written for a request that counted nothing).
		if ferr := rec.Flush(); ferr != nil {
			a.Log.Warn("metrics flush failed", "error", ferr)
		}
		// A frozen environment exports nothing: the request's spans go now.
		if ferr := a.Tracing.Flush(context.WithoutCancel(ctx)); ferr != nil {
			a.Log.Warn("export spans failed", "error", ferr)
		}
		return resp, err
	}, nil
}
