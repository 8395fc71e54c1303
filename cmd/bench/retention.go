package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/api"
	"github.com/triagehq/triage/internal/app/apiapp"
	"github.com/triagehq/triage/internal/auth"
	"github.com/triagehq/triage/internal/cleanup"
	"github.com/triagehq/triage/internal/deadletter"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Group 16: big tables. The same end-to-end run on a table holding few
// and many finished tasks (submit latency and completion rate, same run,
// ratio printed), then a cleanup job of many finished tasks timed from
// the DELETE /api/v1/tasks call to the job's done, with its requests and
// write units.

// Retention is group 16's result.
type Retention struct {
	Quick bool           `json:"quick"`
	Runs  []RetentionRun `json:"runs"`
	// Largest over smallest retained size.
	RateRatio      float64     `json:"tasks_per_second_ratio"`
	SubmitP95Ratio float64     `json:"submit_p95_ratio"`
	TargetRatio    float64     `json:"target_rate_ratio"`
	Cleanup        *CleanupRun `json:"cleanup,omitempty"`
}

// RetentionRun is the end-to-end run at one retained size.
type RetentionRun struct {
	Retained    int     `json:"retained_tasks"`
	FillSeconds float64 `json:"fill_seconds"`
	Tasks       int     `json:"tasks"`
	Completed   int     `json:"completed"`
	Submit      Dist    `json:"submit_latency"`
	Seconds     float64 `json:"seconds"`
	PerSec      float64 `json:"tasks_per_second"`
}

// CleanupRun is one cleanup job of Tasks finished tasks.
type CleanupRun struct {
	Tasks       int     `json:"tasks"`
	FillSeconds float64 `json:"fill_seconds"`
	AcceptMS    float64 `json:"accept_ms"` // DELETE /api/v1/tasks to its 202
	Deleted     int64   `json:"deleted"`
	Left        int     `json:"left_in_table"`
	Done        bool    `json:"done"`
	Seconds     float64 `json:"seconds"`
	PerSec      float64 `json:"deleted_per_second"`
	Runs        int     `json:"runner_runs"`
	Pages       int     `json:"pages"`
	TargetSecs  float64 `json:"target_seconds"`
	// Per deleted task: requests and units, and DynamoDB's own report.
	Phase Phase `json:"per_task"`
}

const (
	retentionTargetRatio = 0.8
	cleanupTargetSeconds = 300
	// cleanupRunBudget is one promoter run's share of the cleanup (the
	// promoter gives it at most 45 s of each minute).
	cleanupRunBudget = 45 * time.Second
)

// measureRetention runs group 16.
func measureRetention(ctx context.Context, cl clients, cnt *counter, o options, progress func(string, ...any)) (Retention, error) {
	r := Retention{Quick: o.Quick, TargetRatio: retentionTargetRatio}
	for i, n := range o.RetentionSizes {
		run, err := retentionRun(ctx, cl, cnt, o, i, n, progress)
		if err != nil {
			return r, fmt.Errorf("%d retained: %w", n, err)
		}
		r.Runs = append(r.Runs, run)
		progress("   %d retained (filled in %.0f s): %d tasks at %.1f tasks/s, submit p95 %.1f ms", run.Retained, run.FillSeconds, run.Completed, run.PerSec, run.Submit.P95)
	}
	if len(r.Runs) > 1 {
		a, b := r.Runs[0], r.Runs[len(r.Runs)-1]
		r.RateRatio = ratio(b.PerSec, a.PerSec)
		r.SubmitP95Ratio = ratio(b.Submit.P95, a.Submit.P95)
	}
	if o.CleanupTasks > 0 {
		c, err := cleanupRun(ctx, cl, cnt, o, progress)
		if err != nil {
			return r, fmt.Errorf("cleanup: %w", err)
		}
		r.Cleanup = &c
	}
	return r, nil
}

