// Package worker runs triage tasks with your own Go handlers.
//
// The stock consumer function runs the Lambda and webhook routes of
// TRIAGE_ROUTES. When your handlers are Go code, build your own consumer
// instead: register a worker per task type and start it, as a Lambda
// function started by the priority queues (or the opt-in schedule) or as
// a long-running process. It is
// the same consumer: weighted polling over the priority queues, claims with
// leases, retries with backoff, dead letters, pause and limits, configured
// by the same settings (triageconfig.Config, from code or TRIAGE_* variables). It
// links only the consumer, not the API, dashboard or promoter.
//
//	type Thumbnail struct{ URL string `json:"url"` }
//
//	func (Thumbnail) Kind() string { return "thumbnail" }
//
//	w := worker.New(worker.Options{})
//	err := worker.AddWorker(w, func(ctx context.Context, j *worker.Job[Thumbnail]) (any, error) {
//		if !ready(j.Args.URL) {
//			return nil, worker.Snooze(30 * time.Second) // no attempt spent
//		}
//		return map[string]string{"thumbnail": thumb(ctx, j.Args.URL)}, nil
//	})
//	w.StartLambda() // or: err := w.Run(ctx)
//
// A handler's error is retried with backoff while attempts remain, unless
// it is Permanent (dead letter now), Cancel (the task is cancelled),
// Snooze (run again later) or RetryAfter (its key or type waits, as an
// upstream's 429 asks). Middleware added with Use wraps every attempt.
// Package workertest runs a Worker's handlers in a test, without AWS, and
// reads each attempt's outcome with the consumer's own decision.
package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/app/consumer"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/gohandlers"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/metrics"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triageconfig"
	"github.com/triagehq/triage/triagetype"
)

// Task is one attempt of a task, as a handler sees it.
type Task struct {
	ID   string
	Type string
	// Key is the task's fairness key as submitted ("" for none: such tasks
	// share the key "default"): the key its limits and weights apply to,
	// and the scope RetryAfter(d, ScopeKey) holds.
	Key         string
	Payload     json.RawMessage
	Priority    triage.Priority // the priority it was submitted with
	Attempt     int             // 1 on the first run
	MaxAttempts int
	TraceID     string
	// EffectivePriority is the priority the attempt runs at: higher than
	// Priority when the promoter moved the task after it waited
	// (Config.LowAfter, MediumAfter), never lower. Log or meter by
	// Priority, what the submitter asked for; size the work for urgency
	// by EffectivePriority.
	EffectivePriority triage.Priority
	// Parents are the tasks this one waited for (its after list, or its
	// workflow node's), with their status and result or error.
	Parents []triagetype.Parent

	req handler.Request // reports go to its Reporter; its Checkpoint is the last one saved
}

// Progress reports how far the attempt has got: percent from 0 to 100 and
// a short message (at most 256 bytes), shown by GET, the CLI and the
// dashboard. Report as often as you like: the latest report is written
// with the task's next heartbeat, or after task.ProgressInterval (5 s) at
// the soonest, and the last one with the attempt's outcome, so reports
// never multiply the task's writes. It fails only on invalid input.
func (t *Task) Progress(ctx context.Context, percent int, message string) error {
	return t.req.ReportProgress(ctx, percent, message)
}

// Checkpoint saves v (marshalled to JSON, at most 3 KiB) as the task's
// checkpoint: a later attempt (a retry after a failure, crash or snooze)
// gets it from LastCheckpoint and can resume from there. It is written as
// progress is, so one saved moments before a crash may be lost; one saved
// before the handler returns an error is always kept.
func (t *Task) Checkpoint(ctx context.Context, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("checkpoint of task %s: %w", t.ID, err)
	}
	if err := t.req.SaveCheckpoint(ctx, b); err != nil {
		return fmt.Errorf("checkpoint of task %s: %w", t.ID, err)
	}
	t.req.Checkpoint = b
	return nil
}

