// Package submit is the one way a new task is accepted: the HTTP API's
// single and batch submits and the direct transport all call it, so a
// request gets the same answer whichever way it arrives.
//
// Every request goes through the same steps, in this order, and the first
// that refuses it decides the answer (a *fault.Error, whose Kind each transport
// answers with in its own terms; the HTTP statuses are internal/api's):
//
//  1. its fields (task.Request.Validate): ErrBadRequest, or ErrTooLarge
//     for a body too large, naming the field;
//  2. the deployment's task types (TRIAGE_TYPES): ErrBadRequest naming
//     "type";
//  3. the queue's depth (enqueue.Backpressure): ErrTooMany with a
//     RetryAfter;
//  4. the send and the record (enqueue.SubmitBatch): ErrUnavailable when
//     the queue or the table did not take the task (nothing was accepted;
//     the same request may be repeated), ErrInternal for anything else.
//
// Accepted, it is the new task (Created), or the task an earlier request
// with the same idempotency key made.
package submit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/triagehq/triage/internal/enqueue"
	"github.com/triagehq/triage/internal/fault"
	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/internal/tracing"
	"github.com/triagehq/triage/triagetype"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Enqueuer sends and records accepted tasks.
type Enqueuer interface {
	SubmitBatch(ctx context.Context, ts []*task.Task) []enqueue.Result
}

// Pressure refuses a task whose queue is too deep (*enqueue.Backpressure).
type Pressure interface {
	Check(ctx context.Context, p triagetype.Priority) error
}

// Service accepts new tasks.
type Service struct {
	enq      Enqueuer
	pressure Pressure // nil: no depth limit
	known    task.KnownTypes
	window   time.Duration
	now      func() time.Time
	tracer   trace.Tracer
	mx       Metrics
	fair     Router
}

// Metrics counts accepted tasks (*metrics.Recorder); it must make no
// request of AWS.
type Metrics interface {
	Submitted(t *task.Task)
}

// Options tunes a Service; zero values take the defaults in parentheses.
type Options struct {
	// Pressure is the depth check (nil: none).
	Pressure Pressure
	// Known are the only task types accepted (none: any).
	Known task.KnownTypes
	// DirectWindow: a task whose run_at is further away than this waits in
	// the table for the promoter instead of on the queue (queue.MaxDelay,
	// SQS's longest delay).
	DirectWindow time.Duration
	// Now is the clock (time.Now).
	Now func() time.Time
	// Tracing starts each accepted task's submit span (tracing.Global()).
	Tracing *tracing.Provider
	// Metrics, if set, counts each new task (not an idempotent repeat).
	Metrics Metrics
	// Fair, if set, routes a key past its window at its priority straight
	// to its held set, without a send (control.Controls.Route).
	Fair Router
}

// Router says where a new task goes: "" to its queue, or the scope whose
// held set it joins (*control.Controls).
type Router interface {
	Route(ctx context.Context, t *task.Task) string
}

