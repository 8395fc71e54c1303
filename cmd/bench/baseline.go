package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Baselines are what the emulators do for the same work without triage,
// measured in the same run on the same deployment just before triage's own
// submits, so each of triage's figures can stand beside the floor the
// emulators set for it (group 2a).
type Baselines struct {
	// Put is a raw conditional PutItem of a task-shaped item (the store's
	// attributes and index keys); Pair is that PutItem followed by a
	// SendMessage of the message body, what one submit must do at least.
	Put  []SubmitLevel `json:"raw_putitem"`
	Pair []SubmitLevel `json:"raw_putitem_sendmessage"`
	// BatchTasks tasks written as conditional PutItems from Concurrency
	// workers with their messages sent 10 per SendMessageBatch: the raw
	// bound for a batch enqueue.
	BatchTasks   int     `json:"raw_batch_tasks"`
	BatchPerSec  float64 `json:"raw_batch_tasks_per_second"`
	BatchSeconds float64 `json:"raw_batch_seconds"`
	// Beside is triage's single submit measured again with a consumer and
	// the counters poller running on the same deployment, as under `make
	// run` (the consumer runs what is submitted); PairBeside is the raw
	// pair in the same conditions (its items are task records and its
	// messages triage's, so the consumer runs those too): the emulators
	// then do the same work behind each write, and the two compare.
	Beside     []SubmitLevel `json:"submit_beside_consumer"`
	PairBeside []SubmitLevel `json:"raw_pair_beside_consumer"`
}

// rawItem is a task item as the store writes it, with a fresh id.
func rawItem(d *deployment) (map[string]ddbtypes.AttributeValue, *task.Task, error) {
	r := task.Request{Type: "noop", Priority: triagetype.Medium, Payload: json.RawMessage(`{"bench":true}`)}
	t := r.NewTask(time.Now().UTC(), 15*time.Minute)
	av, err := d.app.Store.Item(t)
	return av, t, err
}

func rawPut(ctx context.Context, cl clients, d *deployment, av map[string]ddbtypes.AttributeValue) error {
	_, err := cl.ddb.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:           aws.String(d.table()),
		Item:                av,
		ConditionExpression: aws.String("attribute_not_exists(" + spec.AttrPK + ")"),
	})
	return err
}

func rawBody(t *task.Task) string {
	return fmt.Sprintf(`{"id":%q,"v":%d,"p":%q}`, t.ID, t.Version, t.EffectivePriority)
}

// measureBaselines runs the raw PutItem and PutItem+SendMessage at
// concurrency 1 and o.Concurrency (n calls each), and the raw batch bound
// for batchTasks tasks.
func measureBaselines(ctx context.Context, cl clients, d *deployment, o options, n, batchTasks int) (Baselines, error) {
	var b Baselines
	queue := d.res.QueueURLs[triagetype.Medium]
	put := func(ctx context.Context) (int, error) {
		av, _, err := rawItem(d)
		if err != nil {
			return 0, err
		}
		return 1, rawPut(ctx, cl, d, av)
	}
	pair := rawPair(cl, d, queue)
	for _, c := range levels(o.Concurrency) {
		lv, err := runLevel(ctx, c, n, put)
		if err != nil {
			return b, fmt.Errorf("raw PutItem: %w", err)
		}
		b.Put = append(b.Put, lv)
		if lv, err = runLevel(ctx, c, n, pair); err != nil {
			return b, fmt.Errorf("raw PutItem+SendMessage: %w", err)
		}
		b.Pair = append(b.Pair, lv)
	}
	secs, err := rawBatch(ctx, cl, d, queue, o.Concurrency, batchTasks)
	if err != nil {
		return b, fmt.Errorf("raw batch: %w", err)
	}
	b.BatchTasks, b.BatchSeconds, b.BatchPerSec = batchTasks, round(secs, 3), round(float64(batchTasks)/secs, 1)
	// The messages were only sent; nobody will consume them.
	_, _ = cl.sqs.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: aws.String(queue)})
	return b, nil
}

