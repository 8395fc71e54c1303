package devserver

import (
	"fmt"
	"net/http"

	"github.com/triagehq/triage/internal/metrics"
	"github.com/triagehq/triage/internal/metrics/prom"
)

// MetricsPath is where `triage dev` serves its Prometheus metrics, beside
// the API, without a token: the server listens on loopback only by default
// (TRIAGE_ADDR), and the metrics carry counts, not task data.
const MetricsPath = "/metrics"

// devMetrics is the dev server's one recorder, on a Prometheus registry of
// its own, shared by its API, consumer and promoter.
func devMetrics() (*metrics.Recorder, *prom.Sink, error) {
	sink, err := prom.New()
	if err != nil {
		return nil, nil, fmt.Errorf("metrics: %w", err)
	}
	return metrics.New(sink), sink, nil
}

// withMetrics serves sink at MetricsPath and everything else with api.
func withMetrics(api http.Handler, sink *prom.Sink) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET "+MetricsPath, sink.Handler())
	mux.Handle("/", api)
	return mux
}
