package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/triagehq/triage/internal/api"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// PayloadRun is group 7 for one payload size: tasks with that payload
// submitted through the API (batches as large as its body limit allows)
// and consumed, with every AWS call the two make counted: DynamoDB units
// on the table and its indexes (computed, and as DynamoDB reports them),
// S3 requests (payloads kept off the item, if the store does that) and SQS
// requests. Whatever the store does with a payload is what is measured.
type PayloadRun struct {
	PayloadBytes int     `json:"payload_bytes"`
	Tasks        int     `json:"tasks"`
	Completed    int     `json:"completed"`
	Complete     bool    `json:"complete"`
	APIBatch     int     `json:"tasks_per_submit_batch"`
	BatchMode    string  `json:"batch_mode"`
	Seconds      float64 `json:"consume_seconds"`
	Verdict      verdict `json:"verdict"`
	Submit       Phase   `json:"submit"`
	Consume      Phase   `json:"consume"`
	Total        Phase   `json:"total"`
	// Target is the bound on billed write units per task for this
	// size (0: none).
	Target float64 `json:"target_billed_write_units,omitempty"`
}

// payloadSizes are the payload sizes of group 7, in bytes of JSON.
var payloadSizes = []int{1 << 10, 10 << 10, 200 << 10}

// payloadTargets are the bounds on billed write units per no-op
// task (indexes included) by payload size.
var payloadTargets = map[int]float64{1 << 10: 5.0, 200 << 10: 8}

// payloadOf is a JSON object of exactly n bytes (at least 11): {"data":"xx…"}.
func payloadOf(n int) json.RawMessage {
	const frame = len(`{"data":""}`)
	return json.RawMessage(`{"data":"` + strings.Repeat("x", max(n-frame, 0)) + `"}`)
}

// submitChunk is how many tasks with payloads of n bytes go in one batch
// request: at most batchSize, and few enough that the request body stays
// within nine tenths of the API's batch body limit.
func submitChunk(n int) int {
	const perTask = 256 // the task's other fields and the JSON around them
	return max(1, min(batchSize, api.MaxBatchBody*9/10/(n+perTask)))
}

// measurePayloads runs group 7: for each size, a fresh deployment, tasks
// submitted through the API and consumed by the first setup.
func measurePayloads(ctx context.Context, cl clients, cnt *counter, o options, batchAPI bool, problems *problems, progress func(string, ...any)) ([]PayloadRun, error) {
	var out []PayloadRun
	setup := o.Setups[0]
	for i, size := range payloadSizes {
		progress("   payload %s: %d tasks", bytesText(size), o.PayloadTasks)
		r, err := measurePayload(ctx, cl, cnt, o, batchAPI, setup, fmt.Sprintf("bench-payload-%d", i), size, problems)
		if err != nil {
			return out, fmt.Errorf("payload %s: %w", bytesText(size), err)
		}
		if !r.Verdict.ok() {
			problems.add("payload %s: %s", bytesText(size), r.Verdict)
		}
		if !r.Complete {
			problems.note("payload %s: incomplete: %d of %d tasks completed", bytesText(size), r.Completed, r.Tasks)
		}
		out = append(out, r)
	}
	return out, nil
}

func measurePayload(ctx context.Context, cl clients, cnt *counter, o options, batchAPI bool, setup consumerSetup, prefix string, size int, problems *problems) (PayloadRun, error) {
	d, err := deploy(ctx, cl, prefix)
	if err != nil {
		return PayloadRun{}, err
	}
	defer func() { _ = d.teardown(context.WithoutCancel(ctx), cl) }()
	setup = setup.resolve(d.app.Config.ReservedHigh)
	p := newProducer(d, batchAPI)
	defer p.close()
	payload := payloadOf(size)
	prios := triagetype.Priorities()
	rs := make([]task.Request, o.PayloadTasks)
	for i := range rs {
		rs[i] = task.Request{Type: "noop", Priority: prios[i%len(prios)], Payload: payload}
	}
	chunk := submitChunk(size)
	r := PayloadRun{PayloadBytes: size, Tasks: len(rs), APIBatch: chunk, BatchMode: batchViaInProcess, Target: payloadTargets[size]}
	if batchAPI {
		r.BatchMode = batchViaAPI
	}
	// Fewer submitters for large payloads: each holds a request body.
	workers := max(1, min(o.Concurrency, (len(rs)+chunk-1)/chunk))
	pl, err := runPipeline(ctx, cnt, d, setup, budget(ctx, o.E2ETimeout, 2*time.Minute), false,
		func(ctx context.Context) ([]string, error) { return loadTasksChunked(ctx, p, rs, workers, chunk) },
		check)
	if err != nil {
		return r, err
	}
	if pl.Problem != "" {
		problems.add("payload %s: %s", bytesText(size), pl.Problem)
	}
	r.Completed, r.Complete, r.Verdict = pl.Completed, pl.Complete, pl.Verdict
	r.Seconds = round(pl.Consume.Seconds(), 3)
	r.Submit = newPhase(fmt.Sprintf("submit, %s payload", bytesText(size)), pl.loadCounts, pl.Sent)
	r.Consume = newPhase(fmt.Sprintf("consume, %s payload", bytesText(size)), pl.consumeCounts, pl.Completed)
	r.Total = combine(fmt.Sprintf("total, %s payload", bytesText(size)), r.Submit, r.Consume)
	return r, nil
}

// bytesText writes a size as "1 KB", "200 KB" (1 KB = 1,024 bytes).
func bytesText(n int) string {
	if n%1024 == 0 {
		return fmt.Sprintf("%d KB", n/1024)
	}
	return fmt.Sprintf("%d B", n)
}
