package metrics_test

import (
	"io"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/metrics"
	"github.com/triagehq/triage/internal/metrics/prom"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// BenchmarkTaskOverhead is what instrumentation adds to one task that runs
// once and completes: the calls the consumer and the submit path make for
// it (submitted, started with its wait, ran, completed, and the slot
// gauges at take and release). It makes no request of anything.
func BenchmarkTaskOverhead(b *testing.B) {
	ps, err := prom.New()
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		r    *metrics.Recorder
	}{
		{"none", nil},
		{"emf", metrics.New(metrics.NewEMF(io.Discard, "", nil))},
		{"prometheus", metrics.New(ps)},
	} {
		b.Run(c.name, func(b *testing.B) {
			tk := &task.Task{Type: "echo", Priority: triagetype.High, EffectivePriority: triagetype.High, Status: triagetype.Queued, CreatedAt: t0, EnqueuedAt: at(0)}
			start := t0.Add(50 * time.Millisecond)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					c.r.Submitted(tk)
					c.r.Slots(metrics.Slots{Capacity: 8, Reserved: 1, Busy: 1})
					c.r.Started(tk, start, true)
					c.r.Ran(tk, 10*time.Millisecond)
					c.r.Finished(tk, metrics.Completed)
					c.r.Slots(metrics.Slots{Capacity: 8, Reserved: 1})
				}
			})
		})
	}
}
