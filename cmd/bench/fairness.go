package main

import (
	"context"
	"fmt"
	"time"

	"github.com/triagehq/triage/internal/control"
	"github.com/triagehq/triage/internal/handler/ledger"
	"github.com/triagehq/triage/internal/submit"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Part of group 13: fair dispatch within a priority (issue #22 item 2). A
// flood of one key's high tasks, then one task of another key; and two
// keys weighted 3:1, both flooding. Tasks go through the submit service
// with fair routing, as the API sends them.

// fairSlots is the consumer's slots in both runs.
const fairSlots = 4

// Fairness is the fairness part of group 13.
type Fairness struct {
	// FloodTasks high tasks of key A, then one of key B; B's task started
	// after FloodAhead of A's, FloodWaitMS after the consumer started.
	// FloodBound is the README's bound in A's starts: two windows of A's
	// (the one the submits left on the queue and the one releases keep
	// there) and two rounds of the slots.
	FloodTasks  int     `json:"flood_tasks"`
	FloodAhead  int     `json:"flood_a_started_before_b"`
	FloodBound  int     `json:"flood_bound"`
	FloodWaitMS float64 `json:"flood_b_wait_ms"`
	// SplitTasks tasks each of keys A (weight 3) and B (weight 1); of the
	// first SplitWindow starts, A had SplitA and B the rest.
	SplitTasks  int     `json:"split_tasks_per_key"`
	SplitWindow int     `json:"split_window"`
	SplitA      int     `json:"split_a_starts"`
	SplitRatio  float64 `json:"split_a_per_b"`
}

func measureFairness(ctx context.Context, cl clients, quick bool, progress func(string, ...any)) (Fairness, error) {
	f := Fairness{FloodTasks: 10000, SplitTasks: 400, SplitWindow: 400, FloodBound: 2*control.FairWindow + 2*fairSlots}
	if quick {
		f.FloodTasks, f.SplitTasks, f.SplitWindow = 1000, 200, 200
	}

	// The flood.
	d, err := deploy(ctx, cl, fmt.Sprintf("bf%d", time.Now().UnixNano()%1e6))
	if err != nil {
		return f, err
	}
	defer d.teardown(context.WithoutCancel(ctx), cl)
	svc := submit.New(d.app.Enqueuer, submit.Options{Fair: d.app.Controls, Now: d.app.Store.Now})
	if _, err := submitKeyed(ctx, svc, "A", f.FloodTasks); err != nil {
		return f, err
	}
	b, err := submitKeyed(ctx, svc, "B", 1)
	if err != nil {
		return f, err
	}
	starts, began, err := runUntil(ctx, d, func(s []ledger.Event) bool {
		for _, e := range s {
			if e.ID == b[0] {
				return true
			}
		}
		return false
	})
	if err != nil {
		return f, fmt.Errorf("flood: %w", err)
	}
	for _, e := range starts {
		if e.ID == b[0] {
			f.FloodWaitMS = round(float64(e.At.Sub(began))/float64(time.Millisecond), 0)
			break
		}
		f.FloodAhead++
	}
	progress("   flood of %d: B's task started after %d of A's (bound %d), %.0f ms after the consumer", f.FloodTasks, f.FloodAhead, f.FloodBound, f.FloodWaitMS)

	// The weighted split.
	d2, err := deploy(ctx, cl, fmt.Sprintf("bs%d", time.Now().UnixNano()%1e6))
	if err != nil {
		return f, err
	}
	defer d2.teardown(context.WithoutCancel(ctx), cl)
	three := 3
	if _, err := d2.app.Controls.SetKeyControls(ctx, "", "A", nil, nil, nil, &three); err != nil {
		return f, err
	}
	svc = submit.New(d2.app.Enqueuer, submit.Options{Fair: d2.app.Controls, Now: d2.app.Store.Now})
	as, err := submitKeyed(ctx, svc, "A", f.SplitTasks)
	if err != nil {
		return f, err
	}
	if _, err := submitKeyed(ctx, svc, "B", f.SplitTasks); err != nil {
		return f, err
	}
	isA := map[string]bool{}
	for _, id := range as {
		isA[id] = true
	}
	starts, _, err = runUntil(ctx, d2, func(s []ledger.Event) bool { return len(s) >= f.SplitWindow })
	if err != nil {
		return f, fmt.Errorf("split: %w", err)
	}
	for _, e := range starts[:f.SplitWindow] {
		if isA[e.ID] {
			f.SplitA++
		}
	}
	f.SplitRatio = round(float64(f.SplitA)/float64(max(f.SplitWindow-f.SplitA, 1)), 2)
	progress("   weights 3:1, both flooding: %d of the first %d starts were A's (%.2f:1)", f.SplitA, f.SplitWindow, f.SplitRatio)
	return f, nil
}

// submitKeyed submits n high noop tasks of key through svc and returns
// their ids in submit order.
func submitKeyed(ctx context.Context, svc *submit.Service, key string, n int) ([]string, error) {
	var ids []string
	for start := 0; start < n; start += 100 {
		rs := make([]task.Request, min(100, n-start))
		for i := range rs {
			rs[i] = task.Request{Type: "noop", Key: key, Priority: triagetype.High}
		}
		outs, err := svc.SubmitBatch(ctx, rs)
		if err != nil {
			return nil, err
		}
		for _, o := range outs {
			if o.Err != nil {
				return nil, o.Err
			}
			ids = append(ids, o.Task.ID)
		}
	}
	return ids, nil
}

// runUntil runs a consumer of fairSlots slots on d until done holds for
// its starts so far (at most 5 minutes) and returns them, in start order,
// with the time it began.
func runUntil(ctx context.Context, d *deployment, done func([]ledger.Event) bool) ([]ledger.Event, time.Time, error) {
	l := newLedger()
	c, err := d.consumer(fairSlots, 0, l)
	if err != nil {
		return nil, time.Time{}, err
	}
	cctx, stop := context.WithCancel(ctx)
	finished := make(chan struct{})
	began := time.Now()
	go func() { _ = c.Run(cctx); close(finished) }()
	defer func() { stop(); <-finished }()
	for {
		if s := l.Starts(); done(s) {
			return s, began, nil
		}
		if time.Since(began) > 5*time.Minute {
			return nil, began, fmt.Errorf("not done 5 min after the consumer started (%d starts)", len(l.Starts()))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
