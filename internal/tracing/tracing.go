// Package tracing carries one OpenTelemetry trace through a task's whole
// life: the submit, every attempt, and the requests a handler makes.
//
// The trace context travels as a W3C traceparent. A submitter's arrives
// with the request (the HTTP header, the Go client's context, or a direct
// send's SQS message attribute); the submit span is started under it and
// its own traceparent is stored with the task. Each attempt's span is a
// child of the submit span, so a task's attempts, however many consumers
// ran them and however long apart, share one trace id. A handler gets the
// attempt span's context: Go handlers in ctx, webhook handlers as a
// traceparent header, Lambda handlers in the invocation payload.
//
// Spans go to the program's global provider (a no-op unless the program
// installed one), so tracing costs nothing where no one collects it. The
// OTLP exporter lives in package otlpenv, which only the programs that
// export themselves link (the Lambda functions, triage dev, and a user's
// worker through the public package otlp): it brings protobuf and gRPC's
// status types, about 150 packages a plain worker does without.
package tracing

import (
	"context"
	"crypto/rand"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName names triage's tracer.
const ScopeName = "github.com/triagehq/triage"

// Header is the W3C trace-context header (and SQS message attribute)
// carrying a traceparent.
const Header = "traceparent"

// Span names.
const (
	SpanSubmit  = "triage.submit"
	SpanAttempt = "triage.attempt"
	SpanPromote = "triage.promote"
)

// EventStep is the event an attempt's span gets for each durable step its
// handler meets, with AttrStepName, AttrStepKind and AttrStepOutcome (the
// labels of the triage_steps_total metric).
const EventStep = "triage.step"

// Attribute keys set on triage's spans.
const (
	AttrTaskID      = attribute.Key("triage.task.id")
	AttrTaskType    = attribute.Key("triage.task.type")
	AttrPriority    = attribute.Key("triage.task.priority")
	AttrEffective   = attribute.Key("triage.task.effective_priority")
	AttrAttempt     = attribute.Key("triage.task.attempt")
	AttrOutcome     = attribute.Key("triage.attempt.outcome")
	AttrStepName    = attribute.Key("triage.step.name")
	AttrStepKind    = attribute.Key("triage.step.kind")
	AttrStepOutcome = attribute.Key("triage.step.outcome")
)

// Provider is the tracer provider of a triage process.
type Provider struct {
	trace.TracerProvider
	sdk exporter // nil when spans go to the global provider
}

// exporter is what Flush and Shutdown need of an SDK provider (the
// OpenTelemetry SDK's *trace.TracerProvider has both), named here so that
// this package does not link the SDK: a worker that exports nothing does
// without it.
type exporter interface {
	ForceFlush(ctx context.Context) error
	Shutdown(ctx context.Context) error
}

// Tracer is triage's tracer from p.
func (p *Provider) Tracer() trace.Tracer { return p.TracerProvider.Tracer(ScopeName) }

// Flush exports every finished span now. A Lambda handler calls it before
// it returns, since a frozen environment exports nothing.
func (p *Provider) Flush(ctx context.Context) error {
	if p == nil || p.sdk == nil {
		return nil
	}
	return p.sdk.ForceFlush(ctx)
}

// Shutdown flushes and stops the exporter.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil || p.sdk == nil {
		return nil
	}
	return p.sdk.Shutdown(ctx)
}

// Exporting reports whether p exports spans itself (OTLP).
func (p *Provider) Exporting() bool { return p != nil && p.sdk != nil }

// Global is the provider that leaves spans to the program's global
// provider (otel.GetTracerProvider): what library code uses.
func Global() *Provider { return &Provider{TracerProvider: otel.GetTracerProvider()} }

// New wraps tp: an SDK provider (OTLP, or an in-memory exporter in tests)
// is flushed and shut down through p.
func New(tp trace.TracerProvider) *Provider {
	p := &Provider{TracerProvider: tp}
	if sdk, ok := tp.(exporter); ok {
		p.sdk = sdk
	}
	return p
}

var propagator = propagation.TraceContext{}

// Traceparent is the W3C traceparent of ctx's span, "" when ctx has no
// valid span context.
func Traceparent(ctx context.Context) string {
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	return c[Header]
}

// WithParent returns ctx with traceparent's span as the remote parent of
// the spans started from it; ctx itself when traceparent is not valid.
func WithParent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return propagator.Extract(ctx, propagation.MapCarrier{Header: traceparent})
}

// WithTraceID returns ctx with a remote parent in trace id (32 lowercase
// hex digits, as a task's trace_id may be) when ctx has no span context
// yet: a caller that set only a trace id gets its spans in that trace.
// The parent's span id is random: the caller's span is not known.
func WithTraceID(ctx context.Context, id string) context.Context {
	if trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	tid, err := trace.TraceIDFromHex(id)
	if err != nil || !tid.IsValid() {
		return ctx
	}
	var sid trace.SpanID
	_, _ = rand.Read(sid[:])
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// TraceID is the trace id of ctx's span in hex, "" when there is none.
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	return sc.TraceID().String()
}
