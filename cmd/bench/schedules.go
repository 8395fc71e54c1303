package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/triagehq/triage/internal/schedule"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Group 12: periodic tasks. What one schedule tick costs on top of the
// task it makes: the ticker reads what is due (one keys-only Query per
// by-due shard, shared by every schedule due), reads each due schedule,
// checks its tick's task is not there yet, makes the task (the same
// conditional put as any submit) and advances the schedule with one
// conditional UpdateItem that moves its by-due entry.

// ScheduleRun is group 12's result.
type ScheduleRun struct {
	Schedules int     `json:"schedules"`
	Minutes   int     `json:"minutes"`
	Ticks     int     `json:"ticks"`
	Tasks     int     `json:"tasks_made"`
	Seconds   float64 `json:"tick_seconds"`
	// Per tick, computed (see capacityMethod) and as DynamoDB reported.
	ScheduleWrite    float64 `json:"schedule_item_write_units_per_tick"`
	ScheduleWriteRep float64 `json:"schedule_item_write_units_per_tick_reported"`
	TaskCreateWrite  float64 `json:"task_create_write_units_per_tick"`
	ReadUnits        float64 `json:"read_units_per_tick"`
	PlainTaskWrite   float64 `json:"plain_task_write_units"`
	ExtraWrite       float64 `json:"extra_write_units_per_tick"`
	ExtraDollars     float64 `json:"extra_usd_per_million_ticks"`
	ExtraReadDollars float64 `json:"extra_read_usd_per_million_ticks"`
	Phase            Phase   `json:"phase"`
}

// scheduleClock is the bench's test clock: the ticker sees a minute pass
// per step, without the bench waiting one.
type scheduleClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *scheduleClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

// measureSchedules makes n schedules that fire every minute and steps a
// test clock through minutes, one ticker run per minute, counting every
// request of the runs.
func measureSchedules(ctx context.Context, cl clients, cnt *counter, n, minutes int) (ScheduleRun, error) {
	r := ScheduleRun{Schedules: n, Minutes: minutes, PlainTaskWrite: targetBilledWriteUnits}
	d, err := deploy(ctx, cl, "bench-sched")
	if err != nil {
		return r, err
	}
	defer func() { _ = d.teardown(context.WithoutCancel(ctx), cl) }()
	clk := &scheduleClock{now: time.Now().UTC().Truncate(time.Minute).Add(10 * time.Second)}
	st := schedule.NewStore(d.app.DynamoDB, d.table(), d.app.Store.Shards(), clk.Now)
	for i := range n {
		sc := schedule.Schedule{Name: fmt.Sprintf("bench-%04d", i), Cron: "* * * * *", Task: triagetype.SubmitRequest{Type: "noop"}}
		c, err := schedule.Validate(&sc, task.KnownTypes{})
		if err != nil {
			return r, err
		}
		if _, _, err := st.Put(uncounted(ctx), sc, c); err != nil {
			return r, err
		}
	}
	tk := schedule.NewTicker(st, d.app.Store, d.app.Enqueuer, schedule.TickerOptions{Now: clk.Now})
	before := cnt.snapshot()
	t0 := time.Now()
	for range minutes {
		clk.mu.Lock()
		clk.now = clk.now.Add(time.Minute)
		clk.mu.Unlock()
		rep, err := tk.Tick(ctx)
		if err != nil {
			return r, fmt.Errorf("tick: %w", err)
		}
		r.Tasks += rep.Enqueued
	}
	r.Seconds = round(time.Since(t0).Seconds(), 2)
	r.Ticks = n * minutes
	c := cnt.snapshot().since(before)
	r.Phase = newPhase("schedule ticks (group 12)", c, r.Ticks)
	var sched, taskCreate opStats
	for k, v := range c {
		switch k.Target {
		case "sched":
			sched.add(v)
		case "task":
			if k.Operation == "PutItem" {
				taskCreate.add(v)
			}
		}
	}
	r.ScheduleWrite = round(per(sched.WriteTable+sched.WriteIndex, r.Ticks), 4)
	r.ScheduleWriteRep = round(per(sched.RepWrite, r.Ticks), 4)
	r.TaskCreateWrite = round(per(taskCreate.WriteTable+taskCreate.WriteIndex, r.Ticks), 4)
	r.ReadUnits = r.Phase.DDBRead
	// The tick's task is created as any submit without an idempotency key
	// is, and lives the same life: its writes are the plain task's. What a
	// tick adds is the schedule item's write and its index entry's move.
	r.ExtraWrite = r.ScheduleWrite
	pr := publicPrices()
	r.ExtraDollars = round(r.ExtraWrite*pr.DDBPerMillionWriteUnits, 4)
	r.ExtraReadDollars = round(r.ReadUnits*pr.DDBPerMillionReadUnits, 4)
	return r, nil
}

func printSchedules(w io.Writer, s ScheduleRun) {
	t := &table{
		title: "12. periodic tasks: what one schedule tick adds to its task",
		head:  []string{"schedules", "minutes", "ticks", "tasks made", "tick s", "schedule WCU/tick", "reported", "task create WCU/tick", "RCU/tick", "plain task WCU", "extra WCU/tick", "extra $/M ticks (writes)", "reads $/M"},
	}
	t.row(d(s.Schedules), d(s.Minutes), d(s.Ticks), d(s.Tasks), f(s.Seconds, 2), f(s.ScheduleWrite, 3), f(s.ScheduleWriteRep, 3),
		f(s.TaskCreateWrite, 3), f(s.ReadUnits, 3), f(s.PlainTaskWrite, 1), f(s.ExtraWrite, 3), f(s.ExtraDollars, 3), f(s.ExtraReadDollars, 3))
	t.note("every schedule fires each minute; a test clock steps the minutes, one ticker run each (what one promoter run does)")
	t.note("schedule WCU: the conditional UpdateItem that advances next_tick (1 unit for an item under 1 KB) and its by-due entry's move (a delete and a put: 2)")
	t.note("the tick's task is made by the same conditional put as a submit without an idempotency key, so it costs the plain task's %.0f WCU over its life", s.PlainTaskWrite)
	t.note("RCU/tick: the due Query (shared by the schedules due), the schedule's consistent read and the check that the tick's task does not exist yet")
	for _, op := range s.Phase.Ops {
		t.note("%s: %.3f calls/tick", op.Op, op.PerTask)
	}
	t.write(w)
}