// New returns the service over enq.
func New(enq Enqueuer, o Options) *Service {
	if o.DirectWindow <= 0 || o.DirectWindow > queue.MaxDelay {
		o.DirectWindow = queue.MaxDelay
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Tracing == nil {
		o.Tracing = tracing.Global()
	}
	return &Service{enq: enq, pressure: o.Pressure, known: o.Known, window: o.DirectWindow, now: o.Now, tracer: o.Tracing.Tracer(), mx: o.Metrics, fair: o.Fair}
}

// Outcome is one request's answer: the task when it was accepted, the
// refusal otherwise.
type Outcome struct {
	Task    *task.Task
	Created bool         // a new task, not an earlier one of the same idempotency key
	Err     *fault.Error // the refusal: its kind, code, message, field
}

// Status is the HTTP status of o, as a batch result carries it: 201 for a
// new task, 200 for the task of an earlier request with the same
// idempotency key, else the refusal's (fault.Status).
func (o Outcome) Status() int {
	switch {
	case o.Err != nil:
		return fault.Status(o.Err.Kind)
	case o.Created:
		return http.StatusCreated
	}
	return http.StatusOK
}

// Results are outs as a batch call answers them: each one's index,
// status, task or error.
func Results(outs []Outcome) []triagetype.BatchResult {
	res := make([]triagetype.BatchResult, len(outs))
	for i, o := range outs {
		res[i] = triagetype.BatchResult{Index: i, Status: o.Status()}
		if o.Task != nil {
			res[i].Task = o.Task.Public()
		}
		if o.Err != nil {
			res[i].Error = &triagetype.ErrorDetail{Code: o.Err.Code, Message: o.Err.Message, Field: o.Err.Field}
		}
	}
	return res
}

// Submit accepts or refuses one request.
func (s *Service) Submit(ctx context.Context, r task.Request) Outcome {
	return s.submit(ctx, []task.Request{r}, func(int) string { return "" })[0]
}

// SubmitBatch answers each of 1 to triagetype.MaxBatch requests on its own, as
// Submit would (fields named "tasks[i].<field>"), and sends the accepted
// ones in batches per priority; a request repeating an idempotency key of
// the batch gets the first one's task. A batch of the wrong size is
// refused whole.
func (s *Service) SubmitBatch(ctx context.Context, rs []task.Request) ([]Outcome, *fault.Error) {
	if len(rs) == 0 || len(rs) > triagetype.MaxBatch {
		return nil, &fault.Error{Kind: triagetype.ErrBadRequest, Code: triagetype.CodeInvalidField, Field: "tasks",
			Message: fmt.Sprintf("tasks: must hold 1 to %d tasks, got %d", triagetype.MaxBatch, len(rs))}
	}
	return s.submit(ctx, rs, func(i int) string { return fmt.Sprintf("tasks[%d].", i) }), nil
}

func (s *Service) submit(ctx context.Context, rs []task.Request, prefix func(int) string) []Outcome {
	out := make([]Outcome, len(rs))
	var ts []*task.Task
	var idx []int
	now := s.now().UTC()
	for i := range rs {
		t, e := s.prepare(ctx, &rs[i], now, prefix(i))
		if e != nil {
			out[i].Err = e
			continue
		}
		ts = append(ts, t)
		idx = append(idx, i)
	}
	if len(ts) == 0 {
		return out
	}
	spans := make([]trace.Span, len(ts))
	for j, t := range ts {
		spans[j] = s.startSpan(ctx, t, rs[idx[j]].TraceID)
	}
	for j, res := range s.enq.SubmitBatch(ctx, ts) {
		i := idx[j]
		if res.Err != nil {
			out[i].Err = Refusal(res.Err)
			var fe *task.FieldError
			if errors.As(res.Err, &fe) { // a parent in after that is no task
				out[i].Err = fe.Fault(prefix(i))
			}
			spans[j].SetStatus(codes.Error, out[i].Err.Message)
			spans[j].End()
			continue
		}
		out[i].Task, out[i].Created = res.Task, res.Created
		if res.Created && s.mx != nil {
			s.mx.Submitted(res.Task)
		}
		spans[j].SetAttributes(tracing.AttrTaskID.String(res.Task.ID), attribute.Bool("triage.task.created", res.Created))
		spans[j].End()
	}
	return out
}

// startSpan starts t's submit span, under ctx's span (the caller's trace
// context) or, failing that, in the trace named by a trace_id of 32 hex
// digits; it stores the span's traceparent with the task, and the trace's
// id as the task's trace_id unless the request gave one.
func (s *Service) startSpan(ctx context.Context, t *task.Task, requestTraceID string) trace.Span {
	ctx = tracing.WithTraceID(ctx, requestTraceID)
	ctx, span := s.tracer.Start(ctx, tracing.SpanSubmit, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(
		tracing.AttrTaskID.String(t.ID), tracing.AttrTaskType.String(t.Type), tracing.AttrPriority.String(string(t.Priority))))
	t.Traceparent = tracing.Traceparent(ctx)
	if id := tracing.TraceID(ctx); id != "" && requestTraceID == "" {
		t.TraceID = id
	}
	return span
}

// prepare runs steps 1 to 3 and builds the task.
func (s *Service) prepare(ctx context.Context, r *task.Request, now time.Time, prefix string) (*task.Task, *fault.Error) {
	if err := r.Validate(); err != nil {
		var fe *task.FieldError
		if errors.As(err, &fe) {
			return nil, fe.Fault(prefix)
		}
		return nil, &fault.Error{Kind: triagetype.ErrBadRequest, Code: triagetype.CodeBadRequest, Message: err.Error()}
	}
	if fe := s.known.Check(r.Type); fe != nil {
		return nil, fe.Fault(prefix)
	}
	t := r.NewTask(now, s.window)
	if s.fair != nil {
		if scope := s.fair.Route(ctx, t); scope != "" {
			t.Held, t.DispatchVersion = scope, task.NoMessage
			return t, nil // no message: no queue depth to check
		}
	}
	if s.pressure != nil {
		if err := s.pressure.Check(ctx, t.EffectivePriority); err != nil {
			return nil, Refusal(err)
		}
	}
	return t, nil
}

// Refusal is the answer to a submit that failed after validation:
// backpressure (ErrTooMany), a task the queue or the table did not take
// (ErrUnavailable: nothing was accepted and the same request may be
// repeated, with the same idempotency key too), or anything else
// (ErrInternal, with the cause kept for the caller's log: the HTTP API
// never shows it).
func Refusal(err error) *fault.Error {
	var oe *enqueue.OverloadedError
	switch {
	case errors.As(err, &oe):
		return &fault.Error{Kind: triagetype.ErrTooMany, Code: triagetype.CodeTooMany, Message: oe.Error(), RetryAfter: oe.RetryAfter}
	case errors.Is(err, enqueue.ErrNotSent):
		return &fault.Error{Kind: triagetype.ErrUnavailable, Code: triagetype.CodeUnavailable, RetryAfter: time.Second, Cause: err,
			Message: "the queue did not accept the task; nothing was recorded, try again"}
	case errors.Is(err, enqueue.ErrNotRecorded):
		return &fault.Error{Kind: triagetype.ErrUnavailable, Code: triagetype.CodeUnavailable, RetryAfter: time.Second, Cause: err,
			Message: "the task could not be recorded; it was not accepted, try again"}
	}
	return fault.Internal("submit", err)
}
