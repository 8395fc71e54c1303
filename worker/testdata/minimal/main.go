// Command minimal is the smallest worker a user writes: one handler, run
// until interrupted. worker's TestMinimalWorkerLinks counts its packages.
package main

import (
	"context"
	"log"
	"os/signal"
	"syscall"

	"github.com/triagehq/triage/worker"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	w := worker.New(worker.Options{})
	if err := w.Handle("greet", func(context.Context, *worker.Task) (any, error) { return "hi", nil }); err != nil {
		log.Fatal(err)
	}
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
