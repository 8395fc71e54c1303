package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Latency is scenario 4: high-priority latency while a low backlog drains.
type Latency struct {
	Setup         string  `json:"setup"`
	Weights       string  `json:"weights"`
	ReservedHigh  int     `json:"reserved_high"`
	Backlog       int     `json:"low_backlog"`
	HighRate      float64 `json:"high_per_second"`
	HighSeconds   float64 `json:"high_seconds"`
	HighSubmitted int     `json:"high_submitted"`
	Complete      bool    `json:"complete"`
	Seconds       float64 `json:"seconds"`
	HighCompleted int     `json:"high_completed"`
	LowCompleted  int     `json:"low_completed"`
	// Queue wait is started_at - created_at; end-to-end is completed_at -
	// created_at, both from the task record as the completing write left it.
	HighWait Dist     `json:"high_queue_wait"`
	HighE2E  Dist     `json:"high_end_to_end"`
	LowWait  Dist     `json:"low_queue_wait"`
	LowE2E   Dist     `json:"low_end_to_end"`
	Verdict  verdict  `json:"verdict"`
	Warnings []string `json:"warnings,omitempty"`
}

// measureLatency runs scenario 4 on a fresh deployment.
func measureLatency(ctx context.Context, cl clients, cnt *counter, o options, batchAPI bool, setup consumerSetup, problems *problems) (Latency, error) {
	d, err := deploy(ctx, cl, "bench-latency")
	if err != nil {
		return Latency{}, err
	}
	defer func() { _ = d.teardown(context.WithoutCancel(ctx), cl) }()
	setup = setup.resolve(d.app.Config.ReservedHigh)
	r := Latency{
		Setup: setup.describe(), Weights: weightsString(d.app.Config.Weights), ReservedHigh: setup.Reserved,
		Backlog: o.Backlog, HighRate: o.HighRate, HighSeconds: o.HighFor.Seconds(),
	}
	p := newProducer(d, batchAPI)
	defer p.close()
	lowIDs, err := loadTasks(ctx, p, requests(o.Backlog, func(int) triagetype.Priority { return triagetype.Low }), o.Concurrency)
	if err != nil {
		return r, err
	}
	highN := int(o.HighRate * o.HighFor.Seconds())
	l := newLedger()
	done := newTracker(len(lowIDs) + highN)
	cnt.observe(d.table(), done)
	defer cnt.observe(d.table(), nil)
	cs, err := d.consumers(setup, l)
	if err != nil {
		return r, err
	}

	limit := budget(ctx, o.LatencyTimeout, 4*time.Minute) // groups 7-9 come after
	bounded, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	start := time.Now()
	run := startConsumers(ctx, cs)

	// High tasks through the API at a steady rate once the drain is under
	// way, each in its own goroutine so a slow submit does not delay the next.
	var mu sync.Mutex
	var highIDs []string
	var wg sync.WaitGroup
	sleep(bounded, o.HighAfter)
	tick := time.NewTicker(time.Duration(float64(time.Second) / o.HighRate))
	for i := 0; i < highN && bounded.Err() == nil; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, err := p.submit(bounded, task.Request{Type: "noop", Priority: triagetype.High})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				problems.add("latency: submit of a high task failed: %v", err)
				return
			}
			highIDs = append(highIDs, id)
		}()
		if i < highN-1 {
			select {
			case <-tick.C:
			case <-bounded.Done():
			}
		}
	}
	tick.Stop()
	wg.Wait()
	r.HighSubmitted = len(highIDs)
	if r.HighSubmitted < highN {
		// The target assumed every submit succeeds; wait for what was sent.
		done.lower(len(lowIDs) + r.HighSubmitted)
	}
	r.Complete = done.wait(bounded, time.Until(start.Add(limit)))
	end := done.lastAt()
	if !r.Complete {
		end = time.Now()
	}
	if err := run.stop(); err != nil {
		problems.add("latency: %v", err)
	}
	if err := ctx.Err(); err != nil {
		return r, err
	}
	r.Seconds = round(end.Sub(start).Seconds(), 3)

	all := append(append([]string(nil), lowIDs...), highIDs...)
	r.Verdict = check(l, all, done, r.Complete)
	if !r.Verdict.ok() {
		problems.add("latency: %s", r.Verdict)
	}
	if !r.Complete {
		problems.note("latency: incomplete after %v: %d of %d tasks completed; figures are for the tasks that finished", limit.Round(time.Second), done.count(), len(all))
	}
	high, low := done.records(highIDs), done.records(lowIDs)
	r.HighCompleted, r.LowCompleted = len(high), len(low)
	r.HighWait, r.HighE2E = waits(high)
	r.LowWait, r.LowE2E = waits(low)
	summary, _ := d.warns.take()
	r.Warnings = summary
	return r, nil
}

// waits returns the queue-wait and end-to-end distributions of fs.
func waits(fs []finished) (wait, e2e Dist) {
	var w, e []time.Duration
	for _, f := range fs {
		w = append(w, f.Started.Sub(f.Created))
		e = append(e, f.Completed.Sub(f.Created))
	}
	return distOf(w), distOf(e)
}

func weightsString(w map[triagetype.Priority]int) string {
	return fmt.Sprintf("high=%d,medium=%d,low=%d", w[triagetype.High], w[triagetype.Medium], w[triagetype.Low])
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
