package metrics_test

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/metrics"
	"github.com/triagehq/triage/internal/metrics/metricstest"
	"github.com/triagehq/triage/internal/metrics/prom"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func at(d time.Duration) *time.Time { x := t0.Add(d); return &x }

// workload reports a fixed sequence of events to r.
func workload(r *metrics.Recorder) {
	high := &task.Task{Type: "echo", Priority: triagetype.High, EffectivePriority: triagetype.High, Status: triagetype.Queued, CreatedAt: t0, EnqueuedAt: at(0)}
	low := &task.Task{Type: "resize", Priority: triagetype.Low, EffectivePriority: triagetype.High, Status: triagetype.Queued, CreatedAt: t0, EnqueuedAt: at(0), WaitingSince: t0.Add(30 * time.Minute)}
	retry := &task.Task{Type: "resize", Priority: triagetype.Low, EffectivePriority: triagetype.Low, Status: triagetype.Retrying, Attempts: 1, CreatedAt: t0, EnqueuedAt: at(0)}
	for range 150 { // past MaxValues: a histogram chunk is written before the flush
		r.Submitted(high)
		r.Started(high, t0.Add(200*time.Millisecond), true)
		r.Ran(high, 30*time.Millisecond)
		r.Finished(high, metrics.Completed)
	}
	r.Submitted(low)
	r.Started(low, t0.Add(31*time.Minute), true)
	r.Started(retry, t0.Add(time.Hour), false)
	r.Failed(retry, metrics.FailTimeout)
	r.Finished(retry, metrics.Retried)
	r.Failed(low, metrics.FailPermanent)
	r.Finished(low, metrics.DeadLettered)
	r.Dropped(metrics.DropStale)
	r.Dropped(metrics.DropStale)
	r.Dropped(metrics.DropNoTask)
	r.PutOff(metrics.PutOffRate)
	r.Recovered(metrics.RecoveredLease)
	r.Promoted(triagetype.Low, triagetype.Medium, 4)
	r.Promoted(triagetype.Medium, triagetype.High, 0) // nothing: no series
	r.Slots(metrics.Slots{Capacity: 8, Reserved: 1, Busy: 5, ReservedBusy: 1})
	r.Slots(metrics.Slots{Capacity: 8, Reserved: 1, Busy: 2, ReservedBusy: 0})
	r.Queue(triagetype.Low, metrics.Queue{Depth: 12, DLQDepth: 1, OldestAge: 90 * time.Second})
	r.Step(low, task.Step{Kind: task.StepRun}, false)
	r.Step(low, task.Step{Kind: task.StepRun, Error: "declined"}, false)
	r.Step(low, task.Step{Kind: task.StepRun}, true)
	r.Step(low, task.Step{Kind: task.StepSignal, TimedOut: true}, false)
}

