package metrics

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// MaxValues is the most values one EMF metric may carry in one document
// (the EMF specification's limit on a numeric array).
const MaxValues = 100

// EMF is a sink that writes CloudWatch Embedded Metric Format documents,
// one JSON object a line, to a writer: in Lambda, stdout, from which
// CloudWatch Logs extracts the metrics with no API call and no latency
// added to any task.
//
// It aggregates between flushes: a counter's increases are summed, a
// gauge keeps its last value (its peak, for Def.Peak), and a histogram
// keeps its observed values. Flush writes one document per distinct set of
// label values (EMF takes dimension values from the document's root, so
// each set needs its own), holding every metric with those values. A
// histogram series that reaches MaxValues values is written at once as a
// document of its own, so memory stays bounded and every value is kept
// exactly, however many tasks run between flushes.
type EMF struct {
	w         io.Writer
	namespace string
	now       func() time.Time
	defs      []Def

	mu     sync.Mutex
	series map[seriesKey]*emfSeries
	wmu    sync.Mutex // serialises writes, so lines never interleave
}

type emfSeries struct {
	id     ID
	labels []string
	sum    float64   // counter: increase since the last flush
	value  float64   // gauge: last value
	peak   float64   // gauge with Peak: highest since the last flush
	set    bool      // gauge: a value was set
	values []float64 // histogram: observations since the last write
}

// NewEMF returns an EMF sink writing to w in namespace ("" for Namespace);
// now stamps documents (nil: time.Now).
func NewEMF(w io.Writer, namespace string, now func() time.Time) *EMF {
	if namespace == "" {
		namespace = Namespace
	}
	if now == nil {
		now = time.Now
	}
	return &EMF{w: w, namespace: namespace, now: now, defs: Definitions(), series: map[seriesKey]*emfSeries{}}
}

// seriesKey names one series: its metric and its label values, joined by
// NUL when there are several (no task type or priority holds a NUL: the
// API refuses one).
type seriesKey struct {
	id     ID
	labels string
}

func keyOf(id ID, values []string) seriesKey {
	switch len(values) {
	case 0:
		return seriesKey{id: id}
	case 1:
		return seriesKey{id, values[0]}
	}
	return seriesKey{id, strings.Join(values, "\x00")}
}

// get returns the series of id and values, creating it; e.mu must be held.
func (e *EMF) get(id ID, values []string) *emfSeries {
	k := keyOf(id, values)
	s := e.series[k]
	if s == nil {
		s = &emfSeries{id: id, labels: slices.Clone(values)}
		e.series[k] = s
	}
	return s
}

// Add implements Sink.
func (e *EMF) Add(id ID, values []string, v float64) {
	e.mu.Lock()
	e.get(id, values).sum += v
	e.mu.Unlock()
}

// Set implements Sink.
func (e *EMF) Set(id ID, values []string, v float64) {
	e.mu.Lock()
	s := e.get(id, values)
	if !s.set || v > s.peak {
		s.peak = v
	}
	s.value, s.set = v, true
	e.mu.Unlock()
}

// Observe implements Sink.
func (e *EMF) Observe(id ID, values []string, v float64) {
	e.mu.Lock()
	s := e.get(id, values)
	s.values = append(s.values, v)
	var full []float64
	if len(s.values) >= MaxValues {
		full, s.values = s.values, nil
	}
	e.mu.Unlock()
	if full != nil {
		// A write error here has nowhere to go but the next Flush's answer;
		// losing one chunk of a histogram is better than blocking a task.
		_ = e.write([]document{e.document(id, s.labels, full)})
	}
}

