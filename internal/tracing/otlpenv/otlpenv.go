// Package otlpenv builds a tracing.Provider that exports over OTLP/HTTP,
// configured by the OpenTelemetry exporter's standard variables.
//
// It is a package of its own so that only the programs that export spans
// themselves link the exporter (protobuf and gRPC's status types come with
// it): the Lambda functions and triage dev through app.FromEnvironment and
// the dev server, a user's worker through the public package otlp. Every
// other triage package leaves spans to the global provider.
package otlpenv

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"

	"github.com/triagehq/triage/internal/tracing"
)

// Enabled reports whether the variables ask for OTLP export: an
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set
// and OTEL_TRACES_EXPORTER is not "none".
func Enabled(getenv func(string) string) bool {
	return getenv("OTEL_TRACES_EXPORTER") != "none" &&
		(getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "")
}

// FromEnv returns the process's provider: OTLP over HTTP when Enabled, the
// global provider otherwise. service names the process when
// OTEL_SERVICE_NAME does not.
func FromEnv(ctx context.Context, service string, getenv func(string) string) (*tracing.Provider, error) {
	if !Enabled(getenv) {
		return tracing.Global(), nil
	}
	tp, err := SDKProvider(ctx, service, getenv)
	if err != nil {
		return nil, err
	}
	return tracing.New(tp), nil
}

// SDKProvider is the OTLP/HTTP SDK provider FromEnv wraps, for programs that
// install it as their global provider.
func SDKProvider(ctx context.Context, service string, getenv func(string) string) (*sdktrace.TracerProvider, error) {
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	if s := getenv("OTEL_SERVICE_NAME"); s != "" {
		service = s
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(service)))
	if err != nil {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}