// LastCheckpoint unmarshals the task's last saved checkpoint into v and
// reports whether there was one: saved by an earlier attempt, or by this
// one.
func (t *Task) LastCheckpoint(v any) (bool, error) {
	if len(t.req.Checkpoint) == 0 {
		return false, nil
	}
	if err := json.Unmarshal(t.req.Checkpoint, v); err != nil {
		return true, fmt.Errorf("decode checkpoint of task %s: %w", t.ID, err)
	}
	return true, nil
}

// Decode unmarshals the payload into v.
func (t *Task) Decode(v any) error {
	if len(t.Payload) == 0 {
		return fmt.Errorf("task %s has no payload", t.ID)
	}
	if err := json.Unmarshal(t.Payload, v); err != nil {
		return fmt.Errorf("decode payload of task %s: %w", t.ID, err)
	}
	return nil
}

// HandlerFunc runs one attempt of a task. Its result, marshalled to JSON,
// becomes the task's result (nil: none). An error fails the attempt: the
// task is retried with backoff while it has attempts left, unless the error
// is Permanent. The context ends at the task's timeout, or when the task is
// cancelled while it runs.
type HandlerFunc func(ctx context.Context, t *Task) (any, error)

// ErrPermanent matches (errors.Is) every error made with Permanent.
var ErrPermanent = handler.ErrPermanent

// Permanent marks err as one retrying cannot fix: the task goes straight
// to dead_letter with err's message.
func Permanent(err error) error { return handler.Permanent(err) }

// ErrCancel matches (errors.Is) every error made with Cancel.
var ErrCancel = handler.ErrCancel

// Cancel ends the task as cancelled rather than failed: no retry, no dead
// letter, and err's message recorded as the reason. For work that has
// become pointless (the order it was for is gone).
func Cancel(err error) error { return handler.Cancel(err) }

// Snooze puts the task back to run again after d (1 s to 12 h) without
// spending an attempt: for work that is not ready yet. The task waits in
// status retrying meanwhile.
func Snooze(d time.Duration) error { return handler.Snooze(d) }

// Middleware runs around every attempt of every handler: it may change the
// context (a span, a logger), call next to run the attempt (or not), and
// look at or replace its error. Register it with Worker.Use.
type Middleware func(ctx context.Context, t *Task, next func(ctx context.Context) error) error

// Options configures a Worker.
type Options struct {
	// Config is the dispatcher's configuration: which deployment (Prefix,
	// or Table and queue URLs), concurrency, weights, lease, retry backoff,
	// routes. nil reads the process environment (triageconfig.Decode).
	// Fields left zero take the defaults documented on triageconfig.Config, so
	// to change a few settings and keep the environment's for the rest,
	// start from it:
	//
	//	cfg, err := triageconfig.Decode(nil)
	//	cfg.Concurrency = 16
	//	w := worker.New(worker.Options{Config: &cfg})
	//
	// AWS settings (region, credentials, AWS_ENDPOINT_URL*) always come
	// from the process environment, the standard way.
	Config *triageconfig.Config
	// Logger receives the worker's JSON logs (default: stderr, at
	// Config.LogLevel).
	Logger *slog.Logger
}

// Worker runs the task types registered with Handle or AddWorker.
type Worker struct {
	// link lets package workertest run the handlers as the consumer does
	// (gohandlers.Of); it adds no methods to Worker.
	link
	opt      Options
	handlers *gohandlers.Set // adapted to the dispatcher's types as they are registered
}

type link = gohandlers.Link

// New returns a worker with no handlers. Its configuration is checked
// when it starts (Run, LambdaHandler).
func New(opt Options) *Worker {
	set := &gohandlers.Set{}
	return &Worker{link: gohandlers.NewLink(set), opt: opt, handlers: set}
}

// ErrDuplicate is returned when a task type is registered twice.
var ErrDuplicate = handler.ErrDuplicate

