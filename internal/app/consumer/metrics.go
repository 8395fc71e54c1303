package consumer

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/metrics"
)

// EMFInterval is how often a consumer function invocation flushes its EMF
// metrics while it runs (and once more at its end), so a 14-minute
// invocation's counts land in the minutes they happened.
const EMFInterval = time.Minute

// lambdaMetrics is the consumer function's recorder: EMF lines on stdout,
// which CloudWatch Logs turns into metrics (no API call, no latency).
func lambdaMetrics(a *app.App) *metrics.Recorder {
	return metrics.New(metrics.NewEMF(os.Stdout, a.Config.MetricsNamespace, nil))
}

// flushing wraps a function handler so the metrics m holds are flushed
// every EMFInterval during each invocation and once at its end. m that
// does not buffer (no Flush method) is left alone.
func flushing[E, R any](h func(context.Context, E) (R, error), m dispatch.Metrics, log *slog.Logger) func(context.Context, E) (R, error) {
	f, ok := m.(metrics.Flusher)
	if !ok {
		return h
	}
	flush := func() {
		if err := f.Flush(); err != nil {
			log.Warn("metrics flush failed", "error", err)
		}
	}
	return func(ctx context.Context, ev E) (R, error) {
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			t := time.NewTicker(EMFInterval)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					flush()
				}
			}
		}()
		r, err := h(ctx, ev)
		close(stop)
		<-done
		flush()
		return r, err
	}
}
