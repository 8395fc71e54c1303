package triage

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/trace"
)

// traceHeader is the W3C trace-context header.
const traceHeader = "traceparent"

// ContextWithTraceparent returns ctx carrying a W3C traceparent
// ("00-<32 hex trace id>-<16 hex span id>-<2 hex flags>") as the remote
// parent of what the client submits: the task's spans join that trace.
// With OpenTelemetry in your program you need not call it: the client
// sends the trace context of ctx's current span. An invalid traceparent
// leaves ctx as it is.
func ContextWithTraceparent(ctx context.Context, traceparent string) context.Context {
	parts := strings.Split(strings.TrimSpace(traceparent), "-")
	if len(parts) != 4 || parts[0] != "00" || len(parts[3]) != 2 {
		return ctx
	}
	tid, err := trace.TraceIDFromHex(parts[1])
	if err != nil {
		return ctx
	}
	sid, err := trace.SpanIDFromHex(parts[2])
	if err != nil {
		return ctx
	}
	var flags trace.TraceFlags
	if parts[3] == "01" {
		flags = trace.FlagsSampled
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags, Remote: true})
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// traceparentOf is the W3C traceparent of ctx's span, "" without one.
func traceparentOf(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + sc.TraceFlags().String()
}