// The same events give the same series, by the same names, through both
// sinks: one instrumentation layer.
func TestSinksAgree(t *testing.T) {
	var buf bytes.Buffer
	emf := metrics.NewEMF(&buf, "", func() time.Time { return t0 })
	ps, err := prom.New()
	if err != nil {
		t.Fatal(err)
	}
	r := metrics.New(emf, ps)
	workload(r)
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	fromEMF, err := metricstest.ParseEMF(&buf, metrics.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	ps.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	fromProm, err := metricstest.ParseProm(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		`triage_tasks_submitted_total{priority="high",type="echo"}`:         150,
		`triage_tasks_submitted_total{priority="low",type="resize"}`:        1,
		`triage_tasks_started_total{priority="high",type="echo"}`:           150,
		`triage_tasks_started_total{priority="low",type="resize"}`:          2,
		`triage_tasks_completed_total{priority="high",type="echo"}`:         150,
		`triage_tasks_retried_total{priority="low",type="resize"}`:          1,
		`triage_tasks_dead_lettered_total{priority="low",type="resize"}`:    1,
		`triage_task_failures_total{reason="timeout",type="resize"}`:        1,
		`triage_task_failures_total{reason="permanent",type="resize"}`:      1,
		`triage_task_wait_seconds_count{priority="high"}`:                   150,
		`triage_task_wait_seconds_count{priority="low"}`:                    1, // the retry's start is not a queue wait
		`triage_task_promoted_wait_seconds_count{priority="high"}`:          1,
		`triage_task_run_seconds_count{type="echo"}`:                        150,
		`triage_messages_dropped_total{reason="stale"}`:                     2,
		`triage_messages_dropped_total{reason="no_task"}`:                   1,
		`triage_putoffs_total{reason="rate_limit"}`:                         1,
		`triage_recoveries_total{kind="lease_expired"}`:                     1,
		`triage_promotions_total{from="low",to="medium"}`:                   4,
		`triage_consumer_slots_capacity`:                                    8,
		`triage_consumer_slots_reserved_high_capacity`:                      1,
		`triage_queue_depth{priority="low"}`:                                12,
		`triage_dlq_depth{priority="low"}`:                                  1,
		`triage_queue_oldest_age_seconds{priority="low"}`:                   90,
		`triage_steps_total{kind="run",outcome="ok",type="resize"}`:         1,
		`triage_steps_total{kind="run",outcome="error",type="resize"}`:      1,
		`triage_steps_total{kind="run",outcome="replayed",type="resize"}`:   1,
		`triage_steps_total{kind="wait",outcome="timed_out",type="resize"}`: 1,
	}
	for k, v := range want {
		if fromEMF[k] != v {
			t.Errorf("EMF %s = %v, want %v", k, fromEMF[k], v)
		}
		if fromProm[k] != v {
			t.Errorf("Prometheus %s = %v, want %v", k, fromProm[k], v)
		}
	}
	// Busy slots: Prometheus has the value now, EMF the peak since the last flush.
	if got := fromProm[`triage_consumer_slots_busy`]; got != 2 {
		t.Errorf("Prometheus busy slots = %v, want 2 (the current value)", got)
	}
	if got := fromEMF[`triage_consumer_slots_busy`]; got != 5 {
		t.Errorf("EMF busy slots = %v, want 5 (the peak)", got)
	}
	if _, ok := fromEMF[`triage_promotions_total{from="medium",to="high"}`]; ok {
		t.Error("a promotion of 0 tasks made an EMF series")
	}
	// Every EMF series is one Prometheus has, under the same name.
	for k := range fromEMF {
		if _, ok := fromProm[k]; !ok {
			t.Errorf("EMF series %s has no Prometheus series", k)
		}
	}
}

// The wait histogram measures a first attempt from enqueue (or run_at, if
// later) to start; a promoted task also from its promotion.
func TestStartedWaits(t *testing.T) {
	for _, tt := range []struct {
		name         string
		t            task.Task
		start        time.Duration
		wait         float64 // -1: none observed
		promotedWait float64
	}{
		{"first attempt", task.Task{Priority: triagetype.High, EffectivePriority: triagetype.High, Status: triagetype.Queued, CreatedAt: t0, EnqueuedAt: at(time.Second)}, 3 * time.Second, 2, -1},
		{"delayed by run_at", task.Task{Priority: triagetype.Medium, EffectivePriority: triagetype.Medium, Status: triagetype.Queued, CreatedAt: t0, EnqueuedAt: at(0), RunAt: at(time.Minute)}, 70 * time.Second, 10, -1},
		{"promoted twice", task.Task{Priority: triagetype.Low, EffectivePriority: triagetype.High, Status: triagetype.Queued, CreatedAt: t0, EnqueuedAt: at(0), WaitingSince: t0.Add(31 * time.Minute)}, 32 * time.Minute, 1920, 60},
		{"retry", task.Task{Priority: triagetype.Low, EffectivePriority: triagetype.Low, Status: triagetype.Retrying, Attempts: 1, CreatedAt: t0, EnqueuedAt: at(0)}, time.Hour, -1, -1},
		{"reclaimed", task.Task{Priority: triagetype.Low, EffectivePriority: triagetype.Low, Status: triagetype.Queued, Attempts: 1, CreatedAt: t0, EnqueuedAt: at(0)}, time.Hour, -1, -1},
		{"clock skew", task.Task{Priority: triagetype.High, EffectivePriority: triagetype.High, Status: triagetype.Queued, CreatedAt: t0, EnqueuedAt: at(time.Second)}, 0, 0, -1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			r := metrics.New(metrics.NewEMF(&buf, "", nil))
			tk := tt.t
			r.Started(&tk, t0.Add(tt.start), tk.Status == triagetype.Queued && tk.Attempts == 0)
			if err := r.Flush(); err != nil {
				t.Fatal(err)
			}
			got := emfValues(t, &buf)
			check := func(name string, want float64) {
				vals := got[name]
				switch {
				case want < 0 && len(vals) > 0:
					t.Errorf("%s observed %v, want nothing", name, vals)
				case want >= 0 && (len(vals) != 1 || vals[0] != want):
					t.Errorf("%s = %v, want [%v]", name, vals, want)
				}
			}
			check("triage_task_wait_seconds", tt.wait)
			check("triage_task_promoted_wait_seconds", tt.promotedWait)
		})
	}
}

