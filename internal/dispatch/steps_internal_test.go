package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/triagehq/triage/internal/durable"
	"github.com/triagehq/triage/internal/metrics"
	"github.com/triagehq/triage/internal/metrics/metricstest"
	"github.com/triagehq/triage/internal/metrics/prom"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/internal/tracing"
)

// A saga handler over three attempts (steps and a sleep; the sleep
// replayed and a signal wait begun; the signal consumed and a step
// failing permanently) gives triage_steps_total each step by kind and
// outcome, and each attempt's span one step event per step met.
func TestStepMetrics(t *testing.T) {
	ps, err := prom.New()
	if err != nil {
		t.Fatal(err)
	}
	c := &Consumer{mx: metrics.New(ps)}
	exp := tracetest.NewInMemoryExporter()
	tracer := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)).Tracer(tracing.ScopeName)
	tk := &task.Task{ID: "t1", Type: "order"}
	errDeclined := errors.New("declined")
	saga := func(ctx context.Context, s *durable.State) error {
		ok := func(v string) func(context.Context) (json.RawMessage, error) {
			return func(context.Context) (json.RawMessage, error) { return json.RawMessage(`"` + v + `"`), nil }
		}
		permanent := func(error) bool { return true }
		for _, name := range []string{"charge", "reserve"} {
			if _, err := s.Run(ctx, name, "string", ok(name), permanent); err != nil {
				return err
			}
		}
		if err := s.Sleep(ctx, "nap", t0.Add(time.Hour)); err != nil {
			return err
		}
		if _, err := s.WaitSignal(ctx, "approval", time.Hour); err != nil {
			return err
		}
		_, err := s.Run(ctx, "ship", "string", func(context.Context) (json.RawMessage, error) { return nil, errDeclined }, permanent)
		return err
	}
	var steps []task.Step
	attempt := func(now time.Time, signals []task.Signal) error {
		s := durable.New(steps, signals, 1, nil, func() time.Time { return now })
		ctx, span := tracer.Start(context.Background(), tracing.SpanAttempt)
		s.Observe(c.observeSteps(tk, span))
		err := saga(ctx, s)
		span.End()
		steps = s.Steps()
		return err
	}
	if _, ok := durable.SuspendOf(attempt(t0, nil)); !ok {
		t.Fatal("attempt 1 did not sleep")
	}
	if se, ok := durable.SuspendOf(attempt(t0.Add(2*time.Hour), nil)); !ok || se.Signal != "approval" {
		t.Fatalf("attempt 2 did not wait for the signal: %v", se)
	}
	signal := []task.Signal{{Name: "approval", Payload: json.RawMessage(`{"ok":true}`), At: t0.Add(3 * time.Hour)}}
	if err := attempt(t0.Add(3*time.Hour), signal); !errors.Is(err, errDeclined) {
		t.Fatalf("attempt 3: %v, want the ship step's error", err)
	}

	rec := httptest.NewRecorder()
	ps.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	got, err := metricstest.ParseProm(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"run ok":          2, // charge, reserve
		"run error":       1, // ship
		"run replayed":    4, // charge, reserve in attempts 2 and 3
		"sleep started":   1,
		"sleep replayed":  2,
		"wait started":    1,
		"wait replayed":   1, // the wait's record, met again when the signal came
		"wait signalled":  1,
		"wait timed_out":  0,
		"sleep signalled": 0,
	}
	for ko, n := range want {
		kind, outcome, _ := strings.Cut(ko, " ")
		key := metricstest.Key(metrics.Name(metrics.Steps), map[string]string{metrics.LabelType: "order", metrics.LabelKind: kind, metrics.LabelOutcome: outcome})
		if got[key] != n {
			t.Errorf("%s = %v, want %v", key, got[key], n)
		}
	}

	spans := exp.GetSpans()
	if len(spans) != 3 {
		t.Fatalf("%d spans, want 3", len(spans))
	}
	for i, wantEvents := range []int{3, 4, 6} {
		if n := len(spans[i].Events); n != wantEvents {
			t.Errorf("attempt %d's span has %d step events, want %d", i+1, n, wantEvents)
		}
	}
	last := spans[2].Events[5]
	attrs := map[string]string{}
	for _, kv := range last.Attributes {
		attrs[string(kv.Key)] = kv.Value.AsString()
	}
	if last.Name != tracing.EventStep || attrs[string(tracing.AttrStepName)] != "ship" || attrs[string(tracing.AttrStepOutcome)] != metrics.StepError {
		t.Errorf("the last step event is %s %v, want %s of ship with outcome error", last.Name, attrs, tracing.EventStep)
	}
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
