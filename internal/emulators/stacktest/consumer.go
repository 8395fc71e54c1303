package stacktest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/app/consumerapp"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/eventsource"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/metrics"
	"github.com/triagehq/triage/triagetype"
)

// FastDispatch is the consumer's options for tests: polls of 1 s, short
// empty backoffs and a 5 s lease, so that a test sees a lost lease or an
// idle queue in seconds rather than minutes.
func FastDispatch() dispatch.Options {
	return dispatch.Options{PollWait: time.Second, EmptyBackoff: 200 * time.Millisecond, Lease: 5 * time.Second, LeaseMargin: time.Second}
}

// Registry is a registry that runs h for tasks of type typ.
func Registry(typ string, h handler.Handler) *handler.Registry {
	r := handler.NewRegistry()
	r.Register(typ, h)
	return r
}

// Runner is what Run starts: a consumer, a promoter, anything that runs
// until its context ends.
type Runner interface {
	Run(ctx context.Context) error
}

// Run starts r and returns a function that stops it and waits for it to
// return (at most 30 s, else the test fails). The test's cleanup calls
// stop too, so a test that fails early leaves nothing running.
func Run(t testing.TB, r Runner) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = r.Run(ctx); close(done) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Errorf("%T did not stop within 30 s", r)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// Events is a Runner that starts the consumer the way Lambda does: a
// local event source on a's three queues invokes the consumer function's
// handler (consumerapp.FunctionHandler) with SQS events, one consumer per
// environment, each with opt and reg.
func Events(a *app.App, reg *handler.Registry, opt dispatch.Options) *eventsource.Source {
	var urls []string
	for _, p := range triagetype.Priorities() {
		urls = append(urls, a.Queues.URL(p))
	}
	return &eventsource.Source{
		SQS: a.SQS, Queues: urls, Wait: time.Second,
		NewFunction: func() (lambda.Handler, error) {
			c := consumerapp.New(a, reg, opt, dispatch.Deps{Metrics: metrics.New()})
			return lambda.NewHandler(consumerapp.FunctionHandler(c, a.Queues, consumerapp.LambdaReserve)), nil
		},
	}
}
