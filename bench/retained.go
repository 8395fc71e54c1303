package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/counters"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
)

// StatsScaling is group 9: GET /api/v1/stats with different numbers of
// retained (completed) tasks in the table. Each size has its own
// deployment, filled straight through the store's own item builder, with
// the stream-kept counters caught up; then the requests go round-robin
// over the deployments, so every size sees the same machine load.
type StatsScaling struct {
	Quick    bool       `json:"quick"`
	Sizes    []int      `json:"retained_sizes"`
	Requests int        `json:"requests_per_size"`
	Runs     []StatsRun `json:"runs"`
	// Largest over smallest: median latency and read units per request.
	LatencyRatio  float64 `json:"p50_latency_ratio"`
	ReadRatio     float64 `json:"read_units_ratio"`
	ReportedRatio float64 `json:"reported_read_units_ratio"`
}

// StatsRun is /stats at one retained size.
type StatsRun struct {
	Retained     int         `json:"retained_tasks"`
	FillSeconds  float64     `json:"fill_seconds"`
	CatchUpSec   float64     `json:"counters_catch_up_seconds"`
	Counted      int64       `json:"counters_completed"`
	Latency      Dist        `json:"latency"`
	DDBCalls     float64     `json:"ddb_calls_per_request"`
	ReadUnits    float64     `json:"read_units_per_request"`
	ReportedRead float64     `json:"reported_read_units_per_request"`
	SQSRequests  float64     `json:"sqs_requests_per_request"`
	Ops          []OpPerTask `json:"operations"`
	// DynamoDB's report for these requests, per request.
	Reported Reported `json:"reported_capacity"`
}

// Target: /stats with the largest retained size within this factor of the
// smallest, in median latency and in read units per request.
const targetStatsRatio = 1.5

// retainedTypes are the task types the retained tasks are spread over (the
// same for every size, so /stats reads the same number of type counters).
var retainedTypes = []string{"noop", "email", "report", "thumbnail"}

// retainedItem is the item of the i-th retained task: a completed task,
// built by the store exactly as it writes one.
func retainedItem(st *store.Store, i int, now time.Time, retention time.Duration) (map[string]ddbtypes.AttributeValue, error) {
	prios := task.Priorities()
	r := task.Request{Type: retainedTypes[i%len(retainedTypes)], Priority: string(prios[i%len(prios)])}
	t := r.NewTask(now, 15*time.Minute)
	started, finished := now.Add(-time.Second), now
	t.Status, t.Attempts, t.Version = task.Completed, 1, 3
	t.StartedAt, t.CompletedAt, t.WaitingSince = &started, &finished, finished
	t.AddAttempt(task.Attempt{Attempt: 1, WorkerID: "bench", StartedAt: started, FinishedAt: finished})
	if retention > 0 {
		t.ExpiresAt = now.Add(retention).Unix()
	}
	return st.Item(t)
}

// fillRetained writes n completed tasks into d's table with BatchWriteItem
// (25 items a call) from workers goroutines. The writes are the bench's
// setup, not a task's requests: they are not counted.
func fillRetained(ctx context.Context, cl clients, d *deployment, n, workers int) error {
	ctx = uncounted(ctx)
	now := time.Now().UTC()
	table := d.table()
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				start := int(next.Add(25)) - 25
				if start >= n {
					return
				}
				var reqs []ddbtypes.WriteRequest
				for i := start; i < min(start+25, n); i++ {
					item, err := retainedItem(d.app.Store, i, now, d.app.Config.Retention)
					if err != nil {
						once.Do(func() { firstErr = err })
						return
					}
					reqs = append(reqs, ddbtypes.WriteRequest{PutRequest: &ddbtypes.PutRequest{Item: item}})
				}
				if err := batchWrite(ctx, cl.ddb, table, reqs); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	return firstErr
}

// batchWrite writes reqs, retrying unprocessed items with a growing pause.
func batchWrite(ctx context.Context, db *dynamodb.Client, table string, reqs []ddbtypes.WriteRequest) error {
	items := map[string][]ddbtypes.WriteRequest{table: reqs}
	for attempt := 0; len(items[table]) > 0; attempt++ {
		if attempt > 10 {
			return fmt.Errorf("fill %s: DynamoDB kept %d items unprocessed", table, len(items[table]))
		}
		if attempt > 0 {
			time.Sleep(time.Duration(attempt*attempt) * 20 * time.Millisecond)
		}
		out, err := db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: items})
		if err != nil {
			return fmt.Errorf("fill %s: %w", table, err)
		}
		items = out.UnprocessedItems
	}
	return nil
}

