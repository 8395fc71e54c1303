package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/triagehq/triage/internal/control"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Group 13: waiting that costs nothing (issue #22). A paused backlog is set
// aside once and then costs no receives; a global pause stops receiving;
// the key, and a keyed limit, cost write units per task that are measured
// here against their targets.

// Waiting is group 13's figures.
type Waiting struct {
	Backlog int `json:"paused_backlog"`
	// SetAsideSeconds is how long the consumer took to set the backlog
	// aside (each task received once).
	SetAsideSeconds float64 `json:"set_aside_seconds"`
	// While the backlog sat paused (type paused, consumer running), over
	// PausedSeconds: the emulators' and the bench process's CPU, and SQS
	// requests per hour and messages received.
	PausedSeconds        float64 `json:"paused_seconds"`
	PausedCPUCores       float64 `json:"paused_cpu_cores"`
	PausedSQSPerHour     float64 `json:"paused_sqs_requests_per_hour"`
	PausedReceivedMsgs   int64   `json:"paused_messages_received"`
	GlobalPausedSQSPerHr float64 `json:"global_paused_sqs_requests_per_hour"`
	// After the resume, with one slot: the first start, and the order of
	// the first OrderChecked starts against submit order.
	FirstStartMS float64 `json:"first_start_after_resume_ms"`
	OrderChecked int     `json:"order_checked"`
	Inversions   int     `json:"inversions"`
	// Write units per task, run end to end: no key, a key, a key with a
	// rate limit, a key with a concurrency limit (and extras over none).
	WritesPlain   float64 `json:"write_units_plain"`
	WritesKeyed   float64 `json:"write_units_keyed"`
	WritesRate    float64 `json:"write_units_key_rate_limit"`
	WritesConc    float64 `json:"write_units_key_concurrency_limit"`
	WriteTasksPer int     `json:"write_tasks_per_case"`
	// The concurrency limit's slot items alone, per task: below the limit
	// (Conc, max 1,000) and at it (Limit: max 2, the consumer's 8 slots
	// sending the rest aside, so slots pass from ended runs to released
	// tasks), with the at-limit case's writes per task in all.
	SlotConc      keyUse  `json:"slot_units_key_concurrency_limit"`
	SlotLimit     keyUse  `json:"slot_units_key_at_concurrency_limit"`
	WritesAtLimit float64 `json:"write_units_key_at_concurrency_limit"`
	// FlagLimit: the at-limit key's settings item alone, per task: the
	// held flag read consistently at each end and after each set-aside
	// (control.Controls.ScopeHeld, SlotFreeAfterHold), and its raises.
	FlagLimit keyUse `json:"flag_units_key_at_concurrency_limit"`
	// Fairness: a flood against another key's task, and a weighted split.
	Fairness Fairness `json:"fairness"`
	// Rate: a rate-limited backlog's receives (waitrate.go).
	Rate RateBacklog `json:"rate_backlog"`
}

