package main

import (
	"context"
	"time"

	"github.com/triagehq/triage/internal/counters"
	"github.com/triagehq/triage/internal/handler/ledger"
	"github.com/triagehq/triage/triagetype"
)

// pipeline is one run of tasks through a deployment: submitted one way,
// then consumed, then (optionally) folded into the /stats counters, with
// each phase's AWS calls counted separately. Groups 7 and 8 are made of it.
type pipeline struct {
	Sent      int // tasks (or messages) the submit step created
	Completed int
	Complete  bool
	Load      time.Duration
	Consume   time.Duration
	Verdict   verdict
	// Problem is set when the consumers did not stop in time (reported as
	// a problem; the figures stand).
	Problem string

	loadCounts, consumeCounts, countersCounts counts
	keys0, keys1                              map[string]keyUse
}

// submitFunc submits a run's tasks and returns what it sent: the task ids
// when it knows them, or the message ids of direct sends.
type submitFunc func(ctx context.Context) (ids []string, err error)

// runPipeline submits with submit, consumes with setup's consumers until
// every task completed (or limit passes), checks the ledger with verify,
// and, with withCounters, lets the counter poller fold the run's stream
// records into the /stats counters.
func runPipeline(ctx context.Context, cnt *counter, d *deployment, setup consumerSetup, limit time.Duration, withCounters bool,
	submit submitFunc, verify func(l *ledger.Ledger, sent []string, done *tracker, complete bool) verdict) (pipeline, error) {
	var r pipeline
	r.keys0 = cnt.keySnapshot()
	before := cnt.snapshot()
	t0 := time.Now()
	sent, err := submit(ctx)
	r.Load = time.Since(t0)
	r.loadCounts = cnt.snapshot().since(before)
	r.Sent = len(sent)
	if err != nil {
		return r, err
	}

	l := newLedger()
	done := newTracker(len(sent))
	cnt.observe(d.table(), done)
	defer cnt.observe(d.table(), nil)
	cs, err := d.consumers(setup, l)
	if err != nil {
		return r, err
	}
	before = cnt.snapshot()
	start := time.Now()
	run := startConsumers(ctx, cs)
	r.Complete = done.wait(ctx, limit)
	end := done.lastAt()
	if !r.Complete || end.IsZero() {
		end = time.Now()
	}
	stopErr := run.stop()
	r.consumeCounts = cnt.snapshot().since(before)
	r.Consume = end.Sub(start)
	r.Completed = done.count()
	if err := ctx.Err(); err != nil {
		return r, err
	}
	if stopErr != nil {
		r.Problem = stopErr.Error()
	}
	r.Verdict = verify(l, sent, done, r.Complete)

	if withCounters {
		before = cnt.snapshot()
		_, err := catchUp(ctx, d, time.Minute, func(s counters.Snapshot) bool {
			n := int64(0)
			for _, v := range s.Tasks[triagetype.Completed] {
				n += v
			}
			return n >= int64(r.Completed)
		})
		if err != nil {
			return r, err
		}
		r.countersCounts = cnt.snapshot().since(before)
	}
	r.keys1 = cnt.keySnapshot()
	return r, nil
}
