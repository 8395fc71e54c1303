package workertest_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"testing"
	"time"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/worker"
	"github.com/triagehq/triage/workertest"
)

// Invoice is a typed payload: its Kind is its task type.
type Invoice struct {
	Order  string `json:"order"`
	Amount int    `json:"amount"`
}

func (Invoice) Kind() string { return "invoice" }

// register is what the program's main calls on its worker; the test
// calls it too, so it tests the handlers and middleware that will run.
func register(w *worker.Worker) error {
	w.Use(func(ctx context.Context, t *worker.Task, next func(context.Context) error) error {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second) // an upstream call's own bound
		defer cancel()
		return next(ctx)
	})
	return worker.AddWorker(w, func(ctx context.Context, j *worker.Job[Invoice]) (any, error) {
		switch {
		case j.Args.Amount <= 0:
			return nil, worker.Cancel(errors.New("nothing to invoice"))
		case j.Args.Order == "":
			return nil, worker.Permanent(errors.New("no order"))
		}
		if err := j.Progress(ctx, 50, "rendered"); err != nil {
			return nil, err
		}
		return map[string]string{"invoice": "INV-" + j.Args.Order}, nil
	})
}

// A handler run in a test: its outcome as the consumer would read it,
// its result, its progress.
func Example() {
	w := worker.New(worker.Options{})
	if err := register(w); err != nil {
		log.Fatal(err)
	}
	tw := workertest.New(w)
	t := &testing.T{} // in a test, the *testing.T it is given
	ctx := context.Background()

	res, err := tw.Work(ctx, t, Invoice{Order: "A-7", Amount: 120}, nil)
	fmt.Println(res.Outcome, string(res.Result), res.Progress, err)

	res, err = tw.Work(ctx, t, Invoice{Order: "A-8"}, nil)
	fmt.Println(res.Outcome, res.Message, err)

	// The last of three attempts, of a task submitted at low priority and
	// promoted to high while it waited.
	res, err = tw.Work(ctx, t, Invoice{Amount: 5}, &workertest.WorkOptions{
		Submit:            []triage.SubmitOption{triage.WithPriority(triage.Low), triage.WithMaxAttempts(3)},
		Attempt:           3,
		EffectivePriority: triage.High,
	})
	fmt.Println(res.Outcome, errors.Is(err, worker.ErrPermanent))
	// Output:
	// completed {"invoice":"INV-A-7"} [{50 rendered}] <nil>
	// cancelled nothing to invoice <nil>
	// dead_lettered true
}
