package promoterapp

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/counters"
	"github.com/triagehq/triage/internal/metrics"
	"github.com/triagehq/triage/internal/promote"
	"github.com/triagehq/triage/internal/stats"
	"github.com/triagehq/triage/triagetype"
)

// SampleQueues records each priority's queue depth, DLQ depth and oldest
// queued age, read the way GET /stats reads them: three SQS attribute
// reads per priority and a few small counter reads, whatever the backlog.
// The promoter does it once a run (a minute in AWS), never per task, and
// keeps the depths in the counters' minute item (counters.RecordDepth).
func SampleQueues(ctx context.Context, a *app.App, rec *metrics.Recorder) error {
	s, err := stats.Collect(ctx, a.Counters, a.Queues, time.Now())
	if err != nil {
		return fmt.Errorf("sample queue metrics: %w", err)
	}
	depths := map[triagetype.Priority]counters.Depth{}
	for p, q := range s.Queues {
		rec.Queue(p, metrics.Queue{Depth: q.Depth, DLQDepth: q.DLQDepth, OldestAge: time.Duration(q.OldestAgeSeconds * float64(time.Second))})
		depths[p] = counters.Depth{Visible: q.Depth, InFlight: q.InFlight}
	}
	// The same reading, kept a minute at a time for the dashboard's depth
	// chart (GET /stats/history): one small write per run.
	return a.Counters.RecordDepth(ctx, s.GeneratedAt, depths)
}

// SampleQueuesEvery samples the queues every interval until ctx ends
// (`triage dev`, where no promoter function does it).
func SampleQueuesEvery(ctx context.Context, a *app.App, rec *metrics.Recorder, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := SampleQueues(ctx, a, rec); err != nil && ctx.Err() == nil {
			a.Log.Warn("queue metrics not sampled", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// lambdaWithMetrics is the promoter function's handler with its metrics:
// the sweep's promotions and recoveries, then a queue sample, written to
// stdout as EMF at the end of each invocation.
func lambdaWithMetrics(a *app.App) func(context.Context, events.EventBridgeEvent) (promote.Report, error) {
	rec := metrics.New(metrics.NewEMF(os.Stdout, a.Config.MetricsNamespace, nil))
	h := LambdaHandler(New(a, promote.Options{Metrics: rec, Counts: a.Counters}), FanOut(a), a.Log)
	return func(ctx context.Context, ev events.EventBridgeEvent) (promote.Report, error) {
		r, err := h(ctx, ev)
		if serr := SampleQueues(ctx, a, rec); serr != nil {
			a.Log.Warn("queue metrics not sampled", "error", serr)
		}
		if ferr := rec.Flush(); ferr != nil {
			a.Log.Warn("metrics flush failed", "error", ferr)
		}
		return r, err
	}
}
