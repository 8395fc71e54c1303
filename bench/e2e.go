package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/triagehq/triage/internal/counters"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/task"
)

// consumerSetup is a number of consumers, the slots of each and how many
// of those only high-priority tasks may use (Reserved < 0: the configured
// TRIAGE_RESERVED_HIGH, 1 by default).
type consumerSetup struct {
	Consumers   int
	Concurrency int
	Reserved    int
}

func (c consumerSetup) String() string {
	if c.Reserved < 0 {
		return fmt.Sprintf("%dx%d", c.Consumers, c.Concurrency)
	}
	return fmt.Sprintf("%dx%dr%d", c.Consumers, c.Concurrency, c.Reserved)
}

// resolve fills in the configured reserved slots.
func (c consumerSetup) resolve(configured int) consumerSetup {
	if c.Reserved < 0 {
		c.Reserved = configured
	}
	return c
}

// describe is the setup in words.
func (c consumerSetup) describe() string {
	return fmt.Sprintf("%d consumer(s) x %d slots, %d reserved high", c.Consumers, c.Concurrency, c.Reserved)
}

// E2E is scenario 3 for one consumer setup, with scenario 6's CPU figures.
type E2E struct {
	Setup       string  `json:"setup"`
	Consumers   int     `json:"consumers"`
	Concurrency int     `json:"concurrency_each"`
	Reserved    int     `json:"reserved_high_each"`
	Tasks       int     `json:"tasks"`
	LoadSeconds float64 `json:"load_seconds"`
	LoadPerSec  float64 `json:"load_tasks_per_second"`
	Completed   int     `json:"completed"`
	Complete    bool    `json:"complete"`
	Seconds     float64 `json:"seconds"`
	PerSec      float64 `json:"tasks_per_second"`
	// Bound is the consumer-phase bound from the ceiling and this setup's
	// own calls per task; RatioToBound is PerSec over it.
	Bound        float64 `json:"consumer_bound_tasks_per_second"`
	RatioToBound float64 `json:"ratio_to_consumer_bound"`
	// StoreCompleted counts status=completed in DynamoDB per priority.
	StoreCompleted   map[task.Priority]int `json:"store_completed"`
	LeftoverMessages int                   `json:"leftover_messages"`
	Verdict          verdict               `json:"verdict"`
	CPU              CPUUse                `json:"cpu"`
	Warnings         []string              `json:"warnings,omitempty"`

	// HotKeys are the partition keys that took the most write units over
	// the run (submit and consume), per completed task.
	HotKeys []HotKey `json:"hot_keys"`

	loadCounts     counts
	consumerCounts counts
}

// HotKey is one partition key's share of the writes, and the task rate at
// which it would reach a DynamoDB partition's 1,000 write units a second.
type HotKey struct {
	Key                string  `json:"key"`
	WriteUnitsPerTask  float64 `json:"write_units_per_task"`
	CeilingTasksPerSec float64 `json:"ceiling_tasks_per_s"`
}

// partitionWriteLimit is what one DynamoDB partition takes, in write units a second.
const partitionWriteLimit = 1000

// hotKeys ranks the partition keys by write units per task between two
// snapshots and keeps the n hottest.
func hotKeys(before, after map[string]float64, tasks, n int) []HotKey {
	if tasks <= 0 {
		return nil
	}
	var out []HotKey
	for k, v := range after {
		if u := v - before[k]; u > 0 {
			per := u / float64(tasks)
			out = append(out, HotKey{Key: k, WriteUnitsPerTask: round(per, 4), CeilingTasksPerSec: round(partitionWriteLimit/per, 0)})
		}
	}
	slices.SortFunc(out, func(a, b HotKey) int {
		return cmp.Or(cmp.Compare(b.WriteUnitsPerTask, a.WriteUnitsPerTask), cmp.Compare(a.Key, b.Key))
	})
	return out[:min(n, len(out))]
}

// CPUUse is scenario 6: CPU time of the consumer window.
type CPUUse struct {
	UserSeconds    float64 `json:"user_seconds"`
	SystemSeconds  float64 `json:"system_seconds"`
	PerTaskMicros  float64 `json:"per_task_us"`
	WallSeconds    float64 `json:"wall_seconds"`
	CoresBusy      float64 `json:"cores_busy"`
	FauxqsPerTask  float64 `json:"fauxqs_per_task_us"`
	DynamoPerTask  float64 `json:"dynamodb_local_per_task_us"`
	EmulatorsKnown bool    `json:"emulators_measured"`
}

// running is a set of started consumers.
type running struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// startConsumers runs cs until stop is called.
func startConsumers(ctx context.Context, cs []*dispatch.Consumer) *running {
	ctx, cancel := context.WithCancel(ctx)
	r := &running{cancel: cancel, done: make(chan struct{})}
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() { defer wg.Done(); _ = c.Run(ctx) }()
	}
	go func() { wg.Wait(); close(r.done) }()
	return r
}

// stop ends the consumers and waits for them to drain (their own drain
// timeout is 30 s).
func (r *running) stop() error {
	r.cancel()
	select {
	case <-r.done:
		return nil
	case <-time.After(45 * time.Second):
		return fmt.Errorf("consumers did not stop within 45 s")
	}
}