// rawPair is one raw PutItem of a task record followed by the SendMessage
// of its message.
func rawPair(cl clients, d *deployment, queue string) func(context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		av, t, err := rawItem(d)
		if err != nil {
			return 0, err
		}
		if err := rawPut(ctx, cl, d, av); err != nil {
			return 0, err
		}
		_, err = cl.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queue), MessageBody: aws.String(rawBody(t))})
		return 1, err
	}
}

// rawBatch writes n task items from workers goroutines, each sending its
// messages 10 per SendMessageBatch, and returns the seconds it took.
func rawBatch(ctx context.Context, cl clients, d *deployment, queue string, workers, n int) (float64, error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var firstErr error
	fail := func(err error) { once.Do(func() { firstErr = err }) }
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var entries []sqstypes.SendMessageBatchRequestEntry
			flush := func() bool {
				if len(entries) == 0 {
					return true
				}
				out, err := cl.sqs.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(queue), Entries: entries})
				if err == nil && len(out.Failed) > 0 {
					err = fmt.Errorf("%d messages failed: %s", len(out.Failed), aws.ToString(out.Failed[0].Message))
				}
				entries = entries[:0]
				if err != nil {
					fail(err)
					return false
				}
				return true
			}
			for next.Add(1) <= int64(n) {
				av, t, err := rawItem(d)
				if err == nil {
					err = rawPut(ctx, cl, d, av)
				}
				if err != nil {
					fail(err)
					return
				}
				entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(len(entries))), MessageBody: aws.String(rawBody(t))})
				if len(entries) == 10 && !flush() {
					return
				}
			}
			flush()
		}()
	}
	wg.Wait()
	return time.Since(start).Seconds(), firstErr
}

// measureBeside measures single submits through p with a consumer and the
// counters poller running on d, as `make run` has them. The tasks the
// scenario submitted before are run first: the figure is a submit beside a
// consumer that keeps up, not beside one draining a backlog.
func measureBeside(ctx context.Context, cl clients, d *deployment, o options, submitOne func(context.Context) (int, error)) (api, raw []SubmitLevel, err error) {
	cs, err := d.consumers(consumerSetup{Consumers: 1, Concurrency: 32, Reserved: -1}.resolve(d.app.Config.ReservedHigh), newLedger())
	if err != nil {
		return nil, nil, err
	}
	run := startConsumers(ctx, cs)
	pctx, stopPoller := context.WithCancel(ctx)
	polled := make(chan struct{})
	go func() { _ = d.app.CounterPoller().Run(pctx); close(polled) }()
	defer func() { stopPoller(); <-polled }()
	pair := rawPair(cl, d, d.res.QueueURLs[triagetype.Medium])
	for _, c := range levels(o.Concurrency) {
		for _, x := range []struct {
			out *[]SubmitLevel
			do  func(context.Context) (int, error)
		}{{&raw, pair}, {&api, submitOne}} {
			// Each level starts with the consumer caught up.
			if err := drained(ctx, d, 3*time.Minute); err != nil {
				_ = run.stop()
				return api, raw, err
			}
			lv, err := runLevel(ctx, c, o.Submits, x.do)
			if err != nil {
				_ = run.stop()
				return api, raw, err
			}
			*x.out = append(*x.out, lv)
		}
	}
	return api, raw, run.stop()
}

func newTarget(name string, measured, target float64, unit string, atMost bool, basis string) Target {
	t := Target{Metric: name, Measured: round(measured, 1), Target: round(target, 1), Cmp: ">=", Met: measured >= target, Unit: unit, Basis: basis}
	if atMost {
		t.Cmp, t.Met = "<=", measured <= target
	}
	return t
}

