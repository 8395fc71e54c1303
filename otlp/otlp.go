// Package otlp exports triage's spans, and the rest of a program's, over
// OTLP/HTTP: it installs an OpenTelemetry SDK provider, configured by the
// exporter's standard OTEL_* variables, as the program's global provider.
//
// A worker built with package worker leaves its spans to the global
// provider and does not link an exporter: a plain worker binary stays
// small, and a program that has its own OpenTelemetry setup keeps it. Call
// Install in main to export the way triage's Lambda functions and triage
// dev do:
//
//	shutdown, err := otlp.Install(ctx, "my-worker")
//	if err != nil { … }
//	defer shutdown(context.Background())
//
// Install sets global state (otel.SetTracerProvider), so call it once, in
// main, never from library code.
package otlp

import (
	"context"
	"os"

	"go.opentelemetry.io/otel"

	"github.com/triagehq/triage/internal/tracing/otlpenv"
)

// Install makes an OTLP/HTTP exporting provider the global one when
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set
// (and OTEL_TRACES_EXPORTER is not "none"); otherwise it changes nothing.
// service names the process unless OTEL_SERVICE_NAME does. The returned
// shutdown flushes the spans not yet exported and stops the exporter; it
// is a no-op when nothing was installed.
func Install(ctx context.Context, service string) (shutdown func(context.Context) error, err error) {
	noop := func(context.Context) error { return nil }
	if !otlpenv.Enabled(os.Getenv) {
		return noop, nil
	}
	tp, err := otlpenv.SDKProvider(ctx, service, os.Getenv)
	if err != nil {
		return noop, err
	}
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}