// measureE2E runs scenario 3 for one setup on a fresh deployment: load n
// tasks, then consume them with nothing else running in the process.
func measureE2E(ctx context.Context, cl clients, cnt *counter, o options, batchAPI bool, setup consumerSetup, idx int, problems *problems) (E2E, error) {
	d, err := deploy(ctx, cl, fmt.Sprintf("bench-e2e-%d", idx))
	if err != nil {
		return E2E{}, err
	}
	defer func() { _ = d.teardown(context.WithoutCancel(ctx), cl) }()
	setup = setup.resolve(d.app.Config.ReservedHigh)
	r := E2E{Setup: setup.describe(), Consumers: setup.Consumers, Concurrency: setup.Concurrency, Reserved: setup.Reserved, Tasks: o.Tasks}

	prios := task.Priorities()
	rs := requests(o.Tasks, func(i int) task.Priority { return prios[i%len(prios)] })
	want := map[task.Priority]int{}
	for _, q := range rs {
		want[task.Priority(q.Priority)]++
	}
	p := newProducer(d, batchAPI)
	defer p.close()
	keys0 := cnt.keySnapshot()
	before := cnt.snapshot()
	t0 := time.Now()
	ids, err := loadTasks(ctx, p, rs, o.Concurrency)
	if err != nil {
		return r, err
	}
	loadTime := time.Since(t0)
	r.loadCounts = cnt.snapshot().since(before)
	r.LoadSeconds, r.LoadPerSec = round(loadTime.Seconds(), 3), round(rate(len(ids), loadTime), 1)

	l := newLedger()
	done := newTracker(len(ids))
	cnt.observe(d.table(), done)
	defer cnt.observe(d.table(), nil)
	cs, err := d.consumers(setup, l)
	if err != nil {
		return r, err
	}

	before = cnt.snapshot()
	cpu0, err := sampleCPU()
	if err != nil {
		return r, err
	}
	start := time.Now()
	run := startConsumers(ctx, cs)
	// Leave time for the scenarios after this one (see budget).
	r.Complete = done.wait(ctx, budget(ctx, o.E2ETimeout, 2*time.Minute))
	end := done.lastAt()
	if !r.Complete {
		end = time.Now()
	}
	if err := run.stop(); err != nil {
		problems.add("end-to-end %s: %v", setup.describe(), err)
	}
	stopped := time.Now()
	cpu1, err := sampleCPU()
	if err != nil {
		return r, err
	}
	r.consumerCounts = cnt.snapshot().since(before)
	if err := ctx.Err(); err != nil {
		return r, err
	}

	r.Completed = done.count()
	r.HotKeys = hotKeys(keys0, cnt.keySnapshot(), r.Completed, 5)
	r.Seconds = round(end.Sub(start).Seconds(), 3)
	r.PerSec = round(rate(r.Completed, end.Sub(start)), 1)
	r.CPU = cpuUse(cpuSince(cpu0, cpu1), stopped.Sub(start), r.Completed)
	r.Verdict = check(l, ids, done, r.Complete)
	if !r.Verdict.ok() {
		problems.add("end-to-end %s: %s", setup.describe(), r.Verdict)
	}
	if !r.Complete {
		problems.note("end-to-end %s: incomplete: %d of %d tasks completed in %.0f s (its time limit, or the run's)", setup.describe(), r.Completed, len(ids), r.Seconds)
	}

	// Cross-check the table: status=completed per priority, from the
	// stream-kept counters once they have caught up.
	r.StoreCompleted = map[task.Priority]int{}
	pollCtx, stopPoll := context.WithCancel(ctx)
	go func() { _ = d.app.CounterPoller().Run(pollCtx) }()
	var snap counters.Snapshot
	for deadline := time.Now().Add(60 * time.Second); ; {
		var err error
		if snap, err = d.app.Counters.Read(ctx); err != nil {
			stopPoll()
			return r, fmt.Errorf("read counters: %w", err)
		}
		settled := true
		for _, p := range prios {
			settled = settled && snap.Tasks[task.Completed][p] >= int64(want[p])
		}
		if settled || !r.Complete || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	stopPoll()
	for _, p := range prios {
		n := int(snap.Tasks[task.Completed][p])
		r.StoreCompleted[p] = n
		if r.Complete && n != want[p] {
			problems.add("end-to-end %s: %d %s tasks submitted but %d are completed in DynamoDB", setup.describe(), want[p], p, n)
		}
	}
	for _, p := range prios {
		dp, err := d.app.Queues.Depth(ctx, p)
		if err != nil {
			return r, fmt.Errorf("depth of %s queue: %w", p, err)
		}
		r.LeftoverMessages += dp.Visible + dp.InFlight + dp.Delayed + dp.DLQ
	}
	summary, _ := d.warns.take()
	r.Warnings = summary
	return r, nil
}

// budget is want, shortened so that at least reserve is left before ctx's
// deadline (the whole run's -max), and never below 10 s.
func budget(ctx context.Context, want, reserve time.Duration) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		want = min(want, time.Until(dl)-reserve)
	}
	return max(want, 10*time.Second)
}

func cpuUse(c cpuSample, wall time.Duration, tasks int) CPUUse {
	u := CPUUse{
		UserSeconds:   round(c.User.Seconds(), 3),
		SystemSeconds: round(c.System.Seconds(), 3),
		PerTaskMicros: round(per(float64((c.User+c.System).Microseconds()), tasks), 1),
		WallSeconds:   round(wall.Seconds(), 3),
		CoresBusy:     round((c.User+c.System).Seconds()/wall.Seconds(), 2),
	}
	node, okN := c.Emulators["node"]
	java, okJ := c.Emulators["java"]
	if okN && okJ {
		u.EmulatorsKnown = true
		u.FauxqsPerTask = round(per(float64(node.Microseconds()), tasks), 1)
		u.DynamoPerTask = round(per(float64(java.Microseconds()), tasks), 1)
	}
	return u
}
