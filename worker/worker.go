// Package worker runs triage tasks with your own Go handlers.
//
// The stock consumer function runs the Lambda and webhook routes of
// TRIAGE_ROUTES (and the demo handlers when TRIAGE_DEMO_HANDLERS is true).
// When your handlers are Go code, build your own consumer instead: register
// a function per task type and start the worker, as a Lambda function on
// the consumer's schedule or as a long-running process. It is the same
// consumer: weighted polling over the priority queues, claims with leases,
// retries with backoff, dead letters, pause and limits, configured by the
// same TRIAGE_* variables.
//
//	w := worker.New(worker.Options{})
//	w.Handle("resize", func(ctx context.Context, t *worker.Task) (any, error) {
//		var in struct{ URL string `json:"url"` }
//		if err := t.Decode(&in); err != nil {
//			return nil, worker.Permanent(err) // retrying cannot fix bad input
//		}
//		return map[string]string{"thumbnail": thumb(ctx, in.URL)}, nil
//	})
//	w.StartLambda() // or: err := w.Run(ctx)
package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/app/consumerapp"
	"github.com/triagehq/triage/internal/config"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/handler"
)

// Task is one attempt of a task, as a handler sees it.
type Task struct {
	ID          string
	Type        string
	Payload     json.RawMessage
	Priority    string // the priority it was submitted with
	Attempt     int    // 1 on the first run
	MaxAttempts int
	TraceID     string
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

// Options configures a Worker. The zero value reads the process
// environment and logs JSON to stderr.
type Options struct {
	// Getenv reads the TRIAGE_* settings (default os.Getenv). AWS settings
	// (region, credentials, AWS_ENDPOINT_URL*) always come from the
	// process environment, the standard way.
	Getenv func(string) string
	// Logger receives the worker's JSON logs (default: stderr, at
	// TRIAGE_LOG_LEVEL).
	Logger *slog.Logger
}

// Worker runs the task types registered with Handle.
type Worker struct {
	opt      Options
	handlers map[string]HandlerFunc
}

// New returns a worker with no handlers.
func New(opt Options) *Worker {
	if opt.Getenv == nil {
		opt.Getenv = os.Getenv
	}
	return &Worker{opt: opt, handlers: map[string]HandlerFunc{}}
}

// Handle registers h for tasks of type typ, replacing any earlier handler
// of typ. Register every handler before Run or StartLambda.
func (w *Worker) Handle(typ string, h HandlerFunc) {
	w.handlers[typ] = h
}

// ErrNoHandlers is returned by Run when nothing was registered, neither
// with Handle nor through TRIAGE_ROUTES.
var ErrNoHandlers = errors.New("worker: no handlers registered")

// Run polls and runs tasks until ctx ends, then waits for running tasks to
// finish (up to the drain timeout) and returns nil. It returns an error
// when the configuration is invalid or AWS cannot be reached at start.
func (w *Worker) Run(ctx context.Context) error {
	a, reg, err := w.assemble(ctx)
	if err != nil {
		return err
	}
	return consumerapp.New(a, reg, dispatch.Options{}).Run(ctx)
}

// LambdaSummary is what one invocation of the Lambda handler returns.
type LambdaSummary = consumerapp.LambdaSummary

// LambdaHandler returns the handler of a consumer Lambda function, for
// lambda.Start: each invocation (the consumer's EventBridge schedule)
// polls until consumerapp.LambdaReserve (40 s) before its deadline, then
// drains. Build it once, at cold start.
func (w *Worker) LambdaHandler(ctx context.Context) (func(context.Context, events.EventBridgeEvent) (LambdaSummary, error), error) {
	a, reg, err := w.assemble(ctx)
	if err != nil {
		return nil, err
	}
	return consumerapp.Lambda(a, reg), nil
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

// assemble builds the app from the configuration and the handler
// registry: the registered Go handlers plus the configured routes.
func (w *Worker) assemble(ctx context.Context) (*app.App, *handler.Registry, error) {
	cfg, err := config.FromEnv(w.opt.Getenv)
	if err != nil {
		return nil, nil, fmt.Errorf("worker: configuration: %w", err)
	}
	a, err := app.New(ctx, cfg, w.logger(cfg.LogLevel))
	if err != nil {
		return nil, nil, fmt.Errorf("worker: %w", err)
	}
	reg := handler.NewRegistry()
	for typ, h := range w.handlers {
		reg.Register(typ, adapt(h))
	}
	if err := consumerapp.AddRoutes(a, reg, false); err != nil {
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

// adapt turns a HandlerFunc into the dispatcher's handler.
func adapt(h HandlerFunc) handler.Handler {
	return handler.Func(func(ctx context.Context, r handler.Request) (json.RawMessage, error) {
		out, err := h(ctx, &Task{
			ID: r.ID, Type: r.Type, Payload: r.Payload, Priority: string(r.Priority),
			Attempt: r.Attempt, MaxAttempts: r.MaxAttempts, TraceID: r.TraceID,
		})
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
