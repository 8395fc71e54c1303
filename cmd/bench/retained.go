package main

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/counters"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
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
	// Partial: a fill ran out of time; the sizes are those reached.
	Partial bool `json:"partial"`
	// Largest over smallest: median latency and read units per request.
	LatencyRatio  float64 `json:"p50_latency_ratio"`
	ReadRatio     float64 `json:"read_units_ratio"`
	ReportedRatio float64 `json:"reported_read_units_ratio"`
}

// StatsRun is /stats at one retained size.
type StatsRun struct {
	Wanted       int         `json:"retained_wanted"`
	Retained     int         `json:"retained_tasks"`
	FillSeconds  float64     `json:"fill_seconds"`
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

// statsUntimed is how many requests per size go before the timed ones
// (the JIT of DynamoDB Local has seen writes only when they start).
const statsUntimed = 5

// Target: /stats with the largest retained size within this factor of the
// smallest, in median latency and in read units per request.
const targetStatsRatio = 1.5

// retainedTypes are the task types the retained tasks are spread over (the
// same for every size, so /stats reads the same number of type counters).
var retainedTypes = []string{"noop", "email", "report", "thumbnail"}

// retainedTask is the i-th retained task: a completed task, as the
// consumer leaves one.
func retainedTask(i int, now time.Time, retention time.Duration) *task.Task {
	prios := triagetype.Priorities()
	r := task.Request{Type: retainedTypes[i%len(retainedTypes)], Priority: prios[i%len(prios)]}
	t := r.NewTask(now, 15*time.Minute)
	started, finished := now.Add(-time.Second), now
	t.Status, t.Attempts, t.Version = triagetype.Completed, 1, 3
	t.StartedAt, t.CompletedAt, t.WaitingSince = &started, &finished, finished
	t.AddAttempt(triagetype.Attempt{Attempt: 1, WorkerID: "bench", StartedAt: started, FinishedAt: finished})
	if retention > 0 {
		t.ExpiresAt = now.Add(retention).Unix()
	}
	return t
}

// streamOff switches off the stream of d's table (see fillRetained).
func streamOff(ctx context.Context, cl clients, d *deployment) error {
	_, err := cl.ddb.UpdateTable(uncounted(ctx), &dynamodb.UpdateTableInput{
		TableName:           aws.String(d.table()),
		StreamSpecification: &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(false)},
	})
	if err != nil {
		return fmt.Errorf("switch off the stream of %s: %w", d.table(), err)
	}
	return nil
}

