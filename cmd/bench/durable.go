package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/triagehq/triage/internal/app/consumerapp"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/gohandlers"
	"github.com/triagehq/triage/internal/service"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
	"github.com/triagehq/triage/worker"
)

// Group "durable" (`-only durable`, issue #30): what a durable step costs
// in write units, and how soon a signal wakes a waiting task, beside
// Lambda durable functions ($8 per million operations) and Step
// Functions standard workflows ($25 per million state transitions).

// Durable is the group's figures.
type Durable struct {
	Tasks int `json:"tasks"`
	// Write units per task, submit to completion: no step, five steps.
	WritesNoSteps   float64 `json:"write_units_no_steps"`
	WritesFiveSteps float64 `json:"write_units_five_steps"`
	WritesPerStep   float64 `json:"write_units_per_step"`
	DollarsPerMStep float64 `json:"dollars_per_million_steps"`
	// Signals: from the signal's call to the task's completion.
	Signals      int     `json:"signals"`
	SignalP50MS  float64 `json:"signal_wake_p50_ms"`
	SignalP99MS  float64 `json:"signal_wake_p99_ms"`
	SignalWrites float64 `json:"write_units_per_signalled_wait"`
}

func durableHandlers(steps int) *gohandlers.Set {
	w := worker.New(worker.Options{})
	_ = w.Handle("noop", func(ctx context.Context, t *worker.Task) (any, error) {
		for i := range steps {
			if _, err := worker.Step(ctx, t, fmt.Sprintf("s%d", i), func(context.Context) (int, error) { return i, nil }); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
	_ = w.Handle("waiter", func(ctx context.Context, t *worker.Task) (any, error) {
		return worker.WaitSignal[int](ctx, t, "go", time.Hour)
	})
	s, _ := gohandlers.Of(w)
	return s
}

// durableWrites runs n noop tasks with steps steps each and returns the
// write units per task.
func durableWrites(ctx context.Context, cl clients, cnt *counter, n, steps int) (float64, error) {
	d, err := deploy(ctx, cl, fmt.Sprintf("bd%d", time.Now().UnixNano()%1e6))
	if err != nil {
		return 0, err
	}
	defer func() { _ = d.teardown(context.WithoutCancel(ctx), cl) }()
	c := consumerapp.New(d.app, durableHandlers(steps).Registry(), dispatch.Options{Concurrency: 8}, dispatch.Deps{})
	before := cnt.snapshot()
	ids, err := submitNoop(ctx, d, n, "")
	if err != nil {
		return 0, err
	}
	if err := runDurable(ctx, d, c, ids, triagetype.Completed); err != nil {
		return 0, err
	}
	tot := cnt.snapshot().since(before).total(svcDynamoDB)
	return (tot.WriteTable + tot.WriteIndex) / float64(n), nil
}

// runDurable runs c until every task of ids is in status want.
func runDurable(ctx context.Context, d *deployment, c *dispatch.Consumer, ids []string, want triagetype.Status) error {
	cctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = c.Run(cctx); close(done) }()
	defer func() { stop(); <-done }()
	return waitAll(ctx, d, ids, string(want), func(t *task.Task) bool { return t.Status == want })
}

// waitAll polls the tasks of ids until ok holds for every one, for at most
// 5 minutes; what names the state in the error.
func waitAll(ctx context.Context, d *deployment, ids []string, what string, ok func(*task.Task) bool) error {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		ts, err := d.app.Store.GetMany(ctx, ids)
		if err != nil {
			return err
		}
		n := 0
		for _, t := range ts {
			if ok(t) {
				n++
			}
		}
		if n == len(ids) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d tasks %s in 5 min", n, len(ids), what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func measureDurable(ctx context.Context, cl clients, cnt *counter, o options, progress func(string, ...any)) (Durable, error) {
	x := Durable{Tasks: 200, Signals: 100}
	if o.Quick {
		x.Tasks, x.Signals = 50, 30
	}
	var err error
	if x.WritesNoSteps, err = durableWrites(ctx, cl, cnt, x.Tasks, 0); err != nil {
		return x, fmt.Errorf("no steps: %w", err)
	}
	if x.WritesFiveSteps, err = durableWrites(ctx, cl, cnt, x.Tasks, 5); err != nil {
		return x, fmt.Errorf("five steps: %w", err)
	}
	x.WritesPerStep = (x.WritesFiveSteps - x.WritesNoSteps) / 5
	x.DollarsPerMStep = x.WritesPerStep * publicPrices().DDBPerMillionWriteUnits
	progress("   write units per task: %.2f without steps, %.2f with five: %.2f per step", x.WritesNoSteps, x.WritesFiveSteps, x.WritesPerStep)

	d, err := deploy(ctx, cl, fmt.Sprintf("bs%d", time.Now().UnixNano()%1e6))
	if err != nil {
		return x, err
	}
	defer func() { _ = d.teardown(context.WithoutCancel(ctx), cl) }()
	c := consumerapp.New(d.app, durableHandlers(0).Registry(), dispatch.Options{Concurrency: 8, PollWait: time.Second}, dispatch.Deps{})
	var ids []string
	for range x.Signals {
		r := task.Request{Type: "waiter", Priority: triagetype.High}
		tk := r.NewTask(d.app.Store.Now(), 0)
		saved, _, err := d.app.Enqueuer.Submit(ctx, tk)
		if err != nil {
			return x, err
		}
		ids = append(ids, saved.ID)
	}
	cctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = c.Run(cctx); close(done) }()
	defer func() { stop(); <-done }()
	parked := func(t *task.Task) bool { return t.Suspend != nil && t.Status == triagetype.Retrying }
	if err := waitAll(ctx, d, ids, "parked", parked); err != nil {
		return x, err
	}
	svc := service.New(service.Deps{Store: d.app.Store, Enqueuer: d.app.Enqueuer}, service.Options{})
	before := cnt.snapshot()
	var lat []float64
	for i, id := range ids {
		t0 := time.Now()
		if _, err := svc.Signal(ctx, id, "go", json.RawMessage(fmt.Sprint(i))); err != nil {
			return x, err
		}
		for {
			t, err := d.app.Store.Get(ctx, id)
			if err != nil {
				return x, err
			}
			if t.Status == triagetype.Completed {
				break
			}
			if time.Since(t0) > time.Minute {
				return x, fmt.Errorf("signalled task %s not completed in a minute (%s)", id, t.Status)
			}
			time.Sleep(10 * time.Millisecond)
		}
		lat = append(lat, float64(time.Since(t0).Microseconds())/1000)
	}
	tot := cnt.snapshot().since(before).total(svcDynamoDB)
	x.SignalWrites = (tot.WriteTable + tot.WriteIndex) / float64(len(ids))
	sort.Float64s(lat)
	x.SignalP50MS, x.SignalP99MS = lat[len(lat)/2], lat[min(len(lat)-1, len(lat)*99/100)]
	progress("   signal to completion: p50 %.0f ms, p99 %.0f ms; %.2f write units per signalled wait", x.SignalP50MS, x.SignalP99MS, x.SignalWrites)
	return x, nil
}

func printDurable(w io.Writer, x Durable) {
	p := publicPrices()
	tw := &table{title: "durable steps and signals (issue #30)", head: []string{"figure", "measured", "anchor"}}
	tw.row(fmt.Sprintf("write units per task (%d tasks): no step / five steps", x.Tasks), fmt.Sprintf("%.2f / %.2f", x.WritesNoSteps, x.WritesFiveSteps), "-")
	tw.row("  per step (replay reads nothing)", fmt.Sprintf("%.2f", x.WritesPerStep), "-")
	tw.row("  $ per million steps", fmt.Sprintf("$%.2f", x.DollarsPerMStep), "Lambda durable $8; Step Functions $25")
	tw.row(fmt.Sprintf("signal to completion (%d signals): p50 / p99", x.Signals), fmt.Sprintf("%.0f / %.0f ms", x.SignalP50MS, x.SignalP99MS), "<= 1000 ms")
	tw.row("  write units per signalled wait (signal, wake, claim, consume, finish)", fmt.Sprintf("%.2f ($%.2f per million)", x.SignalWrites, x.SignalWrites*p.DDBPerMillionWriteUnits), "-")
	tw.write(w)
}
