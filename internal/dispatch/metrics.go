package dispatch

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/triagehq/triage/internal/blob"
	"github.com/triagehq/triage/internal/execution"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/metrics"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/internal/tracing"
)

// Metrics is what the consumer reports (*metrics.Recorder). Every call is
// in-process bookkeeping: none may make a request of AWS.
type Metrics interface {
	Submitted(t *task.Task)                         // a direct send adopted as a new task
	Started(t *task.Task, at time.Time, first bool) // t claimed at at; first: its first start (the wait metric)
	Ran(t *task.Task, d time.Duration)              // its handler ran for d
	Failed(t *task.Task, why metrics.Failure)
	Finished(t *task.Task, o metrics.Outcome) // the attempt's outcome was recorded
	Dropped(why metrics.Drop)
	PutOff(why metrics.PutOff)
	KeyPutOff(t *task.Task, why metrics.PutOff) // a keyed control put t off
	Recovered(how metrics.Recovery)
	Slots(s metrics.Slots)
	// Step: a durable step of t's handler replayed, or just recorded.
	Step(t *task.Task, st task.Step, replayed bool)
}

// ExplainingGate is a Gate that also says which control put a task off,
// so put-offs can be counted by it (control.Controls is one).
type ExplainingGate interface {
	AdmitExplained(ctx context.Context, t *task.Task) (release func(), delay time.Duration, why metrics.PutOff, err error)
}

// admit asks the gate, and names the put-off when it refuses.
func (c *Consumer) admit(ctx context.Context, t *task.Task) (func(), time.Duration, metrics.PutOff, error) {
	if eg, ok := c.opt.Gate.(ExplainingGate); ok {
		return eg.AdmitExplained(ctx, t)
	}
	rel, delay, err := c.opt.Gate.Admit(ctx, t)
	return rel, delay, metrics.PutOffPaused, err
}

// noMetrics records nothing: the consumer's Metrics when Options has none.
type noMetrics struct{}

func (noMetrics) Submitted(*task.Task)                 {}
func (noMetrics) Started(*task.Task, time.Time, bool)  {}
func (noMetrics) Ran(*task.Task, time.Duration)        {}
func (noMetrics) Failed(*task.Task, metrics.Failure)   {}
func (noMetrics) Finished(*task.Task, metrics.Outcome) {}
func (noMetrics) Dropped(metrics.Drop)                 {}
func (noMetrics) PutOff(metrics.PutOff)                {}
func (noMetrics) KeyPutOff(*task.Task, metrics.PutOff) {}
func (noMetrics) Recovered(metrics.Recovery)           {}
func (noMetrics) Slots(metrics.Slots)                  {}
func (noMetrics) Step(*task.Task, task.Step, bool)     {}

// observeSteps counts each durable step of t's attempt (Metrics.Step) and
// adds it to the attempt's span as an event (tracing.EventStep).
func (c *Consumer) observeSteps(t *task.Task, span trace.Span) func(task.Step, bool) {
	return func(st task.Step, replayed bool) {
		c.mx.Step(t, st, replayed)
		kind, outcome := metrics.StepLabels(st, replayed)
		span.AddEvent(tracing.EventStep, trace.WithAttributes(tracing.AttrStepName.String(st.Name),
			tracing.AttrStepKind.String(kind), tracing.AttrStepOutcome.String(outcome)))
	}
}

// reportSlots records the slot figures as they are now.
func (c *Consumer) reportSlots() {
	gen, res, _ := c.slots.free()
	c.mx.Slots(metrics.Slots{
		Capacity: c.opt.Concurrency, Reserved: c.opt.ReservedHigh,
		Busy: c.opt.Concurrency - gen - res, ReservedBusy: c.opt.ReservedHigh - res,
	})
}

// failure names why an attempt failed, for the failures metric. timedOut
// says the run's deadline passed; stage is where the error arose.
func failure(err error, timedOut bool, stage failStage) metrics.Failure {
	var hp *execution.Panic
	switch {
	case stage == stageLookup:
		return metrics.FailNoHandler
	case stage == stagePayload && errors.Is(err, blob.ErrNotFound):
		return metrics.FailPayloadMissing
	case stage == stageResult:
		return metrics.FailBadResult
	case errors.As(err, &hp):
		return metrics.FailPanic
	case timedOut:
		return metrics.FailTimeout
	case !handler.Retriable(err):
		return metrics.FailPermanent
	}
	return metrics.FailError
}

// failStage is where in an attempt an error arose.
type failStage int

const (
	stageHandle failStage = iota
	stageLookup
	stagePayload
	stageResult
)
