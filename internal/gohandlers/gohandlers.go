// Package gohandlers holds the Go handlers and middleware registered on a
// worker.Worker, already adapted to the dispatcher's handler.Handler and
// handler.Middleware, so that the two programs that run them build the
// same registry from them: the worker's consumer, and package workertest.
//
// The worker keeps its Set behind an unexported field. workertest, which
// takes a *worker.Worker, reaches it with Of, through a Link the Worker
// embeds: Link has no exported methods, so embedding it adds nothing to
// worker.Worker's API, while its unexported method (promoted to the
// Worker) is one only this package can call. That keeps the Worker's
// handlers private without a package-level registry of Workers.
package gohandlers

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/metrics"
)

// Set is a worker's Go handlers, by task type, and its middleware, in
// the order added (the first runs outermost). The zero Set is empty and
// ready to use. It is not safe for concurrent registration: a worker
// registers everything before it starts.
type Set struct {
	byType  map[string]handler.Handler
	mws     []handler.Middleware
	metrics MetricsServer
}

// MetricsServer serves a long-running worker's metrics at addr while it
// runs: it returns the sink the consumer records to and stop, called once
// the consumer has drained. Package workerprom sets one (prom.Serve), so a
// worker that does not opt in links no metrics client.
type MetricsServer func(addr string, log *slog.Logger) (sink metrics.Sink, stop func(context.Context) error, err error)

// SetMetrics makes m the set's worker's metrics server.
func (s *Set) SetMetrics(m MetricsServer) { s.metrics = m }

// Metrics returns the metrics server set with SetMetrics, or nil.
func (s *Set) Metrics() MetricsServer { return s.metrics }

// Add registers h for task type typ; a type registered before is an
// error matching handler.ErrDuplicate.
func (s *Set) Add(typ string, h handler.Handler) error {
	if _, dup := s.byType[typ]; dup {
		return fmt.Errorf("%w: %q", handler.ErrDuplicate, typ)
	}
	if s.byType == nil {
		s.byType = map[string]handler.Handler{}
	}
	s.byType[typ] = h
	return nil
}

// Use adds middleware around every handler.
func (s *Set) Use(mws ...handler.Middleware) { s.mws = append(s.mws, mws...) }

// Registry returns a new registry with the set's handlers and middleware,
// to which the caller may add more (the worker adds its configured
// routes): a fresh one each call, so a worker started twice does not
// register its routes twice.
func (s *Set) Registry() *handler.Registry {
	reg := handler.NewRegistry()
	for typ, h := range s.byType {
		_ = reg.Register(typ, h) // unique by construction
	}
	reg.Use(s.mws...)
	return reg
}

// Link ties a Set to the value that embeds it (a *worker.Worker) for Of.
type Link struct{ s *Set }

// NewLink returns the Link of s.
func NewLink(s *Set) Link { return Link{s: s} }

func (l Link) set() *Set { return l.s }

// linked is implemented only by values that embed a Link.
type linked interface{ set() *Set }

// Of returns the Set of v, a value that embeds a Link, and false for any
// other value.
func Of(v any) (*Set, bool) {
	l, ok := v.(linked)
	if !ok || l.set() == nil {
		return nil, false
	}
	return l.set(), true
}