// measureStats runs group 9.
func measureStats(ctx context.Context, cl clients, cnt *counter, o options, progress func(string, ...any)) (StatsScaling, error) {
	s := StatsScaling{Quick: o.Quick, Sizes: o.Retained, Requests: o.StatsCalls}
	type target struct {
		d *deployment
		p *producer
	}
	var ts []target
	defer func() {
		for _, t := range ts {
			t.p.close()
			_ = t.d.teardown(context.WithoutCancel(ctx), cl)
		}
	}()
	for i, n := range o.Retained {
		d, err := deploy(ctx, cl, fmt.Sprintf("bench-stats-%d", i))
		if err != nil {
			return s, err
		}
		ts = append(ts, target{d: d, p: newProducer(d, false)})
		run := StatsRun{Retained: n}
		t0 := time.Now()
		if err := fillRetained(ctx, cl, d, n, o.Concurrency); err != nil {
			return s, err
		}
		run.FillSeconds = round(time.Since(t0).Seconds(), 1)
		// The counters must have every retained task before /stats is
		// timed; the poller's own calls are setup here, not counted.
		t0 = time.Now()
		snap, err := catchUp(uncounted(ctx), d, budget(ctx, 5*time.Minute, time.Minute), func(sn counters.Snapshot) bool {
			return completedCount(sn) >= int64(n)
		})
		if err != nil {
			return s, err
		}
		run.CatchUpSec = round(time.Since(t0).Seconds(), 1)
		run.Counted = completedCount(snap)
		if run.Counted != int64(n) {
			return s, fmt.Errorf("%d tasks retained but the counters hold %d completed after %.0f s", n, run.Counted, run.CatchUpSec)
		}
		progress("   %d retained tasks: filled in %.1f s, counters caught up in %.1f s", n, run.FillSeconds, run.CatchUpSec)
		s.Runs = append(s.Runs, run)
	}

	// Two untimed requests each, then the timed ones, round-robin with the
	// starting size rotating, so no size always follows the same one.
	lat := make([][]time.Duration, len(ts))
	cs := make([]counts, len(ts))
	for i := range cs {
		cs[i] = counts{}
	}
	for round := -2; round < o.StatsCalls; round++ {
		for k := range ts {
			i := (k + max(round, 0)) % len(ts)
			before := cnt.snapshot()
			t0 := time.Now()
			code, body, err := ts[i].p.get(ctx, "/api/v1/stats")
			el := time.Since(t0)
			if err != nil {
				return s, fmt.Errorf("GET /api/v1/stats: %w", err)
			}
			if code != http.StatusOK {
				return s, fmt.Errorf("GET /api/v1/stats: status %d: %.200s", code, body)
			}
			if round < 0 {
				continue
			}
			lat[i] = append(lat[i], el)
			for k, v := range cnt.snapshot().since(before) {
				x := cs[i][k]
				x.add(v)
				cs[i][k] = x
			}
		}
	}
	for i := range s.Runs {
		ph := newPhase("", cs[i], o.StatsCalls)
		r := &s.Runs[i]
		r.Latency = distOf(lat[i])
		r.DDBCalls, r.ReadUnits, r.ReportedRead, r.SQSRequests = ph.DDBCalls, ph.DDBRead, ph.Reported.ReadUnits, ph.SQSRequests
		r.Ops, r.Reported = ph.Ops, ph.Reported
	}
	if len(s.Runs) > 1 {
		a, b := s.Runs[0], s.Runs[len(s.Runs)-1]
		s.LatencyRatio = ratio(b.Latency.P50, a.Latency.P50)
		s.ReadRatio = ratio(b.ReadUnits, a.ReadUnits)
		s.ReportedRatio = ratio(b.ReportedRead, a.ReportedRead)
	}
	return s, nil
}

// completedCount is the completed tasks the counters hold, all priorities.
func completedCount(s counters.Snapshot) int64 {
	n := int64(0)
	for _, v := range s.Tasks[task.Completed] {
		n += v
	}
	return n
}

// ratio is a/b rounded to 3 decimals (0 when b is 0).
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return round(a/b, 3)
}