// fillRetained writes n completed tasks into d's table with BatchWriteItem
// (25 items a call, each built by the store's own store.Item) from workers
// goroutines, and folds them into the /stats counters with the counters'
// own Keeper.Apply, as the stream reader would, in batches of 1,000 (the
// stream trigger's batch size). No chunk is started after deadline; it
// returns how many tasks are in the table, every one of them counted. The
// writes are the bench's setup, not a task's requests: not counted.
//
// The table's stream is switched off first (streamOff): DynamoDB Local
// looks up its stream description on every write to a table with a
// stream, a look-up that grows with the stream records it holds (all
// tables share one database), so a 100,000-task fill through the stream
// takes quadratic time (measured: 10,000 tasks in 37 s, the next 30,000
// not done in 5 min).
func fillRetained(ctx context.Context, cl clients, d *deployment, n, workers int, deadline time.Time) (int, error) {
	ctx = uncounted(ctx)
	now := time.Now().UTC()
	table := d.table()
	const applyBatch = 1000
	var next atomic.Int64
	var written atomic.Int64
	var mu sync.Mutex
	var pending []counters.Change
	var firstErr error
	var once sync.Once
	fail := func(err error) { once.Do(func() { firstErr = err }) }
	batch := 0
	apply := func(changes []counters.Change) error {
		mu.Lock()
		batch++
		key := fmt.Sprintf("bench-fill:%d", batch)
		mu.Unlock()
		guard := func(first, last string) counters.Guard { return counters.Guard{Key: key + ":" + first + "-" + last} }
		if err := d.app.Counters.Apply(ctx, changes, guard); err != nil {
			return fmt.Errorf("counters: %w", err)
		}
		written.Add(int64(len(changes)))
		return nil
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && time.Now().Before(deadline) {
				start := int(next.Add(25)) - 25
				if start >= n {
					return
				}
				var reqs []ddbtypes.WriteRequest
				var changes []counters.Change
				for i := start; i < min(start+25, n); i++ {
					t := retainedTask(i, now, d.app.Config.Retention)
					item, err := d.app.Store.Item(t)
					if err != nil {
						fail(err)
						return
					}
					reqs = append(reqs, ddbtypes.WriteRequest{PutRequest: &ddbtypes.PutRequest{Item: item}})
					changes = append(changes, counters.Change{Seq: strconv.Itoa(i), New: t})
				}
				if err := batchWrite(ctx, cl.ddb, table, reqs); err != nil {
					fail(err)
					return
				}
				mu.Lock()
				pending = append(pending, changes...)
				var full []counters.Change
				if len(pending) >= applyBatch {
					full, pending = pending[:applyBatch:applyBatch], pending[applyBatch:]
				}
				mu.Unlock()
				if full != nil {
					if err := apply(full); err != nil {
						fail(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if firstErr == nil && len(pending) > 0 {
		if err := apply(pending); err != nil {
			fail(err)
		}
	}
	if err := ctx.Err(); err != nil {
		return int(written.Load()), err
	}
	return int(written.Load()), firstErr
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
	type sized struct {
		d *deployment
		p *producer
	}
	var ts []sized
	defer func() {
		for _, t := range ts {
			t.p.close()
			_ = t.d.teardown(context.WithoutCancel(ctx), cl)
		}
	}()
	// One deadline for every fill, leaving time for the requests: a fill
	// cut short is measured at the size it reached, and says so.
	// The rest of the run needs most of -max: the fill never takes more
	// than what leaves two thirds of the run's time for it.
	deadline := time.Now().Add(budget(ctx, o.StatsFill, 2*o.MaxRun/3))
	for i, n := range o.Retained {
		if time.Now().After(deadline) {
			s.Partial = true
			progress("   %d retained tasks: skipped (the fill's time budget ran out)", n)
			break
		}
		d, err := deploy(ctx, cl, fmt.Sprintf("bench-stats-%d", i))
		if err != nil {
			return s, err
		}
		ts = append(ts, sized{d: d, p: newProducer(d, false)})
		if err := streamOff(ctx, cl, d); err != nil {
			return s, err
		}
		run := StatsRun{Wanted: n}
		t0 := time.Now()
		got, err := fillRetained(ctx, cl, d, n, o.Concurrency, deadline)
		if err != nil {
			return s, err
		}
		if got == 0 {
			s.Partial = true
			progress("   %d retained tasks: none written before the fill's time budget ran out; size left out", n)
			break
		}
		run.Retained = got
		run.FillSeconds = round(time.Since(t0).Seconds(), 1)
		snap, err := d.app.Counters.Read(uncounted(ctx))
		if err != nil {
			return s, fmt.Errorf("read counters: %w", err)
		}
		run.Counted = completedCount(snap)
		if run.Counted != int64(got) {
			return s, fmt.Errorf("%d tasks retained but the counters hold %d completed", got, run.Counted)
		}
		if got < n {
			s.Partial = true
			progress("   %d of %d retained tasks written in %.1f s (the fill's time budget ran out)", got, n, run.FillSeconds)
		} else {
			progress("   %d retained tasks written and counted in %.1f s", n, run.FillSeconds)
		}
		s.Runs = append(s.Runs, run)
	}

	// Untimed requests first, then the timed ones, round-robin with the
	// starting size rotating, so no size always follows the same one.
	lat := make([][]time.Duration, len(ts))
	cs := make([]counts, len(ts))
	for i := range cs {
		cs[i] = counts{}
	}
	for round := -statsUntimed; round < o.StatsCalls; round++ {
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
	for _, v := range s.Tasks[triagetype.Completed] {
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