// retentionRun fills a fresh deployment with n completed tasks (the
// table's stream on, as in AWS and under triage dev), then submits
// o.RetentionTasks single tasks over HTTP while one consumer runs them.
func retentionRun(ctx context.Context, cl clients, cnt *counter, o options, idx, n int, progress func(string, ...any)) (RetentionRun, error) {
	run := RetentionRun{Tasks: o.RetentionTasks}
	d, err := deploy(ctx, cl, fmt.Sprintf("bench-retention-%d", idx))
	if err != nil {
		return run, err
	}
	defer func() { _ = d.teardown(context.WithoutCancel(ctx), cl) }()
	t0 := time.Now()
	got, err := fillRetained(ctx, cl, d, n, o.Concurrency, time.Now().Add(budget(ctx, 10*time.Minute, 5*time.Minute)))
	if err != nil {
		return run, err
	}
	run.Retained, run.FillSeconds = got, round(time.Since(t0).Seconds(), 1)

	l := newLedger()
	done := newTracker(o.RetentionTasks)
	cnt.observe(d.table(), done)
	defer cnt.observe(d.table(), nil)
	cs, err := d.consumers(o.Setups[0].resolve(d.app.Config.ReservedHigh), l)
	if err != nil {
		return run, err
	}
	running := startConsumers(ctx, cs)
	p := newProducer(d, false)
	defer p.close()
	if idx == 0 {
		// Untimed first: the first size would otherwise also pay for the
		// emulators' and the process's warm-up (JIT, connections).
		warm := newTracker(o.RetentionTasks / 2)
		cnt.observe(d.table(), warm)
		if _, err := submitTimed(ctx, p, o.RetentionTasks/2, o.Concurrency); err != nil {
			_ = running.stop()
			return run, fmt.Errorf("warm-up: %w", err)
		}
		warm.wait(ctx, 2*time.Minute)
		cnt.observe(d.table(), done)
	}

	start := time.Now()
	lat, err := submitTimed(ctx, p, o.RetentionTasks, o.Concurrency)
	if err != nil {
		_ = running.stop()
		return run, err
	}
	complete := done.wait(ctx, budget(ctx, 3*time.Minute, 2*time.Minute))
	end := done.lastAt()
	if !complete {
		end = time.Now()
	}
	if err := running.stop(); err != nil {
		progress("   warning: %v", err)
	}
	run.Completed = done.count()
	run.Submit = distOf(lat)
	run.Seconds = round(end.Sub(start).Seconds(), 2)
	run.PerSec = round(rate(run.Completed, end.Sub(start)), 1)
	return run, nil
}

// cleanupRun fills a fresh deployment with o.CleanupTasks completed tasks,
// starts a cleanup of all of them through DELETE /api/v1/tasks, and runs
// the promoter's cleanup runner back to back (each run with the budget
// the promoter gives it) until the job is done.
func cleanupRun(ctx context.Context, cl clients, cnt *counter, o options, progress func(string, ...any)) (CleanupRun, error) {
	c := CleanupRun{Tasks: o.CleanupTasks, TargetSecs: cleanupTargetSeconds}
	d, err := deploy(ctx, cl, "bench-cleanup")
	if err != nil {
		return c, err
	}
	defer func() { _ = d.teardown(context.WithoutCancel(ctx), cl) }()
	progress("   cleanup: writing %d completed tasks", o.CleanupTasks)
	t0 := time.Now()
	got, err := fillRetained(ctx, cl, d, o.CleanupTasks, o.Concurrency, time.Now().Add(budget(ctx, 15*time.Minute, 3*time.Minute)))
	if err != nil {
		return c, err
	}
	c.Tasks, c.FillSeconds = got, round(time.Since(t0).Seconds(), 1)
	progress("   cleanup: %d tasks written in %.0f s; starting the job", got, c.FillSeconds)
	time.Sleep(10 * time.Millisecond)
	cut := time.Now().UTC() // every task finished before it

	toks := &auth.Tokens{}
	toks.Add(benchToken, auth.Admin)
	srv := httptest.NewServer(apiapp.Handler(d.app, toks, api.Options{}))
	defer srv.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, srv.URL+"/api/v1/tasks?older_than="+url.QueryEscape(cut.Format(time.RFC3339Nano)), nil)
	if err != nil {
		return c, err
	}
	req.Header.Set("Authorization", "Bearer "+benchToken)
	before := cnt.snapshot()
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return c, fmt.Errorf("DELETE /api/v1/tasks: %w", err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	c.AcceptMS = round(float64(time.Since(start).Microseconds())/1000, 1)
	if resp.StatusCode != http.StatusAccepted {
		return c, fmt.Errorf("DELETE /api/v1/tasks: status %d: %s", resp.StatusCode, body)
	}

	runner := cleanup.NewRunner(d.app.Store, cleanup.Options{
		Owner:  "bench-promoter",
		Copies: deadletter.New(d.app.Queues, d.app.Store, d.app.Enqueuer),
	})
	deadline := time.Now().Add(budget(ctx, 20*time.Minute, time.Minute))
	for ctx.Err() == nil && time.Now().Before(deadline) && !c.Done {
		rep, err := runner.Run(ctx, cleanupRunBudget)
		if err != nil {
			return c, fmt.Errorf("cleanup run %d: %w", c.Runs+1, err)
		}
		c.Runs++
		c.Pages += rep.Pages
		c.Deleted += int64(rep.Deleted)
		c.Done = rep.Done
		if rep.Job == "" {
			break // no job running: done before this run
		}
		progress("   cleanup: run %d deleted %d (%d so far, %.0f s)", c.Runs, rep.Deleted, c.Deleted, time.Since(start).Seconds())
	}
	el := time.Since(start)
	c.Seconds = round(el.Seconds(), 1)
	c.PerSec = round(rate(int(c.Deleted), el), 1)
	c.Phase = newPhase("cleanup", cnt.snapshot().since(before), int(max(c.Deleted, 1)))
	// What is left: a Scan of the whole table (the bench's check, not counted).
	var last map[string]ddbtypes.AttributeValue
	for {
		out, err := cl.ddb.Scan(uncounted(ctx), &dynamodb.ScanInput{
			TableName:                 aws.String(d.table()),
			Select:                    ddbtypes.SelectCount,
			FilterExpression:          aws.String("#s = :c"),
			ExpressionAttributeNames:  map[string]string{"#s": "status"},
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":c": &ddbtypes.AttributeValueMemberS{Value: string(triagetype.Completed)}},
			ExclusiveStartKey:         last,
		})
		if err != nil {
			return c, fmt.Errorf("count the tasks left: %w", err)
		}
		c.Left += int(out.Count)
		if last = out.LastEvaluatedKey; len(last) == 0 {
			break
		}
	}
	return c, nil
}