// speedTargets are the local stack's targets (issue 20), each against a
// floor measured in the same run.
func speedTargets(r *Results) []Target {
	var ts []Target
	b := r.Submit.Baselines
	if len(b.Pair) > 0 && len(r.Submit.Single) > 0 {
		raw := b.Pair[0].Latency.P95
		ts = append(ts, newTarget("single submit p95 (concurrency 1)", r.Submit.Single[0].Latency.P95, 2*raw, "ms", true,
			fmt.Sprintf("≤ 2 × raw PutItem+SendMessage p95 (%.2f ms)", raw)))
		if len(b.Beside) > 0 && len(b.PairBeside) > 0 {
			rawB := b.PairBeside[0].Latency.P95
			ts = append(ts, newTarget("single submit p95 beside a running consumer (as under make run)", b.Beside[0].Latency.P95, 2*rawB, "ms", true,
				fmt.Sprintf("≤ 2 × raw PutItem+SendMessage p95 beside the same consumer (%.2f ms)", rawB)))
		}
	}
	if len(b.Pair) > 1 && len(r.Submit.Single) > 1 {
		raw := b.Pair[1].ReqPerSec
		ts = append(ts, newTarget(fmt.Sprintf("single submits at concurrency %d", b.Pair[1].Concurrency), r.Submit.Single[1].TasksPerSec, 0.8*raw, "tasks/s", false,
			fmt.Sprintf("≥ 0.8 × raw PutItem+SendMessage at the same concurrency (%.0f/s)", raw)))
	}
	if b.BatchPerSec > 0 && len(r.EndToEnd) > 0 {
		e := r.EndToEnd[0]
		want, basis := 1000.0, "≥ 1,000 tasks/s (lower than 0.8 × the raw batch bound, "+fmt.Sprintf("%.0f/s", b.BatchPerSec)+")"
		if 0.8*b.BatchPerSec < want {
			want, basis = 0.8*b.BatchPerSec, fmt.Sprintf("≥ 0.8 × the raw batch bound (%.0f/s: conditional PutItems from %d workers, sends 10 per batch), lower than 1,000/s", b.BatchPerSec, r.Settings.Concurrency)
		}
		ts = append(ts, newTarget(fmt.Sprintf("batch enqueue of %d tasks (batches of 100, %d in flight)", e.Tasks, r.Settings.Concurrency), e.LoadPerSec, want, "tasks/s", false, basis))
	}
	if wb := r.WriteBound; wb.Bound > 0 && len(r.EndToEnd) > 0 {
		e := r.EndToEnd[0]
		ts = append(ts, newTarget("end to end ("+e.Setup+")", e.PerSec, 0.8*wb.Bound, "tasks/s", false,
			fmt.Sprintf("≥ 0.8 × the implied bound %.0f/s = conditional-write ceiling %.0f/s ÷ %.2f DynamoDB writes per task in the consumer", wb.Bound, wb.Ceiling, wb.WritesPerTask)))
	}
	if r.Latency.HighWait.N > 0 {
		ts = append(ts, newTarget(fmt.Sprintf("high-priority queue wait p99 behind a %d-task low backlog", r.Latency.Backlog), r.Latency.HighWait.P99, 500, "ms", true, "≤ 500 ms"))
	}
	return ts
}

// WriteBound is the end-to-end rate the emulator's conditional writes
// allow: its ceiling for task-shaped conditional writes (task table, its
// indexes and stream) divided by the DynamoDB writes a task makes in the
// consumer (claim, outcome, and whatever else the run counted).
type WriteBound struct {
	Ceiling       float64 `json:"conditional_write_ceiling_per_second"`
	WritesPerTask float64 `json:"consumer_writes_per_task"`
	Bound         float64 `json:"tasks_per_second"`
}

func writeBound(c Ceiling, consume Phase) WriteBound {
	wb := WriteBound{Ceiling: c.rate(ceilCondWrite)}
	for k, s := range consume.counts {
		if k.Service == "DynamoDB" && isWrite(k.Operation) {
			wb.WritesPerTask += per(float64(s.Attempts), consume.Tasks)
		}
	}
	wb.WritesPerTask = round(wb.WritesPerTask, 3)
	if wb.WritesPerTask > 0 {
		wb.Bound = round(wb.Ceiling/wb.WritesPerTask, 1)
	}
	return wb
}

// isWrite reports whether a DynamoDB operation writes items.
func isWrite(op string) bool {
	switch op {
	case "PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems":
		return true
	}
	return false
}

// drained waits until every queue of d is empty (nothing visible, in
// flight or delayed).
func drained(ctx context.Context, d *deployment, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		left := 0
		for _, pr := range triagetype.Priorities() {
			dp, err := d.app.Queues.Depth(ctx, pr)
			if err != nil {
				return fmt.Errorf("wait for the queues to drain: %w", err)
			}
			left += dp.Visible + dp.InFlight + dp.Delayed
		}
		if left == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("queues not drained after %v: %d messages left", limit, left)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