// Handle registers h for tasks of type typ. A type registered before is an
// error (ErrDuplicate), as is a name the API would refuse. Register every
// handler before Run or StartLambda.
func (w *Worker) Handle(typ string, h HandlerFunc) error {
	if err := task.ValidateType(typ); err != nil {
		return fmt.Errorf("worker: task type %q: %w", typ, err)
	}
	if err := w.handlers.Add(typ, adapt(h)); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	return nil
}

// Use adds middleware around every attempt; the first added runs outermost.
func (w *Worker) Use(mws ...Middleware) {
	for _, mw := range mws {
		w.handlers.Use(middleware(mw))
	}
}

// Args is a payload type that names its task type, as River's JobArgs
// does: AddWorker registers a worker for T under T's Kind. It is
// triage.Args, the interface the client's SubmitArgs takes the type
// from, so a producer and its worker name a type in one place.
type Args = triage.Args

// Job is one attempt of a task whose payload was decoded into T.
type Job[T any] struct {
	*Task
	Args T
}

// WorkFunc runs one attempt of a typed task. Its result and error mean
// what HandlerFunc's do.
type WorkFunc[T any] func(ctx context.Context, j *Job[T]) (any, error)

// AddWorker registers fn for the task type named by T's Kind. Each
// attempt's payload is decoded into a T; a payload that does not decode
// fails the task permanently (retrying cannot fix it).
func AddWorker[T Args](w *Worker, fn WorkFunc[T]) error {
	var zero T
	return AddWorkerKind(w, zero.Kind(), fn)
}

// AddWorkerKind registers fn for task type kind, decoding payloads into T:
// for payload types that do not implement Args, or one type under two kinds.
func AddWorkerKind[T any](w *Worker, kind string, fn WorkFunc[T]) error {
	return w.Handle(kind, func(ctx context.Context, t *Task) (any, error) {
		j := &Job[T]{Task: t}
		if len(t.Payload) > 0 && string(t.Payload) != "null" {
			if err := json.Unmarshal(t.Payload, &j.Args); err != nil {
				return nil, Permanent(fmt.Errorf("decode payload of task %s into %T: %w", t.ID, j.Args, err))
			}
		}
		return fn(ctx, j)
	})
}

// ErrNoHandlers is returned by Run when nothing was registered, neither
// with Handle nor through TRIAGE_ROUTES.
var ErrNoHandlers = errors.New("worker: no handlers registered")

// Run polls and runs tasks until ctx ends, then waits for running tasks to
// finish (up to the drain timeout) and returns nil. It returns an error
// when the configuration is invalid or AWS cannot be reached at start.
// After workerprom.Enable(w), it serves Prometheus metrics at /metrics on
// Config.MetricsAddr (TRIAGE_METRICS_ADDR) while it runs; without it a
// set MetricsAddr is a start-up error, since nothing would serve it.
func (w *Worker) Run(ctx context.Context) error {
	a, reg, err := w.assemble(ctx)
	if err != nil {
		return err
	}
	var deps dispatch.Deps
	if addr := a.Config.MetricsAddr; addr != "" {
		serve := w.handlers.Metrics()
		if serve == nil {
			return fmt.Errorf("worker: %s is set, but no metrics server is: call workerprom.Enable(w) (package github.com/triagehq/triage/worker/workerprom) to serve Prometheus metrics there", triageconfig.EnvMetricsAddr)
		}
		sink, stop, err := serve(addr, a.Log)
		if err != nil {
			return fmt.Errorf("worker: %w (%s)", err, triageconfig.EnvMetricsAddr)
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := stop(ctx); err != nil {
				a.Log.Warn("metrics server", "error", err.Error())
			}
		}()
		deps.Metrics = metrics.New(sink)
	}
	return consumer.New(a, reg, dispatch.Options{}, deps).Run(ctx)
}

// LambdaEvent is one event the consumer function is invoked with: an SQS
// event from a priority queue's event source mapping (SQS set), or any
// other event (the opt-in schedule's, the promoter's fan-out), read as
// EventBridge's (Other).
type LambdaEvent = consumer.Invocation

// LambdaResponse is what one invocation returns: for an SQS event the
// batch item failures, exactly the shape Lambda reads with
// ReportBatchItemFailures (SQS); otherwise the scheduled run's summary.
type LambdaResponse = consumer.Response