func printRetention(w io.Writer, r Retention) {
	t := &table{
		title: "16. big tables: the same run on a table holding few and many finished tasks",
		head:  []string{"retained", "fill s", "tasks", "completed", "submit p50 ms", "submit p95 ms", "seconds", "tasks/s"},
	}
	for _, x := range r.Runs {
		t.row(d(x.Retained), f(x.FillSeconds, 1), d(x.Tasks), d(x.Completed), f(x.Submit.P50, 1), f(x.Submit.P95, 1), f(x.Seconds, 1), f(x.PerSec, 1))
	}
	if len(r.Runs) > 1 {
		t.note("largest ÷ smallest: tasks/s %.2f (target >= %.1f), submit p95 %.2f", r.RateRatio, r.TargetRatio, r.SubmitP95Ratio)
	}
	t.note("each size its own table, filled with completed tasks by BatchWriteItem (store.Item, not counted) with the table's stream on, then single HTTP submits from the bench's loaders while one consumer (the first -e2e setup) runs them")
	if r.Quick {
		t.note("-quick: smaller sizes than the full run's 2,000 and 50,000")
	}
	t.write(w)
	if c := r.Cleanup; c != nil {
		ct := &table{
			title: fmt.Sprintf("16b. cleanup job of %d finished tasks: DELETE /api/v1/tasks?older_than=(after the fill), then the promoter's runner (%v a run) back to back", c.Tasks, cleanupRunBudget),
			head:  []string{"deleted", "left", "done", "202 in ms", "seconds", "deleted/s", "runs", "pages", "DDB req/task", "WCU/task", "reported WCU/task", "RCU/task", "SQS req/task"},
		}
		ct.row(d(int(c.Deleted)), d(c.Left), fmt.Sprint(c.Done), f(c.AcceptMS, 1), f(c.Seconds, 1), f(c.PerSec, 1), d(c.Runs), d(c.Pages),
			f(c.Phase.DDBCalls, 4), f(c.Phase.DDBWriteWithGSI, 3), f(c.Phase.Reported.WriteUnits, 3), f(c.Phase.DDBRead, 3), f(c.Phase.SQSRequests, 4))
		ct.note("target: %d tasks in <= %.0f s (%s)", c.Tasks, c.TargetSecs, verdictWord(c.Done && c.Seconds <= c.TargetSecs))
		ct.note("in AWS the promoter gives the job at most %v of each minute: about %.0f s of wall time at this rate", cleanupRunBudget, c.Seconds*60/cleanupRunBudget.Seconds())
		ct.note("WCU/task is the bench's own count, the item's delete only (the fill was not counted, so it does not know each item's index entries); DynamoDB's reported figure includes the index entries each delete removes (by-created; by-type too with the type index)")
		ct.note("every task here is completed (deleted 25 to a BatchWriteItem); a dead letter or a cancelled task is one conditional DeleteItem and its DLQ copy one SQS request more")
		for _, op := range c.Phase.Ops {
			ct.note("  %s: %.4f a task", op.Op, op.PerTask)
		}
		ct.write(w)
	}
}

// verdictWord is "met" or "MISSED".
func verdictWord(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

// retention runs group 16 into r and notes the targets it misses.
func retention(ctx context.Context, cl clients, cnt *counter, o options, r *Results, probs *problems, progress func(string, ...any)) error {
	progress("16. big tables: end to end at %v retained tasks, then a cleanup of %d", o.RetentionSizes, o.CleanupTasks)
	x, err := measureRetention(ctx, cl, cnt, o, progress)
	r.Retention = &x
	if err != nil {
		return fmt.Errorf("retention: %w", err)
	}
	if len(x.Runs) > 1 && x.RateRatio < x.TargetRatio {
		probs.note("big tables: end to end at %d retained ran at %.2f× the rate at %d (target >= %.1f)", x.Runs[len(x.Runs)-1].Retained, x.RateRatio, x.Runs[0].Retained, x.TargetRatio)
	}
	if c := x.Cleanup; c != nil && (!c.Done || c.Seconds > c.TargetSecs) {
		probs.note("big tables: the cleanup of %d took %.0f s (done: %v; target <= %.0f s)", c.Tasks, c.Seconds, c.Done, c.TargetSecs)
	}
	return nil
}

// submitTimed POSTs n single noop tasks (priorities in turn) from workers
// goroutines and returns each call's latency.
func submitTimed(ctx context.Context, p *producer, n, workers int) ([]time.Duration, error) {
	var next atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	prios := triagetype.Priorities()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				s := time.Now()
				_, err := p.submit(ctx, task.Request{Type: "noop", Priority: prios[i%len(prios)]})
				el := time.Since(s)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				lat = append(lat, el)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return lat, firstErr
}
