// Package prom is the Prometheus sink of package metrics: every metric of
// metrics.Definitions registered, under the same name and labels, on a
// registry of its own (never the global one), and the handler that serves
// it at /metrics. Long-running consumers (worker.Run) and `triage dev`
// use it; the Lambda functions use EMF and do not link it.
package prom

import (
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/triagehq/triage/internal/metrics"
)

// Sink holds the collectors, indexed by metrics.ID.
type Sink struct {
	reg        *prometheus.Registry
	counters   []*prometheus.CounterVec
	gauges     []*prometheus.GaugeVec
	histograms []*prometheus.HistogramVec
}

// New returns a sink with every triage metric registered on a new
// registry, with the Go runtime and process collectors beside them.
func New() (*Sink, error) {
	defs := metrics.Definitions()
	s := &Sink{
		reg:        prometheus.NewRegistry(),
		counters:   make([]*prometheus.CounterVec, len(defs)),
		gauges:     make([]*prometheus.GaugeVec, len(defs)),
		histograms: make([]*prometheus.HistogramVec, len(defs)),
	}
	cs := []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}
	for i, d := range defs {
		switch d.Kind {
		case metrics.Counter:
			s.counters[i] = prometheus.NewCounterVec(prometheus.CounterOpts{Name: d.Name, Help: d.Help}, d.Labels)
			cs = append(cs, s.counters[i])
		case metrics.Gauge:
			s.gauges[i] = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: d.Name, Help: d.Help}, d.Labels)
			cs = append(cs, s.gauges[i])
		case metrics.Histogram:
			s.histograms[i] = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: d.Name, Help: d.Help, Buckets: d.Buckets}, d.Labels)
			cs = append(cs, s.histograms[i])
		}
	}
	for _, c := range cs {
		if err := s.reg.Register(c); err != nil {
			return nil, fmt.Errorf("register metric: %w", err)
		}
	}
	return s, nil
}

// Registry is the sink's registry, for a caller that gathers it itself.
func (s *Sink) Registry() *prometheus.Registry { return s.reg }

// Handler serves the registry in the Prometheus exposition format.
func (s *Sink) Handler() http.Handler {
	return promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{Registry: s.reg})
}

// Add implements metrics.Sink.
func (s *Sink) Add(id metrics.ID, values []string, v float64) {
	s.counters[id].WithLabelValues(values...).Add(v)
}

// Set implements metrics.Sink.
func (s *Sink) Set(id metrics.ID, values []string, v float64) {
	s.gauges[id].WithLabelValues(values...).Set(v)
}

// Observe implements metrics.Sink.
func (s *Sink) Observe(id metrics.ID, values []string, v float64) {
	s.histograms[id].WithLabelValues(values...).Observe(v)
}