// LambdaSummary is what a scheduled invocation reports: the consumer
// instance's id and how long it polled.
type LambdaSummary = consumer.LambdaSummary

// LambdaHandler returns the handler of a consumer Lambda function, for
// lambda.Start; build it once, at cold start. It answers both ways the
// function is started:
//
//   - An SQS event (the queues' event source mappings, the default
//     deployment) runs its records through the claim path, keeps polling
//     the queues while there is work and returns once they have been idle
//     for a short while, listing every record it did not delete (handed
//     back, put off, retrying, not a task's message) as a batch item
//     failure, so Lambda deletes none of them.
//   - Any other event (the opt-in schedule) polls until
//     consumer.LambdaReserve (40 s) before the deadline, then drains.
func (w *Worker) LambdaHandler(ctx context.Context) (func(context.Context, LambdaEvent) (LambdaResponse, error), error) {
	a, reg, err := w.assemble(ctx)
	if err != nil {
		return nil, err
	}
	return consumer.Function(a, reg, dispatch.Options{}, dispatch.Deps{}), nil
}

// StartLambda serves the Lambda handler; it does not return. A
// configuration error is logged and exits, so the function's init fails
// visibly.
func (w *Worker) StartLambda() {
	h, err := w.LambdaHandler(context.Background())
	if err != nil {
		w.logger("info").Error("worker start failed", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(h)
}

// assemble builds the app from the configuration, and the handler
// registry: the registered Go handlers plus the configured routes.
func (w *Worker) assemble(ctx context.Context) (*app.App, *handler.Registry, error) {
	cfg, err := triageconfig.Load(w.opt.Config)
	if err != nil {
		return nil, nil, fmt.Errorf("worker: configuration: %w", err)
	}
	a, err := app.New(ctx, cfg, w.logger(cfg.LogLevel))
	if err != nil {
		return nil, nil, fmt.Errorf("worker: %w", err)
	}
	reg := w.handlers.Registry()
	if err := consumer.AddRoutes(a, reg, false); err != nil {
		return nil, nil, fmt.Errorf("worker: %w", err)
	}
	if len(reg.Types()) == 0 {
		return nil, nil, ErrNoHandlers
	}
	return a, reg, nil
}

func (w *Worker) logger(level string) *slog.Logger {
	if w.opt.Logger != nil {
		return w.opt.Logger
	}
	return app.NewLogger(os.Stderr, level)
}

func taskOf(r handler.Request) *Task {
	return &Task{
		ID: r.ID, Type: r.Type, Key: r.Key, Payload: r.Payload, Priority: r.Priority, EffectivePriority: r.EffectivePriority,
		Attempt: r.Attempt, MaxAttempts: r.MaxAttempts, TraceID: r.TraceID,
		Parents: r.Parents,
		req:     r,
	}
}

// middleware turns a Middleware into the dispatcher's.
func middleware(mw Middleware) handler.Middleware {
	return func(ctx context.Context, r handler.Request, next handler.Func) (json.RawMessage, error) {
		var out json.RawMessage
		err := mw(ctx, taskOf(r), func(ctx context.Context) error {
			var err error
			out, err = next(ctx, r)
			return err
		})
		if err != nil {
			return nil, err
		}
		return out, nil
	}
}

// adapt turns a HandlerFunc into the dispatcher's handler.
func adapt(h HandlerFunc) handler.Handler {
	return handler.Func(func(ctx context.Context, r handler.Request) (json.RawMessage, error) {
		out, err := h(ctx, taskOf(r))
		if err != nil {
			return nil, err
		}
		if out == nil {
			return nil, nil
		}
		if raw, ok := out.(json.RawMessage); ok {
			return raw, nil
		}
		b, err := json.Marshal(out)
		if err != nil {
			return nil, handler.Permanent(fmt.Errorf("marshal result of task %s: %w", r.ID, err))
		}
		return b, nil
	})
}
