package counters_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/counters"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Claims (queued or retrying -> executing) add their wait to the minute's
// histogram of the task's original priority; nothing else does, and a
// redelivered batch counts once. /stats's percentiles come from them.
func TestWaitPercentilesFromClaims(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	now := time.Now().UTC()
	seq := 1000
	var changes []counters.Change
	claim := func(p, eff triagetype.Priority, from triagetype.Status, wait time.Duration, edit func(old *task.Task)) {
		started := now
		enq := started.Add(-wait)
		old := &task.Task{ID: task.NewID(now), Type: "echo", Priority: p, EffectivePriority: eff, Status: from, CreatedAt: enq.Add(-time.Hour), EnqueuedAt: &enq, WaitingSince: enq, Version: 1}
		if edit != nil {
			edit(old)
		}
		n := old.Clone()
		n.Status, n.StartedAt, n.Version, n.Attempts = triagetype.Executing, &started, 2, old.Attempts+1
		seq++
		changes = append(changes, counters.Change{Seq: strconv.Itoa(seq), Old: old, New: n})
	}
	for range 98 {
		claim(triagetype.High, triagetype.High, triagetype.Queued, 10*time.Millisecond, nil)
	}
	claim(triagetype.High, triagetype.High, triagetype.Queued, 10*time.Second, nil)
	// A retry waits from its retry_at, not from when it was first queued.
	claim(triagetype.High, triagetype.High, triagetype.Retrying, 10*time.Second, func(old *task.Task) {
		due := now.Add(-10 * time.Second)
		old.RetryAt = &due
		enq := now.Add(-time.Hour)
		old.EnqueuedAt = &enq
	})
	// A promoted low task counts under low, its original priority.
	claim(triagetype.Low, triagetype.High, triagetype.Queued, 3*time.Minute, nil)
	// Not claims: a completion, a removal, a lease reclaim.
	done := changes[0].New.Clone()
	done.Status, done.Version = triagetype.Completed, 3
	seq++
	changes = append(changes, counters.Change{Seq: strconv.Itoa(seq), Old: changes[0].New, New: done})
	seq++
	changes = append(changes, counters.Change{Seq: strconv.Itoa(seq), Old: done})
	again := changes[1].New.Clone()
	again.Version = 3
	seq++
	changes = append(changes, counters.Change{Seq: strconv.Itoa(seq), Old: changes[1].New, New: again})

	guard := func(first, _ string) counters.Guard { return counters.Guard{Key: "test:" + first} }
	for range 2 { // the second delivery is skipped by its guard
		if err := a.Counters.Apply(context.Background(), changes, guard); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := a.Counters.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	high := snap.Waits[triagetype.High]
	// 98 waits of 10 ms are in the (8, 16] ms bucket; the 99th and 100th
	// waited 10 s, in (8.192, 16.384] s.
	if high.Count != 100 || high.P50 != 16*time.Millisecond || high.P99 != 16384*time.Millisecond {
		t.Fatalf("high waits %+v, want 100 claims, p50 16ms, p99 16.384s", high)
	}
	if low := snap.Waits[triagetype.Low]; low.Count != 1 || low.P50 != 262144*time.Millisecond {
		t.Fatalf("low waits %+v, want the one promoted claim of 3 min (bucket up to 262.144 s)", low)
	}
	if _, ok := snap.Waits[triagetype.Medium]; ok {
		t.Fatalf("medium waits %+v, want none", snap.Waits[triagetype.Medium])
	}
}

// The promoter's depth samples come back per minute from History, and a
// minute without a sample has none.
func TestDepthHistory(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	now := time.Now().UTC()
	ctx := context.Background()
	if err := a.Counters.RecordDepth(ctx, now.Add(-2*time.Minute), map[triagetype.Priority]counters.Depth{triagetype.Low: {Visible: 7}}); err != nil {
		t.Fatal(err)
	}
	// Two samples in one minute: the last wins.
	for i, n := range []int{5, 3} {
		depths := map[triagetype.Priority]counters.Depth{triagetype.High: {Visible: n, InFlight: 1}, triagetype.Medium: {}, triagetype.Low: {Visible: 12 + i}}
		if err := a.Counters.RecordDepth(ctx, now, depths); err != nil {
			t.Fatal(err)
		}
	}
	ms, err := a.Counters.History(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	// Found by start, not position: the minute may turn during the test.
	at := map[time.Time]counters.Minute{}
	for _, m := range ms {
		at[m.Start] = m
	}
	this := now.Truncate(time.Minute)
	last, twoAgo, oneAgo := at[this], at[this.Add(-2*time.Minute)], at[this.Add(-time.Minute)]
	if last.Depth[triagetype.High] != (counters.Depth{Visible: 3, InFlight: 1}) || last.Depth[triagetype.Low].Visible != 13 || len(last.Depth) != 3 {
		t.Fatalf("this minute's depths %+v, want high 3 (1 in flight), medium 0, low 13", last.Depth)
	}
	if twoAgo.Depth[triagetype.Low].Visible != 7 || oneAgo.Depth != nil {
		t.Fatalf("depths two minutes ago %+v and one minute ago %+v, want low 7 and no sample", twoAgo.Depth, oneAgo.Depth)
	}
}