func measureWaiting(ctx context.Context, cl clients, cnt *counter, o options, progress func(string, ...any)) (Waiting, error) {
	w := Waiting{Backlog: 10000, WriteTasksPer: 300}
	if o.Quick {
		w.Backlog, w.WriteTasksPer = 1000, 100
	}
	var err error
	if w.Rate, err = measureRateBacklog(ctx, cl, o.Quick); err != nil {
		return w, fmt.Errorf("rate-limited backlog: %w", err)
	}
	progress("   rate-limited backlog: %d tasks at %.0f/s: %.2f receives a task while waiting (%.2f received), %d set aside, most %d starts in a sliding second", w.Rate.Tasks, w.Rate.PerSecond, w.Rate.WaitingPerTask, w.Rate.ReceivedPerTask, w.Rate.SetAside, w.Rate.MaxSliding)
	if o.Only == "waiting-rate" {
		return Waiting{Rate: w.Rate}, nil
	}
	d, err := deploy(ctx, cl, fmt.Sprintf("bw%d", time.Now().UnixNano()%1e6))
	if err != nil {
		return w, err
	}
	defer d.teardown(context.WithoutCancel(ctx), cl)
	a := d.app
	if _, err := a.Controls.SetPaused(ctx, "noop", true); err != nil {
		return w, err
	}
	ids, err := submitNoop(ctx, d, w.Backlog, "")
	if err != nil {
		return w, err
	}
	l := newLedger()
	c, err := d.consumer(1, 0, l)
	if err != nil {
		return w, err
	}
	cctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = c.Run(cctx); close(done) }()
	defer func() { stop(); <-done }()
	start := time.Now()
	for c.Waits().SetAside < int64(w.Backlog) {
		if time.Since(start) > 10*time.Minute {
			return w, fmt.Errorf("set aside %d of %d paused tasks in 10 min", c.Waits().SetAside, w.Backlog)
		}
		time.Sleep(200 * time.Millisecond)
	}
	w.SetAsideSeconds = round(time.Since(start).Seconds(), 1)
	progress("   %d paused tasks set aside in %.1f s", w.Backlog, w.SetAsideSeconds)

	time.Sleep(2 * time.Second) // let the last deletes land
	cpu0, _ := sampleCPU()
	req0, recv0, t0 := cnt.snapshot(), c.Waits().Received, time.Now()
	time.Sleep(20 * time.Second)
	cpu1, _ := sampleCPU()
	el := time.Since(t0)
	sqsCalls := cnt.snapshot().since(req0).total(svcSQS).Calls
	w.PausedSeconds = round(el.Seconds(), 1)
	used := cpu1.User + cpu1.System - cpu0.User - cpu0.System
	for name, v := range cpu1.Emulators {
		used += v - cpu0.Emulators[name]
	}
	w.PausedCPUCores = round(used.Seconds()/el.Seconds(), 3)
	w.PausedSQSPerHour = round(float64(sqsCalls)/el.Hours(), 0)
	w.PausedReceivedMsgs = c.Waits().Received - recv0

	resumed := time.Now()
	if _, err := a.Controls.SetPaused(ctx, "noop", false); err != nil {
		return w, err
	}
	w.OrderChecked = min(200, w.Backlog)
	var starts []*task.Task
	for len(starts) < w.OrderChecked {
		if time.Since(resumed) > 5*time.Minute {
			return w, fmt.Errorf("%d of %d starts within 5 min of the resume", len(starts), w.OrderChecked)
		}
		time.Sleep(250 * time.Millisecond)
		ts, err := a.Store.GetMany(ctx, ids[:min(len(ids), 2*w.OrderChecked)])
		if err != nil {
			return w, err
		}
		starts = starts[:0]
		for _, t := range ts {
			if t.StartedAt != nil {
				starts = append(starts, t)
			}
		}
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i].StartedAt.Before(*starts[j].StartedAt) })
	w.FirstStartMS = round(float64(starts[0].StartedAt.Sub(resumed))/float64(time.Millisecond), 0)
	pos := map[string]int{}
	for i, id := range ids {
		pos[id] = i
	}
	for i := range starts {
		for j := i + 1; j < len(starts); j++ {
			if pos[starts[i].ID] > pos[starts[j].ID] {
				w.Inversions++
			}
		}
	}
	stop()
	<-done

	// A global pause: the consumer sleeps instead of receiving.
	if _, err := a.Controls.SetPaused(ctx, "", true); err != nil {
		return w, err
	}
	c2, err := d.consumer(1, 0, newLedger())
	if err != nil {
		return w, err
	}
	gctx, gstop := context.WithCancel(ctx)
	gdone := make(chan struct{})
	go func() { _ = c2.Run(gctx); close(gdone) }()
	time.Sleep(time.Second)
	g0, gt := cnt.snapshot(), time.Now()
	time.Sleep(10 * time.Second)
	w.GlobalPausedSQSPerHr = round(float64(cnt.snapshot().since(g0).total(svcSQS).Calls)/time.Since(gt).Hours(), 0)
	gstop()
	<-gdone
	if _, err := a.Controls.SetPaused(ctx, "", false); err != nil {
		return w, err
	}
	progress("   paused: %.3f cores, %.0f SQS requests/h (global pause %.0f/h); first start %.0f ms after resume, %d inversions in %d", w.PausedCPUCores, w.PausedSQSPerHour, w.GlobalPausedSQSPerHr, w.FirstStartMS, w.Inversions, w.OrderChecked)

	// Write units per task: no key, a key, a key with a limit, on a fresh
	// deployment (the paused type above still holds most of its backlog,
	// and new tasks of it would queue behind).
	d2, err := deploy(ctx, cl, fmt.Sprintf("bu%d", time.Now().UnixNano()%1e6))
	if err != nil {
		return w, err
	}
	defer d2.teardown(context.WithoutCancel(ctx), cl)
	a = d2.app
	for _, cs := range []struct {
		key         string
		set         func() error
		into        *float64
		slots, flag *keyUse
	}{
		{"", nil, &w.WritesPlain, nil, nil},
		{"tenant-a", nil, &w.WritesKeyed, nil, nil},
		{"tenant-r", func() error {
			r := 100000.0
			_, err := a.Controls.SetKeyControls(ctx, "", "tenant-r", nil, &r, nil)
			return err
		}, &w.WritesRate, nil, nil},
		{"tenant-c", func() error {
			n := 1000
			_, err := a.Controls.SetKeyControls(ctx, "", "tenant-c", nil, nil, &n)
			return err
		}, &w.WritesConc, &w.SlotConc, nil},
		{"tenant-l", func() error {
			n := 2
			_, err := a.Controls.SetKeyControls(ctx, "", "tenant-l", nil, nil, &n)
			return err
		}, &w.WritesAtLimit, &w.SlotLimit, &w.FlagLimit},
	} {
		if cs.set != nil {
			if err := cs.set(); err != nil {
				return w, err
			}
		}
		k0 := cnt.keySnapshot()
		u, err := writesPerTask(ctx, d2, cnt, cs.key, w.WriteTasksPer)
		if err != nil {
			return w, err
		}
		*cs.into = round(u, 3)
		if cs.slots != nil {
			*cs.slots = slotUnits(k0, cnt.keySnapshot(), "table CONC#key#"+cs.key+"#", w.WriteTasksPer)
		}
		if cs.flag != nil {
			*cs.flag = slotUnits(k0, cnt.keySnapshot(), "table CTRL#key#"+cs.key, w.WriteTasksPer)
		}
	}
	progress("   write units per task: plain %.3f, keyed %.3f, key rate limit %.3f, key concurrency limit %.3f (slots %.3f W %.3f R; at the limit %.3f, slots %.3f W %.3f R, flag %.3f W %.3f R)",
		w.WritesPlain, w.WritesKeyed, w.WritesRate, w.WritesConc, w.SlotConc.W, w.SlotConc.R, w.WritesAtLimit, w.SlotLimit.W, w.SlotLimit.R, w.FlagLimit.W, w.FlagLimit.R)
	if w.Fairness, err = measureFairness(ctx, cl, o.Quick, progress); err != nil {
		return w, err
	}
	return w, nil
}

