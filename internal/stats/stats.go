// Package stats computes the numbers behind GET /stats: per-priority queue
// depths from SQS, and task counts per status and per type from DynamoDB.
//
// The counts are exact, read from the indexes at request time: the
// by-status-priority index gives each status and priority with a COUNT
// query, and the by-type index gives each type's statuses. That costs reads
// proportional to the number of tasks kept (terminal tasks expire after the
// retention period); a deployment with millions of retained tasks would
// keep counters updated from a DynamoDB stream instead.
package stats

import (
	"context"
	"sort"
	"time"

	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
)

// Store is the part of the task store stats read.
type Store interface {
	CountWaiting(ctx context.Context, st task.Status, p task.Priority) (int, error)
	Waiting(ctx context.Context, q store.WaitingQuery) (store.Page, error)
	Types(ctx context.Context) ([]string, error)
	CountByStatus(ctx context.Context, typ string) (map[task.Status]int, error)
	Now() time.Time
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
	// waited at this priority: since it was queued, or promoted into it.
	OldestAgeSeconds float64 `json:"oldest_age_seconds"`
}

// Throughput counts outcomes over the last minute.
type Throughput struct {
	CompletedLastMinute int `json:"completed_last_minute"`
	FailedLastMinute    int `json:"failed_last_minute"`
}

// Stats is the body of GET /stats.
type Stats struct {
	Queues      map[task.Priority]Queue        `json:"queues"`
	Statuses    map[task.Status]int            `json:"statuses"`
	Types       map[string]map[task.Status]int `json:"types"`
	Throughput  Throughput                     `json:"throughput"`
	GeneratedAt time.Time                      `json:"generated_at"`
}

// Collect gathers the stats.
func Collect(ctx context.Context, s Store, q Queues) (Stats, error) {
	now := s.Now()
	out := Stats{
		Queues: map[task.Priority]Queue{}, Statuses: map[task.Status]int{},
		Types: map[string]map[task.Status]int{}, GeneratedAt: now.UTC(),
	}
	for _, p := range task.Priorities() {
		d, err := q.Depth(ctx, p)
		if err != nil {
			return out, err
		}
		qs := Queue{Depth: d.Visible, InFlight: d.InFlight, Delayed: d.Delayed, DLQDepth: d.DLQ}
		// The oldest queued task of this effective priority: the index is
		// sorted by the time each task started waiting at this priority.
		page, err := s.Waiting(ctx, store.WaitingQuery{Status: task.Queued, Priority: p, Limit: 1})
		if err != nil {
			return out, err
		}
		if len(page.Tasks) > 0 {
			// The same time the index sorts by, so the head is the oldest.
			qs.OldestAgeSeconds = max(0, now.Sub(page.Tasks[0].WaitingSince).Seconds())
		}
		out.Queues[p] = qs
		for _, st := range task.Statuses() {
			n, err := s.CountWaiting(ctx, st, p)
			if err != nil {
				return out, err
			}
			out.Statuses[st] += n
		}
		for st, dst := range map[task.Status]*int{task.Completed: &out.Throughput.CompletedLastMinute, task.DeadLetter: &out.Throughput.FailedLastMinute} {
			n, err := countSince(ctx, s, st, p, now.Add(-time.Minute))
			if err != nil {
				return out, err
			}
			*dst += n
		}
	}
	types, err := s.Types(ctx)
	if err != nil {
		return out, err
	}
	sort.Strings(types)
	for _, typ := range types {
		counts, err := s.CountByStatus(ctx, typ)
		if err != nil {
			return out, err
		}
		if len(counts) > 0 {
			out.Types[typ] = counts
		}
	}
	return out, nil
}

// countSince counts tasks that entered status st at priority p after since.
func countSince(ctx context.Context, s Store, st task.Status, p task.Priority, since time.Time) (int, error) {
	q := store.WaitingQuery{Status: st, Priority: p, After: since, Limit: 1000}
	n := 0
	for {
		page, err := s.Waiting(ctx, q)
		if err != nil {
			return 0, err
		}
		n += len(page.Tasks)
		if len(page.Next) == 0 {
			return n, nil
		}
		q.Start = page.Next
	}
}
