package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/direct"
	"github.com/triagehq/triage/triageconfig"
	"github.com/triagehq/triage/triagetype"
)

// DirectRun is group 8 for one way of submitting without the HTTP API:
// the tasks' AWS calls from submit to the /stats counters, their hottest
// partition keys, and (group 5) their cost.
type DirectRun struct {
	Path       string     `json:"path"`
	Tasks      int        `json:"tasks"`
	Completed  int        `json:"completed"`
	Complete   bool       `json:"complete"`
	Consumers  int        `json:"consumers"`
	LoadSec    float64    `json:"load_seconds"`
	Seconds    float64    `json:"consume_seconds"`
	PerSec     float64    `json:"tasks_per_second"`
	Verdict    verdict    `json:"verdict"`
	Submit     Phase      `json:"submit"`
	Consume    Phase      `json:"consume"`
	Counters   Phase      `json:"counters"`
	Total      Phase      `json:"total"`
	HotKeys    []HotKey   `json:"hot_keys"`
	HotRead    []HotKey   `json:"hot_read_keys"`
	Ceiling    KeyCeiling `json:"projected_ceiling"`
	BodyBytes  int        `json:"message_body_bytes,omitempty"`
	SendsPerOp int        `json:"messages_per_send,omitempty"`
}

// The direct paths of group 8.
const (
	directSQS      = "direct send: SQS SendMessageBatch (10 per call), adopted by the consumer"
	directProducer = "direct producer: triage.Client over the direct transport (record + SendMessage)"
)

// directBody is what a producer sends straight to a queue: a task request,
// which the consumer adopts (README, "Direct SDK sends").
var directBody = `{"type":"noop","payload":{"bench":true},"priority":"medium"}`

// measureDirect runs group 8: both direct paths, each on a fresh deployment
// consumed by the first setup, with the counters caught up afterwards.
func measureDirect(ctx context.Context, cl clients, cnt *counter, o options, problems *problems, progress func(string, ...any)) ([]DirectRun, error) {
	var out []DirectRun
	for i, path := range []string{directSQS, directProducer} {
		progress("   %s: %d tasks", path, o.DirectTasks)
		r, err := measureDirectPath(ctx, cl, cnt, o, fmt.Sprintf("bench-direct-%d", i), path, problems)
		if err != nil {
			return out, fmt.Errorf("%s: %w", path, err)
		}
		if !r.Verdict.ok() {
			problems.add("%s: %s", path, r.Verdict)
		}
		if !r.Complete {
			problems.note("%s: incomplete: %d of %d tasks completed", path, r.Completed, r.Tasks)
		}
		out = append(out, r)
	}
	return out, nil
}

func measureDirectPath(ctx context.Context, cl clients, cnt *counter, o options, prefix, path string, problems *problems) (DirectRun, error) {
	d, err := deploy(ctx, cl, prefix)
	if err != nil {
		return DirectRun{}, err
	}
	defer func() { _ = d.teardown(context.WithoutCancel(ctx), cl) }()
	setup := o.Setups[0].resolve(d.app.Config.ReservedHigh)
	r := DirectRun{Path: path, Tasks: o.DirectTasks, Consumers: setup.Consumers}

	var submit submitFunc
	verify := check
	switch path {
	case directSQS:
		r.BodyBytes, r.SendsPerOp = len(directBody), 10
		qurl := d.res.QueueURLs[triagetype.Medium]
		submit = func(ctx context.Context) ([]string, error) {
			return sendDirect(ctx, cl.sqs, qurl, o.DirectTasks, o.Concurrency)
		}
		verify = checkAdopted
	case directProducer:
		// Built before the run: its start-up look-ups are not a task's.
		tr, err := direct.New(ctx, cl.cfg, direct.Options{Config: &triageconfig.Config{Prefix: prefix}})
		if err != nil {
			return r, err
		}
		prod := triage.NewClient(tr)
		submit = func(ctx context.Context) ([]string, error) {
			return produceDirect(ctx, prod, o.DirectTasks, o.Concurrency)
		}
	default:
		return r, fmt.Errorf("unknown direct path %q", path)
	}
	pl, err := runPipeline(ctx, cnt, d, setup, budget(ctx, o.E2ETimeout, 2*time.Minute), true, submit, verify)
	if err != nil {
		return r, err
	}
	if pl.Problem != "" {
		problems.add("%s: %s", path, pl.Problem)
	}
	r.Completed, r.Complete, r.Verdict = pl.Completed, pl.Complete, pl.Verdict
	r.LoadSec, r.Seconds = round(pl.Load.Seconds(), 3), round(pl.Consume.Seconds(), 3)
	r.PerSec = round(rate(pl.Completed, pl.Consume), 1)
	r.Submit = newPhase("submit ("+path+")", pl.loadCounts, pl.Sent)
	short, _, _ := strings.Cut(path, ":")
	r.Consume = newPhase("consume ("+short+"): adopt or claim, run, complete, delete", pl.consumeCounts, pl.Completed)
	r.Counters = newPhase("counters ("+short+"): the run's stream records folded into the /stats counters", pl.countersCounts, pl.Completed)
	r.Total = combine("total ("+path+")", r.Submit, r.Consume, r.Counters)
	r.HotKeys = hotKeys(pl.keys0, pl.keys1, pl.Completed, 3, false)
	r.HotRead = hotKeys(pl.keys0, pl.keys1, pl.Completed, 3, true)
	r.Ceiling = ceilingOf(r.HotKeys, r.HotRead)
	return r, nil
}

// sendDirect sends n direct-send messages to qurl in batches of ten from
// workers goroutines, as a producer using the AWS SDK would, and returns
// the message ids SQS gave them.
func sendDirect(ctx context.Context, q *sqs.Client, qurl string, n, workers int) ([]string, error) {
	jobs := make(chan int)
	var mu sync.Mutex
	var ids []string
	var firstErr error
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range jobs {
				es := make([]sqstypes.SendMessageBatchRequestEntry, k)
				for j := range es {
					es[j] = sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(j)), MessageBody: aws.String(directBody)}
				}
				out, err := q.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(qurl), Entries: es})
				mu.Lock()
				switch {
				case err != nil && firstErr == nil:
					firstErr = fmt.Errorf("direct send: %w", err)
				case err == nil:
					for _, s := range out.Successful {
						ids = append(ids, aws.ToString(s.MessageId))
					}
					if len(out.Failed) > 0 && firstErr == nil {
						firstErr = fmt.Errorf("direct send: %d entries failed: %s", len(out.Failed), aws.ToString(out.Failed[0].Message))
					}
				}
				mu.Unlock()
			}
		}()
	}
	for sent := 0; sent < n && ctx.Err() == nil; sent += 10 {
		jobs <- min(10, n-sent)
	}
	close(jobs)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return ids, err
	}
	return ids, firstErr
}

// produceDirect submits n tasks through a triage.Client over the direct
// transport from workers goroutines and returns their ids.
func produceDirect(ctx context.Context, prod *triage.Client, n, workers int) ([]string, error) {
	jobs := make(chan struct{})
	var mu sync.Mutex
	var ids []string
	var firstErr error
	var wg sync.WaitGroup
	payload := json.RawMessage(`{"bench":true}`)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				t, _, err := prod.Submit(ctx, "noop", payload, triage.WithPriority(triage.Medium))
				mu.Lock()
				switch {
				case err != nil && firstErr == nil:
					firstErr = fmt.Errorf("direct producer: %w", err)
				case err == nil:
					ids = append(ids, t.ID)
				}
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		jobs <- struct{}{}
	}
	close(jobs)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return ids, err
	}
	return ids, firstErr
}
