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
	"github.com/triagehq/triage/triagetype"
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
	StoreCompleted   map[triagetype.Priority]int `json:"store_completed"`
	LeftoverMessages int                         `json:"leftover_messages"`
	Verdict          verdict                     `json:"verdict"`
	CPU              CPUUse                      `json:"cpu"`
	Warnings         []string                    `json:"warnings,omitempty"`

	// HotKeys are the partition keys that took the most write units over
	// the run (submit, consume, and the stream-kept counters catching up),
	// per completed task; HotReadKeys those that took the most read units.
	// Ceiling is the projected real-AWS rate the hottest keys allow.
	HotKeys     []HotKey   `json:"hot_keys"`
	HotReadKeys []HotKey   `json:"hot_read_keys"`
	Ceiling     KeyCeiling `json:"projected_ceiling"`

	loadCounts     counts
	consumerCounts counts
	countersCounts counts
	countersTasks  int
}

// HotKey is one partition key's share of the writes and reads, and the
// task rates at which it would reach a DynamoDB partition's 1,000 write
// units or 3,000 read units a second.
type HotKey struct {
	Key                    string  `json:"key"`
	WriteUnitsPerTask      float64 `json:"write_units_per_task"`
	CeilingTasksPerSec     float64 `json:"ceiling_tasks_per_s"` // the write ceiling
	ReadUnitsPerTask       float64 `json:"read_units_per_task"`
	ReadCeilingTasksPerSec float64 `json:"read_ceiling_tasks_per_s"`
}

// KeyCeiling is the projected real-AWS ceiling: the task rate at which the
// hottest key reaches a partition's limit, for writes and for reads; the
// lower of the two bounds the run's workload (one type at one priority).
type KeyCeiling struct {
	HottestWriteKey   string  `json:"hottest_write_key"`
	WriteUnitsPerTask float64 `json:"write_units_per_task"`
	WriteTasksPerSec  float64 `json:"write_ceiling_tasks_per_s"`
	HottestReadKey    string  `json:"hottest_read_key"`
	ReadUnitsPerTask  float64 `json:"read_units_per_task"`
	ReadTasksPerSec   float64 `json:"read_ceiling_tasks_per_s"`
	TasksPerSec       float64 `json:"ceiling_tasks_per_s"`
}

// A DynamoDB partition takes at most 1,000 write units and 3,000 read
// units a second.
const (
	partitionWriteLimit = 1000
	partitionReadLimit  = 3000
)

// keyCeiling is the task rate at which a key taking perTask units per task
// reaches limit units a second (0 when the key takes nothing: no bound).
func keyCeiling(limit, perTask float64) float64 {
	if perTask <= 0 {
		return 0
	}
	return round(limit/perTask, 0)
}

// hotKeys ranks the partition keys between two snapshots by write units
// per task (reads=false) or read units per task (reads=true) and keeps the
// n hottest.
func hotKeys(before, after map[string]keyUse, tasks, n int, reads bool) []HotKey {
	if tasks <= 0 {
		return nil
	}
	var out []HotKey
	for k, v := range after {
		u := keyUse{W: v.W - before[k].W, R: v.R - before[k].R}
		if (reads && u.R <= 0) || (!reads && u.W <= 0) {
			continue
		}
		w, r := u.W/float64(tasks), u.R/float64(tasks)
		out = append(out, HotKey{
			Key:               k,
			WriteUnitsPerTask: round(w, 4), CeilingTasksPerSec: keyCeiling(partitionWriteLimit, w),
			ReadUnitsPerTask: round(r, 4), ReadCeilingTasksPerSec: keyCeiling(partitionReadLimit, r),
		})
	}
	slices.SortFunc(out, func(a, b HotKey) int {
		if reads {
			return cmp.Or(cmp.Compare(b.ReadUnitsPerTask, a.ReadUnitsPerTask), cmp.Compare(a.Key, b.Key))
		}
		return cmp.Or(cmp.Compare(b.WriteUnitsPerTask, a.WriteUnitsPerTask), cmp.Compare(a.Key, b.Key))
	})
	return out[:min(n, len(out))]
}

// ceilingOf projects the ceiling from the hottest write and read keys.
func ceilingOf(hotW, hotR []HotKey) KeyCeiling {
	var c KeyCeiling
	if len(hotW) > 0 {
		c.HottestWriteKey, c.WriteUnitsPerTask, c.WriteTasksPerSec = hotW[0].Key, hotW[0].WriteUnitsPerTask, hotW[0].CeilingTasksPerSec
	}
	if len(hotR) > 0 {
		c.HottestReadKey, c.ReadUnitsPerTask, c.ReadTasksPerSec = hotR[0].Key, hotR[0].ReadUnitsPerTask, hotR[0].ReadCeilingTasksPerSec
	}
	for _, x := range []float64{c.WriteTasksPerSec, c.ReadTasksPerSec} {
		if x > 0 && (c.TasksPerSec == 0 || x < c.TasksPerSec) {
			c.TasksPerSec = x
		}
	}
	return c
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

	prios := triagetype.Priorities()
	rs := requests(o.Tasks, func(i int) triagetype.Priority { return prios[i%len(prios)] })
	want := map[triagetype.Priority]int{}
	for _, q := range rs {
		want[triagetype.Priority(q.Priority)]++
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
	r.Complete = done.wait(ctx, budget(ctx, o.E2ETimeout, 5*time.Minute))
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
	// stream-kept counters once they have caught up. The catch-up is what
	// the counters function does with the run's stream records in AWS (its
	// trigger takes batches of up to 1,000, as the poller does), so its
	// calls are a phase of the task's life: counted, and charged to the
	// keys they touch. The bench's own reads of the counters are not.
	r.StoreCompleted = map[triagetype.Priority]int{}
	before = cnt.snapshot()
	snap, err := catchUp(ctx, d, time.Minute, func(s counters.Snapshot) bool {
		settled := true
		for _, p := range prios {
			settled = settled && s.Tasks[triagetype.Completed][p] >= int64(want[p])
		}
		return settled || !r.Complete
	})
	if err != nil {
		return r, err
	}
	r.countersCounts, r.countersTasks = cnt.snapshot().since(before), r.Completed
	keys1 := cnt.keySnapshot()
	r.HotKeys = hotKeys(keys0, keys1, r.Completed, 5, false)
	r.HotReadKeys = hotKeys(keys0, keys1, r.Completed, 5, true)
	r.Ceiling = ceilingOf(r.HotKeys, r.HotReadKeys)
	for _, p := range prios {
		n := int(snap.Tasks[triagetype.Completed][p])
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

// catchUp runs the deployment's counter poller (the stream reader that
// keeps the /stats counters) until done accepts the counters or timeout
// passes, then stops it and waits for it to return. The counters are read
// uncounted: those reads are the bench's, not the task's.
func catchUp(ctx context.Context, d *deployment, timeout time.Duration, done func(counters.Snapshot) bool) (counters.Snapshot, error) {
	pollCtx, stopPoll := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { defer close(stopped); _ = d.app.CounterPoller().Run(pollCtx) }()
	defer func() { stopPoll(); <-stopped }()
	var snap counters.Snapshot
	for deadline := time.Now().Add(timeout); ; {
		var err error
		if snap, err = d.app.Counters.Read(uncounted(ctx)); err != nil {
			return snap, fmt.Errorf("read counters: %w", err)
		}
		if done(snap) || time.Now().After(deadline) || ctx.Err() != nil {
			return snap, ctx.Err()
		}
		time.Sleep(250 * time.Millisecond)
	}
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