// Flush writes what was recorded since the last flush: counters that rose,
// every gauge that was ever set, and histogram values not yet written.
func (e *EMF) Flush() error {
	e.mu.Lock()
	docs := map[string]*document{}
	var order []string
	for k, s := range e.series {
		def := e.defs[s.id]
		var val any
		switch def.Kind {
		case Counter:
			if s.sum == 0 {
				delete(e.series, k) // nothing to say; a new increase makes it again
				continue
			}
			val, s.sum = s.sum, 0
		case Gauge:
			if !s.set {
				continue
			}
			val = s.value
			if def.Peak {
				val, s.peak = s.peak, s.value
			}
		case Histogram:
			if len(s.values) == 0 {
				delete(e.series, k)
				continue
			}
			val, s.values = s.values, nil
		}
		dk := dimsKey(def.Labels, s.labels)
		d := docs[dk]
		if d == nil {
			d = &document{dims: dims(def.Labels, s.labels), metrics: map[string]any{}}
			docs[dk] = d
			order = append(order, dk)
		}
		d.add(def, val)
	}
	e.mu.Unlock()
	slices.Sort(order)
	out := make([]document, 0, len(order))
	for _, k := range order {
		out = append(out, *docs[k])
	}
	return e.write(out)
}

// document is one EMF document being built: its dimension values, its
// metrics' values by name, and their directives grouped by dimension sets.
type document struct {
	dims       map[string]string
	metrics    map[string]any
	directives []directive
}

type directive struct {
	dimensions [][]string
	metrics    []metricDef
}

type metricDef struct {
	Name string `json:"Name"`
	Unit string `json:"Unit,omitempty"`
}

// add puts a metric into the document, under the directive of its
// dimension sets (its labels, then its rollups).
func (d *document) add(def Def, val any) {
	d.metrics[def.Name] = val
	sets := append([][]string{append([]string{}, def.Labels...)}, def.Rollups...) // never nil: a label-less metric is published with no dimensions ([[]]), not [null]
	for i := range d.directives {
		if slices.EqualFunc(d.directives[i].dimensions, sets, slices.Equal) {
			d.directives[i].metrics = append(d.directives[i].metrics, metricDef{def.Name, def.Unit})
			return
		}
	}
	d.directives = append(d.directives, directive{dimensions: sets, metrics: []metricDef{{def.Name, def.Unit}}})
}

func (e *EMF) document(id ID, labels []string, values []float64) document {
	def := e.defs[id]
	d := document{dims: dims(def.Labels, labels), metrics: map[string]any{}}
	d.add(def, values)
	return d
}

// dims pairs label names with values. CloudWatch refuses an empty
// dimension value, so "" is written as "none".
func dims(names, values []string) map[string]string {
	m := make(map[string]string, len(names))
	for i, n := range names {
		v := values[i]
		if v == "" {
			v = "none"
		}
		m[n] = v
	}
	return m
}

func dimsKey(names, values []string) string {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + "=" + values[i]
	}
	slices.Sort(parts)
	return strings.Join(parts, "\x00")
}

// write renders documents as JSON lines and writes them in one call.
func (e *EMF) write(docs []document) error {
	if len(docs) == 0 {
		return nil
	}
	ts := e.now().UnixMilli()
	var b strings.Builder
	for _, d := range docs {
		root := make(map[string]any, len(d.dims)+len(d.metrics)+1)
		for k, v := range d.dims {
			root[k] = v
		}
		for k, v := range d.metrics {
			root[k] = v
		}
		dirs := make([]map[string]any, len(d.directives))
		for i, dir := range d.directives {
			dirs[i] = map[string]any{"Namespace": e.namespace, "Dimensions": dir.dimensions, "Metrics": dir.metrics}
		}
		root["_aws"] = map[string]any{"Timestamp": ts, "CloudWatchMetrics": dirs}
		line, err := json.Marshal(root)
		if err != nil {
			return fmt.Errorf("encode EMF document: %w", err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	e.wmu.Lock()
	defer e.wmu.Unlock()
	if _, err := io.WriteString(e.w, b.String()); err != nil {
		return fmt.Errorf("write EMF documents: %w", err)
	}
	return nil
}
