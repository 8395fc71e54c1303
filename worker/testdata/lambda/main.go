// Command lambda is a user's consumer function built on the worker
// package: two handlers, served with StartLambda. functions'
// TestWorkerFunctionSQSEvent builds it as a bootstrap and invokes it with
// the SQS event a queue's event source mapping sends.
package main

import (
	"context"
	"log"
	"time"

	"github.com/triagehq/triage/worker"
)

func main() {
	w := worker.New(worker.Options{})
	if err := w.Handle("greet", func(context.Context, *worker.Task) (any, error) { return "hi", nil }); err != nil {
		log.Fatal(err)
	}
	// later is never ready: its message must live on (a batch item failure).
	if err := w.Handle("later", func(context.Context, *worker.Task) (any, error) { return nil, worker.Snooze(time.Hour) }); err != nil {
		log.Fatal(err)
	}
	w.StartLambda()
}
