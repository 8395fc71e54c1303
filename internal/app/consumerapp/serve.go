package consumerapp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/metrics"
	"github.com/triagehq/triage/internal/metrics/prom"
	"github.com/triagehq/triage/triageconfig"
)

// Run runs a long-lived consumer (the worker's Run) until ctx ends. When
// Config.MetricsAddr is set (TRIAGE_METRICS_ADDR) and opt has no Metrics,
// it also serves the consumer's Prometheus metrics at /metrics there, from
// a registry of its own, until the consumer has drained; a listen failure
// is an error before any task is taken.
func Run(ctx context.Context, a *app.App, reg *handler.Registry, opt dispatch.Options) error {
	addr := a.Config.MetricsAddr
	if addr == "" || opt.Metrics != nil {
		return New(a, reg, opt).Run(ctx)
	}
	sink, err := prom.New()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics: listen on %s (%s): %w", addr, triageconfig.EnvMetricsAddr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", sink.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 90 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	a.Log.Info("serving metrics", "url", "http://"+ln.Addr().String()+"/metrics")

	opt.Metrics = metrics.New(sink)
	runErr := New(a, reg, opt).Run(ctx)

	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutCtx)
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return errors.Join(runErr, fmt.Errorf("metrics server: %w", err))
	}
	return runErr
}
