package stacktest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/handler"
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
