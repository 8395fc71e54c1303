package worker_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/triagehq/triage/triageconfig"
	"github.com/triagehq/triage/worker"
)

// A consumer function with one Go handler. Deployed as the dispatcher's
// consumer (see infra: Props.ConsumerPackage), it runs on the consumer's
// schedule; elsewhere, call w.Run(ctx) instead.
func Example() {
	w := worker.New(worker.Options{})
	_ = w.Handle("welcome-email", func(ctx context.Context, t *worker.Task) (any, error) {
		var in struct {
			To string `json:"to"`
		}
		if err := t.Decode(&in); err != nil {
			return nil, worker.Permanent(err) // bad input: no retry
		}
		if in.To == "" {
			return nil, worker.Permanent(fmt.Errorf("payload.to is empty"))
		}
		// ... send it; a plain error is retried with backoff ...
		return map[string]string{"sent_to": in.To}, nil
	})
	w.StartLambda()
}

// Thumbnail is a task payload that names its task type, so AddWorker can
// register a worker for it without repeating the name.
type Thumbnail struct {
	URL   string `json:"url"`
	Width int    `json:"width"`
}

// Kind is the task type of a Thumbnail task.
func (Thumbnail) Kind() string { return "thumbnail" }

// A typed worker: the payload arrives decoded. Middleware wraps every
// attempt (here, timing it), and Snooze puts a task back without spending
// an attempt while its input is not ready.
func ExampleAddWorker() {
	// The deployment from TRIAGE_* (as the CDK construct sets them), and
	// two settings from code.
	cfg, err := triageconfig.Decode(nil)
	if err != nil {
		log.Fatal(err)
	}
	cfg.Concurrency, cfg.ReservedHigh = 16, 2
	w := worker.New(worker.Options{Config: &cfg})
	w.Use(func(ctx context.Context, t *worker.Task, next func(context.Context) error) error {
		start := time.Now()
		err := next(ctx)
		slog.Info("attempt", "task_id", t.ID, "type", t.Type, "took", time.Since(start), "error", err)
		return err
	})
	err = worker.AddWorker(w, func(ctx context.Context, j *worker.Job[Thumbnail]) (any, error) {
		if !uploaded(j.Args.URL) {
			return nil, worker.Snooze(30 * time.Second)
		}
		if j.Args.Width <= 0 {
			return nil, worker.Cancel(fmt.Errorf("width %d: nothing to make", j.Args.Width))
		}
		return map[string]string{"thumbnail": j.Args.URL + "?w=" + fmt.Sprint(j.Args.Width)}, nil
	})
	if err != nil {
		panic(err) // a duplicate or malformed task type
	}
	if err := w.Run(context.Background()); err != nil {
		slog.Error("worker stopped", "error", err)
	}
}

func uploaded(string) bool { return true }
