package main

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Warmup is the run-in before anything is measured. DynamoDB Local is a
// JVM program: on this machine its write rate roughly quadruples over its
// first ~20 s of load as the JIT compiles its hot paths, and fauxqs (Node)
// warms up too. Measuring a cold emulator would mostly measure the JIT, so
// bench first drives the real pipeline (single and batch submits through
// the API, a consumer completing them) in rounds until the completed-task
// rate settles.
type Warmup struct {
	Rounds    []float64 `json:"round_tasks_per_second"`
	Tasks     int       `json:"tasks"`
	Seconds   float64   `json:"seconds"`
	Converged bool      `json:"converged"`
	Rule      string    `json:"rule"`
	Verdict   verdict   `json:"verdict"`
}

const warmupRule = "rounds of 500 batch + 50 single submits consumed by 1 consumer x 64 slots (none reserved), until the last 3 rounds are within ±10% of their mean (at least 4 rounds)"

// warmUp runs the warm-up on its own deployment.
func warmUp(ctx context.Context, cl clients, cnt *counter, o options, batchAPI bool, problems *problems) (Warmup, error) {
	w := Warmup{Rule: warmupRule}
	d, err := deploy(ctx, cl, "bench-warmup")
	if err != nil {
		return w, err
	}
	defer func() { _ = d.teardown(context.WithoutCancel(ctx), cl) }()
	p := newProducer(d, batchAPI)
	defer p.close()
	l := newLedger()
	done := newTracker(math.MaxInt)
	cnt.observe(d.table(), done)
	defer cnt.observe(d.table(), nil)
	c, err := d.consumer(64, 0, l) // no reserved slot: the fastest setup drives the emulators hardest
	if err != nil {
		return w, err
	}
	run := startConsumers(ctx, []*dispatch.Consumer{c})
	start := time.Now()
	var mu sync.Mutex
	var ids []string
	single := task.Request{Type: "noop", Priority: triagetype.Medium}
	for round := 0; round < 60 && time.Since(start) < o.WarmupMax; round++ {
		t0 := time.Now()
		got, err := loadTasks(ctx, p, requests(500, func(i int) triagetype.Priority { return triagetype.Priorities()[i%3] }), 5)
		mu.Lock()
		ids = append(ids, got...)
		mu.Unlock()
		if err != nil {
			_ = run.stop()
			return w, err
		}
		lv, err := runLevel(ctx, 8, 50, func(ctx context.Context) (int, error) {
			id, err := p.submit(ctx, single)
			if err == nil {
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
			}
			return 1, err
		})
		if err != nil || lv.Errors > 0 {
			_ = run.stop()
			return w, fmt.Errorf("single submits failed: %v", err)
		}
		deadline := time.Now().Add(time.Minute)
		for done.count() < len(ids) && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
		}
		if done.count() < len(ids) {
			_ = run.stop()
			return w, fmt.Errorf("%d of %d tasks completed within a minute", done.count(), len(ids))
		}
		w.Rounds = append(w.Rounds, round1(rate(550, time.Since(t0))))
		if settled(w.Rounds) {
			w.Converged = true
			break
		}
	}
	if err := run.stop(); err != nil {
		problems.add("warm-up: %v", err)
	}
	w.Tasks, w.Seconds = len(ids), round(time.Since(start).Seconds(), 1)
	w.Verdict = check(l, ids, done, true)
	if !w.Verdict.ok() {
		problems.add("warm-up: %s", w.Verdict)
	}
	if !w.Converged {
		problems.note("warm-up: the rate had not settled after %.0f s (rounds: %v tasks/s); the first figures may be on a still-warming emulator", w.Seconds, w.Rounds)
	}
	_, _ = d.warns.take()
	return w, nil
}

func round1(x float64) float64 { return round(x, 1) }

// settled: at least 4 rounds, and the last 3 within ±10% of their mean.
func settled(rs []float64) bool {
	if len(rs) < 4 {
		return false
	}
	last := rs[len(rs)-3:]
	mean := (last[0] + last[1] + last[2]) / 3
	for _, r := range last {
		if math.Abs(r-mean) > 0.1*mean {
			return false
		}
	}
	return true
}