// slotUnits is the write and read units per task (of n) that the slot
// items with partition keys under prefix took between snapshots a and b.
func slotUnits(a, b map[string]keyUse, prefix string, n int) keyUse {
	var u keyUse
	for k, v := range b {
		if strings.HasPrefix(k, prefix) {
			u.W += v.W - a[k].W
			u.R += v.R - a[k].R
		}
	}
	return keyUse{W: round(u.W/float64(n), 3), R: round(u.R/float64(n), 3)}
}

// submitNoop submits n noop tasks (of key, if set) one after another and
// returns their ids in submit order.
func submitNoop(ctx context.Context, d *deployment, n int, key string) ([]string, error) {
	var ids []string
	for start := 0; start < n; start += 100 {
		var ts []*task.Task
		for range min(100, n-start) {
			r := task.Request{Type: "noop", Key: key}
			ts = append(ts, r.NewTask(time.Now().UTC(), 15*time.Minute))
		}
		for _, res := range d.app.Enqueuer.SubmitBatch(ctx, ts) {
			if res.Err != nil {
				return nil, res.Err
			}
			ids = append(ids, res.Task.ID)
		}
	}
	return ids, nil
}

// writesPerTask submits n tasks of key, runs them to completion and
// returns the DynamoDB write units billed per task, submit included.
func writesPerTask(ctx context.Context, d *deployment, cnt *counter, key string, n int) (float64, error) {
	c, err := d.consumer(8, 0, newLedger())
	if err != nil {
		return 0, err
	}
	before := cnt.snapshot()
	ids, err := submitNoop(ctx, d, n, key)
	if err != nil {
		return 0, err
	}
	cctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = c.Run(cctx); close(done) }()
	defer func() { stop(); <-done }()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		ts, err := d.app.Store.GetMany(ctx, ids)
		if err != nil {
			return 0, err
		}
		finished := 0
		for _, t := range ts {
			if t.Status == triagetype.Completed {
				finished++
			}
		}
		if finished == len(ids) {
			break
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%d of %d key %q tasks completed in 5 min", finished, len(ids), key)
		}
		time.Sleep(500 * time.Millisecond)
	}
	stop()
	<-done
	// Reads of the completion check above are not writes; every write since
	// before is the tasks' (submit, claim, finish, and any control items).
	tot := cnt.snapshot().since(before).total(svcDynamoDB)
	return (tot.WriteTable + tot.WriteIndex) / float64(n), nil
}

