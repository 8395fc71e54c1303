package worker_test

import (
	"context"
	"fmt"

	"github.com/triagehq/triage/worker"
)

// A consumer function with one Go handler. Deployed as the dispatcher's
// consumer (see infra: Props.ConsumerPackage), it runs on the consumer's
// schedule; elsewhere, call w.Run(ctx) instead.
func Example() {
	w := worker.New(worker.Options{})
	w.Handle("welcome-email", func(ctx context.Context, t *worker.Task) (any, error) {
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
