package main

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/triagehq/triage/triagetype"
)

// RateBacklog is group 13's rate-limited backlog: tasks of a key with a
// rate limit, submitted at once and run by two consumers. A task refused
// by the rate is set aside and released when its window opens, so it is
// received about once while it waits (on arrival) and once to start;
// hidden until the next window instead, as before, it came back once a
// window until it started.
type RateBacklog struct {
	Tasks     int     `json:"tasks"`
	PerSecond float64 `json:"rate_per_second"`
	// ReceivedPerTask is every message received per task; WaitingPerTask
	// the receives that did not start it (ReceivedPerTask - 1).
	ReceivedPerTask float64 `json:"messages_received_per_task"`
	WaitingPerTask  float64 `json:"receives_while_waiting_per_task"`
	// HiddenEstimate is what hiding would have cost: on average a task
	// waits half the backlog's run, one receive a window.
	HiddenEstimate float64 `json:"hidden_estimate_per_task"`
	SetAside       int64   `json:"set_aside"`
	SpanSeconds    float64 `json:"span_seconds"`
	// MaxSliding is the most starts in any sliding second; the fixed
	// windows allow two windows' worth.
	MaxSliding   int `json:"max_starts_sliding_second"`
	SlidingBound int `json:"sliding_second_bound"`
	Started      int `json:"started"`
}

func measureRateBacklog(ctx context.Context, cl clients, quick bool) (RateBacklog, error) {
	x := RateBacklog{Tasks: 300, PerSecond: 10}
	if quick {
		x.Tasks = 100
	}
	d, err := deploy(ctx, cl, fmt.Sprintf("br%d", time.Now().UnixNano()%1e6))
	if err != nil {
		return x, err
	}
	defer d.teardown(context.WithoutCancel(ctx), cl)
	const key = "partner"
	r := x.PerSecond
	if _, err := d.app.Controls.SetKeyControls(ctx, "", key, nil, &r, nil); err != nil {
		return x, err
	}
	ids, err := submitNoop(ctx, d, x.Tasks, key)
	if err != nil {
		return x, err
	}
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	var done []chan struct{}
	var waits []func() (int64, int64)
	for range 2 {
		c, err := d.consumer(8, 0, newLedger())
		if err != nil {
			return x, err
		}
		ch := make(chan struct{})
		go func() { _ = c.Run(cctx); close(ch) }()
		done = append(done, ch)
		waits = append(waits, func() (int64, int64) { w := c.Waits(); return w.Received, w.SetAside })
	}
	defer func() {
		stop()
		for _, ch := range done {
			<-ch
		}
	}()
	deadline := time.Now().Add(time.Duration(float64(x.Tasks)/x.PerSecond)*time.Second + 3*time.Minute)
	var starts []time.Time
	for {
		ts, err := d.app.Store.GetMany(ctx, ids)
		if err != nil {
			return x, err
		}
		starts = starts[:0]
		finished := 0
		for _, t := range ts {
			if t.Status == triagetype.Completed {
				finished++
			}
			if t.StartedAt != nil {
				starts = append(starts, *t.StartedAt)
			}
		}
		if finished == len(ids) {
			break
		}
		if time.Now().After(deadline) {
			return x, fmt.Errorf("rate-limited backlog: %d of %d completed", finished, len(ids))
		}
		time.Sleep(500 * time.Millisecond)
	}
	var received int64
	for _, w := range waits {
		rc, sa := w()
		received += rc
		x.SetAside += sa
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i].Before(starts[j]) })
	x.Started = len(starts)
	x.SpanSeconds = round(starts[len(starts)-1].Sub(starts[0]).Seconds(), 1)
	x.MaxSliding = slidingMax(starts, time.Second)
	x.SlidingBound = 2 * int(x.PerSecond)
	x.ReceivedPerTask = round(float64(received)/float64(x.Tasks), 2)
	x.WaitingPerTask = round(x.ReceivedPerTask-1, 2)
	x.HiddenEstimate = round(float64(x.Tasks)/x.PerSecond/2, 1)
	return x, nil
}

// slidingMax is the most of the sorted times ts in any window [t, t+w).
func slidingMax(ts []time.Time, w time.Duration) int {
	best, j := 0, 0
	for i := range ts {
		for ts[i].Sub(ts[j]) >= w {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}

func (x RateBacklog) rows(tw *table) {
	tw.row(fmt.Sprintf("rate-limited backlog: %d tasks of a key at %.0f/s, 2 consumers: receives a task while waiting", x.Tasks, x.PerSecond),
		fmt.Sprintf("%.2f (%.2f messages received a task, %d set aside; hidden until the next window: ~%.0f)", x.WaitingPerTask, x.ReceivedPerTask, x.SetAside, x.HiddenEstimate), "~1")
	tw.row("  most starts in a sliding second", fmt.Sprintf("%d (%d started over %.1f s)", x.MaxSliding, x.Started, x.SpanSeconds), fmt.Sprintf("<= %d (2 windows)", x.SlidingBound))
	if x.SpanSeconds > 0 {
		// The starts after the first span SpanSeconds: the rate the scope
		// achieved, which lapsed reservations and a slow store lower.
		tw.row("  starts a second achieved", fmt.Sprintf("%.1f (%.0f %% of the rate)", float64(x.Started-1)/x.SpanSeconds, 100*float64(x.Started-1)/x.SpanSeconds/x.PerSecond), fmt.Sprintf(">= %.0f (80 %%)", 0.8*x.PerSecond))
	}
}
