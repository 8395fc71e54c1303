package dispatch

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/internal/tracing"
)

// startAttempt starts the span of t's current attempt as a child of its
// submit span (t.Traceparent), so every attempt of a task joins the
// task's one trace. The handler gets the returned context.
func (c *Consumer) startAttempt(ctx context.Context, t *task.Task) (context.Context, trace.Span) {
	ctx = tracing.WithTraceID(tracing.WithParent(ctx, t.Traceparent), t.TraceID)
	return c.tracer.Start(ctx, tracing.SpanAttempt, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
		tracing.AttrTaskID.String(t.ID), tracing.AttrTaskType.String(t.Type),
		tracing.AttrPriority.String(string(t.Priority)), tracing.AttrEffective.String(string(t.EffectivePriority)),
		tracing.AttrAttempt.Int(t.Attempts)))
}

// endAttempt records the attempt's outcome on its span and ends it: the
// outcome is what execute does next with err (retry, dead letter, ...).
func endAttempt(span trace.Span, t *task.Task, err error) {
	outcome := "completed"
	switch {
	case err == nil:
	case errors.Is(err, errLeaseLost):
		outcome = "lease_lost"
	default:
		if _, ok := handler.SnoozeOf(err); ok {
			outcome = "snoozed"
			break
		}
		switch {
		case errors.Is(err, handler.ErrCancel):
			outcome = "cancelled"
		case handler.Retriable(err) && t.Attempts < t.MaxAttempts:
			outcome = "retrying"
		default:
			outcome = "dead_lettered"
		}
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.SetAttributes(tracing.AttrOutcome.String(outcome))
	span.End()
}
