package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestScheduleTickCost runs group 12 on its own, small, on fresh
// emulators: each tick makes one task, and adds exactly the schedule
// item's advance (1 WCU) and its by-due entry's move (2 WCU), computed and
// as DynamoDB Local reports them.
func TestScheduleTickCost(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the emulators")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl, cnt := testStack(t, ctx)
	r, err := measureSchedules(ctx, cl, cnt, 10, 3)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	printSchedules(&out, r)
	t.Log("\n" + out.String())
	if r.Ticks != 30 || r.Tasks != 30 {
		t.Fatalf("%d ticks made %d tasks, want 30 and 30", r.Ticks, r.Tasks)
	}
	if r.ScheduleWrite != 3 || r.ExtraWrite != 3 {
		t.Errorf("schedule write units per tick %.3f (extra %.3f), want 3", r.ScheduleWrite, r.ExtraWrite)
	}
	if r.ScheduleWriteRep != 3 {
		t.Errorf("DynamoDB reports %.3f write units per tick on the schedule item, want 3", r.ScheduleWriteRep)
	}
}
