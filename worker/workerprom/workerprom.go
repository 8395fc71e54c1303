// Package workerprom serves a worker's metrics for Prometheus. It is an
// opt-in, as package otlp is for traces: a worker that does not import it
// does not link the Prometheus client (package worker's test
// TestWorkerLinksNoExporter checks), and a worker that does serves every
// triage metric, under the names the CloudWatch dashboard uses, at
// /metrics on Config.MetricsAddr (TRIAGE_METRICS_ADDR) while Run runs.
//
//	w := worker.New(worker.Options{})
//	workerprom.Enable(w) // before w.Run
//
// The registry is the worker's own, never Prometheus's global one, with
// the Go runtime and process collectors beside triage's metrics. A Lambda
// worker (LambdaHandler, StartLambda) writes EMF to its log instead and
// ignores this.
package workerprom

import (
	"context"
	"log/slog"

	"github.com/triagehq/triage/internal/gohandlers"
	"github.com/triagehq/triage/internal/metrics"
	"github.com/triagehq/triage/internal/metrics/prom"
	"github.com/triagehq/triage/worker"
)

// Enable makes w's Run serve its metrics for Prometheus at
// Config.MetricsAddr. Without an address Run serves nothing, as without
// Enable.
func Enable(w *worker.Worker) {
	if set, ok := gohandlers.Of(w); ok {
		set.SetMetrics(func(addr string, log *slog.Logger) (metrics.Sink, func(context.Context) error, error) {
			return prom.Serve(addr, log)
		})
	}
}