func printWaiting(w io.Writer, x Waiting) {
	tw := &table{title: "13. waiting that costs nothing (issue #22)", head: []string{"figure", "measured", "target"}}
	if x.Rate.Tasks > 0 {
		x.Rate.rows(tw)
	}
	if x.Backlog == 0 {
		tw.write(w) // -only waiting-rate
		return
	}
	tw.row(fmt.Sprintf("paused backlog of %d: CPU (emulators + bench)", x.Backlog), fmt.Sprintf("%.1f%% of a core over %.0f s", 100*x.PausedCPUCores, x.PausedSeconds), "<= 5% of one core")
	tw.row("  SQS requests per hour while the type is paused", fmt.Sprintf("%.0f (messages received: %d)", x.PausedSQSPerHour, x.PausedReceivedMsgs), "idle long polls only; 0 messages")
	tw.row("  SQS requests per hour under a global pause", fmt.Sprintf("%.0f", x.GlobalPausedSQSPerHr), "0")
	tw.row("  set aside (each task received once)", fmt.Sprintf("%.1f s", x.SetAsideSeconds), "-")
	tw.row("first start after resume", fmt.Sprintf("%.0f ms", x.FirstStartMS), "<= 1000 ms")
	tw.row(fmt.Sprintf("start order after resume, one slot, first %d", x.OrderChecked), fmt.Sprintf("%d inversions", x.Inversions), "0")
	tw.row(fmt.Sprintf("write units per task (%d tasks a case): no key", x.WriteTasksPer), fmt.Sprintf("%.3f", x.WritesPlain), "-")
	tw.row("  with a key (extra)", fmt.Sprintf("%+.3f", x.WritesKeyed-x.WritesPlain), "0")
	tw.row("  key with a rate limit (extra)", fmt.Sprintf("%+.3f", x.WritesRate-x.WritesPlain), "<= 1")
	tw.row("  key with a concurrency limit (extra)", fmt.Sprintf("%+.3f", x.WritesConc-x.WritesPlain), "<= 1")
	tw.row("    of which its slot items (max 1,000)", fmt.Sprintf("%.3f W, %.3f R", x.SlotConc.W, x.SlotConc.R), "<= 1 W")
	tw.row("    at the limit (max 2, 8 consumer slots): all writes, slot items", fmt.Sprintf("%.3f; %.3f W, %.3f R", x.WritesAtLimit, x.SlotLimit.W, x.SlotLimit.R), "slots <= 1 W")
	tw.row("    at the limit: the key's settings item (held flag)", fmt.Sprintf("%.3f W, %.3f R", x.FlagLimit.W, x.FlagLimit.R), "-")
	f := x.Fairness
	if f.FloodTasks > 0 {
		tw.row(fmt.Sprintf("fairness: A floods %d high tasks, then B submits one: A's starts before B's", f.FloodTasks), fmt.Sprintf("%d (%.0f ms after the consumer started)", f.FloodAhead, f.FloodWaitMS), fmt.Sprintf("<= %d", f.FloodBound))
		tw.row(fmt.Sprintf("  keys weighted 3:1, %d tasks each: A's starts per B's, first %d", f.SplitTasks, f.SplitWindow), fmt.Sprintf("%.2f (%d:%d)", f.SplitRatio, f.SplitA, f.SplitWindow-f.SplitA), "3 (2.7-3.3)")
	}
	tw.note("CPU is the emulators' (from /proc) and the bench process's, which runs the consumer; write units as billed on AWS, from the counted requests")
	tw.note("fairness: submitted through the submit service with fair routing (the API's path), run by one consumer of %d slots (noop tasks); the bound is 2 windows of A's (%d each) + 2 x the slots", fairSlots, control.FairWindow)
	tw.write(w)
}
