// Package stats computes the numbers behind GET /stats: per-priority queue
// depths from SQS, and task counts from the counters the table's stream
// keeps (internal/counters).
//
// Its cost does not grow with the tasks retained: three SQS attribute reads
// per priority and DLQ, and a handful of small item reads. The counts lag
// the tasks by the stream's delay (about a second), and the oldest queued
// age is to the minute.
package stats

import (
	"context"
	"math"
	"time"

	"github.com/triagehq/triage/internal/counters"
	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/triagetype"
)

// Counters reads the stream-kept counters.
type Counters interface {
	Read(ctx context.Context) (counters.Snapshot, error)
}

// Queues reads queue depths.
type Queues interface {
	Depth(ctx context.Context, p triagetype.Priority) (queue.Depth, error)
}

// Queue is one priority's queue figures (the public type).
type Queue = triagetype.QueueStats

// Throughput counts outcomes over the last minute (the public type).
type Throughput = triagetype.Throughput

// Stats is the body of GET /stats (the public type). Its TypesTruncated
// says Types holds only the first counters.MaxTypes types by name.
type Stats = triagetype.Stats

// Collect gathers the stats at now.
func Collect(ctx context.Context, c Counters, q Queues, now time.Time) (Stats, error) {
	out := Stats{
		Queues: map[triagetype.Priority]Queue{}, Statuses: map[triagetype.Status]int{},
		Types: map[string]map[triagetype.Status]int{}, GeneratedAt: now.UTC(),
	}
	snap, err := c.Read(ctx)
	if err != nil {
		return out, err
	}
	for _, p := range triagetype.Priorities() {
		d, err := q.Depth(ctx, p)
		if err != nil {
			return out, err
		}
		qs := Queue{Depth: d.Visible, InFlight: d.InFlight, Delayed: d.Delayed, DLQDepth: d.DLQ}
		if since, ok := snap.OldestQueued[p]; ok {
			// Whole seconds, at least 1: a queued task has waited, however briefly.
			qs.OldestAgeSeconds = max(1, math.Ceil(now.Sub(since).Seconds()))
		}
		if w, ok := snap.Waits[p]; ok {
			qs.Waits, qs.WaitP50Seconds, qs.WaitP99Seconds = int(w.Count), w.P50.Seconds(), w.P99.Seconds()
		}
		out.Queues[p] = qs
	}
	for _, st := range triagetype.Statuses() {
		n := int64(0)
		for _, v := range snap.Tasks[st] {
			n += v
		}
		out.Statuses[st] = int(n)
	}
	for typ, counts := range snap.Types {
		m := map[triagetype.Status]int{}
		for st, n := range counts {
			m[st] = int(n)
		}
		out.Types[typ] = m
	}
	out.TypesTruncated = snap.TypesTruncated
	out.Throughput = Throughput{CompletedLastMinute: int(snap.Completed), FailedLastMinute: int(snap.Failed)}
	return out, nil
}
