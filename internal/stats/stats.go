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
	"github.com/triagehq/triage/internal/task"
)

// Counters reads the stream-kept counters.
type Counters interface {
	Read(ctx context.Context) (counters.Snapshot, error)
}

// Queues reads queue depths.
type Queues interface {
	Depth(ctx context.Context, p task.Priority) (queue.Depth, error)
}

// Queue is one priority's queue figures.
type Queue struct {
	Depth    int `json:"depth"`
	InFlight int `json:"in_flight"`
	Delayed  int `json:"delayed"`
	DLQDepth int `json:"dlq_depth"`
	// OldestAgeSeconds is how long the longest-waiting queued task has
	// waited at this priority (since it was queued or promoted into it): an
	// upper bound, within 60 s of the true age (the counters keep the
	// minute each wait began); 0 when none is queued.
	OldestAgeSeconds float64 `json:"oldest_age_seconds"`
}

// Throughput counts outcomes over the last minute.
type Throughput struct {
	CompletedLastMinute int `json:"completed_last_minute"`
	FailedLastMinute    int `json:"failed_last_minute"`
}

// Stats is the body of GET /stats.
type Stats struct {
	Queues   map[task.Priority]Queue        `json:"queues"`
	Statuses map[task.Status]int            `json:"statuses"`
	Types    map[string]map[task.Status]int `json:"types"`
	// TypesTruncated says Types holds only the first counters.MaxTypes
	// types by name.
	TypesTruncated bool       `json:"types_truncated,omitempty"`
	Throughput     Throughput `json:"throughput"`
	GeneratedAt    time.Time  `json:"generated_at"`
}

// Collect gathers the stats at now.
func Collect(ctx context.Context, c Counters, q Queues, now time.Time) (Stats, error) {
	out := Stats{
		Queues: map[task.Priority]Queue{}, Statuses: map[task.Status]int{},
		Types: map[string]map[task.Status]int{}, GeneratedAt: now.UTC(),
	}
	snap, err := c.Read(ctx)
	if err != nil {
		return out, err
	}
	for _, p := range task.Priorities() {
		d, err := q.Depth(ctx, p)
		if err != nil {
			return out, err
		}
		qs := Queue{Depth: d.Visible, InFlight: d.InFlight, Delayed: d.Delayed, DLQDepth: d.DLQ}
		if since, ok := snap.OldestQueued[p]; ok {
			// Whole seconds, at least 1: a queued task has waited, however briefly.
			qs.OldestAgeSeconds = max(1, math.Ceil(now.Sub(since).Seconds()))
		}
		out.Queues[p] = qs
	}
	for _, st := range task.Statuses() {
		n := int64(0)
		for _, v := range snap.Tasks[st] {
			n += v
		}
		out.Statuses[st] = int(n)
	}
	for typ, counts := range snap.Types {
		m := map[task.Status]int{}
		for st, n := range counts {
			m[st] = int(n)
		}
		out.Types[typ] = m
	}
	out.TypesTruncated = snap.TypesTruncated
	out.Throughput = Throughput{CompletedLastMinute: int(snap.Completed), FailedLastMinute: int(snap.Failed)}
	return out, nil
}