// emfValues collects every histogram value of every line by metric name.
func emfValues(t *testing.T, r io.Reader) map[string][]float64 {
	t.Helper()
	out := map[string][]float64{}
	for _, line := range strings.Split(strings.TrimSpace(readAll(t, r)), "\n") {
		if line == "" {
			continue
		}
		var root map[string]any
		if err := json.Unmarshal([]byte(line), &root); err != nil {
			t.Fatal(err)
		}
		for k, v := range root {
			if vs, ok := v.([]any); ok {
				for _, x := range vs {
					out[k] = append(out[k], x.(float64))
				}
			}
		}
	}
	return out
}

func readAll(t *testing.T, r io.Reader) string {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// EMF documents: a histogram that reaches 100 values is written at once,
// a flush writes one line per set of label values, counters that did not
// move since the last flush are not written again, gauges are.
func TestEMFLines(t *testing.T) {
	var buf bytes.Buffer
	emf := metrics.NewEMF(&buf, "Custom", func() time.Time { return t0 })
	r := metrics.New(emf)
	tk := &task.Task{Type: "echo", Priority: triagetype.High}
	for range 100 {
		r.Ran(tk, time.Second)
	}
	if n := strings.Count(buf.String(), "\n"); n != 1 {
		t.Fatalf("after 100 observations: %d lines, want 1 (the full chunk)", n)
	}
	var chunk map[string]any
	if err := json.Unmarshal(buf.Bytes(), &chunk); err != nil {
		t.Fatal(err)
	}
	if vals := chunk["triage_task_run_seconds"].([]any); len(vals) != 100 || chunk["type"] != "echo" {
		t.Errorf("chunk = %v", chunk)
	}
	buf.Reset()

	r.Submitted(tk)
	r.Submitted(&task.Task{Type: "other", Priority: triagetype.Low})
	r.Slots(metrics.Slots{Capacity: 4})
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	first := buf.String()
	if n := strings.Count(first, "\n"); n != 3 { // echo/high, other/low, the slot gauges
		t.Errorf("first flush: %d lines, want 3:\n%s", n, first)
	}
	want := `{"_aws":{"CloudWatchMetrics":[{"Dimensions":[["type","priority"],["priority"],[]],"Metrics":[{"Name":"triage_tasks_submitted_total","Unit":"Count"}],"Namespace":"Custom"}],"Timestamp":1767323045000},"priority":"high","triage_tasks_submitted_total":1,"type":"echo"}`
	if !strings.Contains(first, want+"\n") {
		t.Errorf("first flush lacks\n%s\ngot\n%s", want, first)
	}
	buf.Reset()
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	got, err := metricstest.ParseEMF(&buf, "Custom")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]float64{"triage_consumer_slots_capacity": 4, "triage_consumer_slots_reserved_high_capacity": 0, "triage_consumer_slots_busy": 0, "triage_consumer_slots_reserved_high_busy": 0}; !maps.Equal(got, want) {
		t.Errorf("second flush = %v, want only the gauges %v", got, want)
	}
}

// A nil recorder records nothing and does not panic.
func TestNilRecorder(t *testing.T) {
	var r *metrics.Recorder
	workload(r)
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
}

// Each wait bucket bound is finer than the aging thresholds and the
// starvation bound it must resolve: some bound lies within 5 minutes of
// each default.
func TestWaitBucketsResolveTheStarvationBound(t *testing.T) {
	for _, mark := range []time.Duration{10 * time.Minute, 20 * time.Minute, 32 * time.Minute} {
		ok := false
		for _, b := range metrics.WaitBuckets() {
			if d := time.Duration(b * float64(time.Second)); d >= mark-5*time.Minute && d <= mark+5*time.Minute {
				ok = true
			}
		}
		if !ok {
			t.Errorf("no wait bucket within 5 min of %v", mark)
		}
	}
	defs := metrics.Definitions()
	seen := map[string]bool{}
	for i, d := range defs {
		if d.Name == "" || seen[d.Name] || !strings.HasPrefix(d.Name, "triage_") {
			t.Errorf("definition %d: bad or repeated name %q", i, d.Name)
		}
		seen[d.Name] = true
		if (d.Kind == metrics.Counter) != strings.HasSuffix(d.Name, "_total") {
			t.Errorf("%s: counters, and only counters, end in _total", d.Name)
		}
	}
}
