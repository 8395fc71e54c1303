// Package metricstest reads what triage's metric sinks write, so tests can
// compare a Prometheus scrape and EMF lines by the same keys: a series is
// `name{label="value",...}` with labels sorted by name, and a histogram
// is read as its observation count, `name_count{...}`.
package metricstest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/triagehq/triage/internal/metrics"
)

// Key is the series key of name with labels.
func Key(name string, labels map[string]string) string {
	if len(labels) == 0 {
		return name
	}
	names := make([]string, 0, len(labels))
	for k := range labels {
		names = append(names, k)
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = k + "=" + strconv.Quote(labels[k])
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

// ParseProm reads a Prometheus text exposition into series values. It
// keeps the series of triage's own metrics (and histograms' _count and
// _sum), not the Go runtime's.
func ParseProm(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") || !strings.HasPrefix(line, "triage_") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			return nil, fmt.Errorf("metricstest: bad line %q", line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("metricstest: bad value in %q: %w", line, err)
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

// ParseEMF reads EMF lines, checks each against the rules of the EMF
// specification that CloudWatch enforces (a root _aws with a Timestamp and
// directives, each metric and dimension a root member, at most 100 values
// a metric, at most 100 metrics a directive, dimension values non-empty
// strings, the namespace as given), and returns the series totals across
// lines: counters summed, gauges the last value, histograms counted.
func ParseEMF(r io.Reader, namespace string) (map[string]float64, error) {
	kinds := map[string]metrics.Kind{}
	for _, d := range metrics.Definitions() {
		kinds[d.Name] = d.Kind
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		var root map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &root); err != nil {
			return nil, fmt.Errorf("line %d: not a JSON object: %w", n, err)
		}
		var meta struct {
			Timestamp         *int64
			CloudWatchMetrics []struct {
				Namespace  string
				Dimensions [][]string
				Metrics    []struct{ Name, Unit string }
			}
		}
		if err := json.Unmarshal(root["_aws"], &meta); err != nil || meta.Timestamp == nil || len(meta.CloudWatchMetrics) == 0 {
			return nil, fmt.Errorf("line %d: _aws needs a Timestamp and CloudWatchMetrics (%v)", n, err)
		}
		for _, dir := range meta.CloudWatchMetrics {
			if dir.Namespace != namespace {
				return nil, fmt.Errorf("line %d: namespace %q, want %q", n, dir.Namespace, namespace)
			}
			if len(dir.Metrics) == 0 || len(dir.Metrics) > 100 || len(dir.Dimensions) == 0 {
				return nil, fmt.Errorf("line %d: a directive needs 1-100 metrics and a dimension set", n)
			}
			dims := map[string]string{}
			for _, set := range dir.Dimensions {
				if len(set) > 30 {
					return nil, fmt.Errorf("line %d: %d dimensions in a set", n, len(set))
				}
				for _, k := range set {
					var v string
					if err := json.Unmarshal(root[k], &v); err != nil || v == "" {
						return nil, fmt.Errorf("line %d: dimension %q is not a non-empty string member", n, k)
					}
					dims[k] = v
				}
			}
			full := dir.Dimensions[0] // the metric's own labels; the others are rollups of it
			labels := map[string]string{}
			for _, k := range full {
				labels[k] = dims[k]
			}
			for _, m := range dir.Metrics {
				raw, ok := root[m.Name]
				if !ok {
					return nil, fmt.Errorf("line %d: metric %q has no root member", n, m.Name)
				}
				var vals []float64
				var one float64
				if err := json.Unmarshal(raw, &one); err == nil {
					vals = []float64{one}
				} else if err := json.Unmarshal(raw, &vals); err != nil {
					return nil, fmt.Errorf("line %d: metric %q is neither a number nor an array of numbers", n, m.Name)
				}
				if len(vals) == 0 || len(vals) > 100 {
					return nil, fmt.Errorf("line %d: metric %q has %d values (1-100 allowed)", n, m.Name, len(vals))
				}
				switch kinds[m.Name] {
				case metrics.Counter:
					out[Key(m.Name, labels)] += one
				case metrics.Gauge:
					out[Key(m.Name, labels)] = one
				case metrics.Histogram:
					out[Key(m.Name+"_count", labels)] += float64(len(vals))
				}
			}
		}
	}
	return out, sc.Err()
}
