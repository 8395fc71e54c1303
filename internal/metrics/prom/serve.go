package prom

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/triagehq/triage/internal/metrics"
)

// Serve serves a new sink's metrics at /metrics on addr, from a registry
// of its own, until stop is called (once the consumer recording to it has
// drained, so the last figures can still be scraped). A listen failure is
// an error before anything runs.
func Serve(addr string, log *slog.Logger) (sink *Sink, stop func(context.Context) error, err error) {
	sink, err = New()
	if err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("metrics: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", sink.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 90 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("serving metrics", "url", "http://"+ln.Addr().String()+"/metrics")
	return sink, func(ctx context.Context) error {
		_ = srv.Shutdown(ctx)
		if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("metrics server: %w", err)
		}
		return nil
	}, nil
}

var _ metrics.Sink = (*Sink)(nil)
