package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/triagetype"
)

// `triage get` says a cancel is pending only while the task may still run:
// a cancelled (or otherwise finished) task keeps its cancel_requested flag,
// but the line "the handler's context is cancelled at its next heartbeat"
// would be false of it.
func TestPrintTaskCancelLine(t *testing.T) {
	const line = "cancel:    requested"
	tests := []struct {
		status    triage.Status
		requested bool
		want      bool
	}{
		{triage.Status("executing"), true, true},
		{triage.Status("executing"), false, false},
		{triage.Status("cancelled"), true, false},
		{triage.Status("completed"), true, false},
		{triage.Status("dead_letter"), true, false},
	}
	for _, tt := range tests {
		var out strings.Builder
		c := &cli{out: &out, err: io.Discard}
		tk := &triage.Task{ID: "01M89HPEMW3CY8DWPE7ZJ4P2B9", Type: "sleep", Status: tt.status, CancelRequested: tt.requested, CreatedAt: time.Now()}
		if err := c.printTask(tk); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(out.String(), line); got != tt.want {
			t.Errorf("%s, cancel requested %v: cancel line shown %v, want %v:\n%s", tt.status, tt.requested, got, tt.want, out.String())
		}
	}
}

// `triage get` lists a task's durable life as a table, in the order met:
// each step with its outcome, run time and result size (or its error), a
// sleep with its wake time (sleeping while the task sleeps), a consumed
// signal wait with the signal's arrival, then the signals delivered.
func TestPrintTaskDurable(t *testing.T) {
	at := time.Date(2026, 11, 27, 18, 0, 0, 0, time.UTC)
	ts := func(d time.Duration) *time.Time { x := at.Add(d); return &x }
	tk := &triage.Task{ID: "01M89HPEMW3CY8DWPE7ZJ4P2B9", Type: "order", Status: triage.Status("retrying"), CreatedAt: at,
		Steps: []triagetype.Step{
			{Seq: 0, Name: "charge", Kind: triagetype.StepRun, ResultSize: 8, DurationMS: 42, Attempt: 1, At: at},
			{Seq: 1, Name: "reserve", Kind: triagetype.StepRun, Error: "out of stock", DurationMS: 3, Attempt: 1, At: at.Add(time.Second)},
			{Seq: 2, Name: "approval", Kind: triagetype.StepSignal, Signal: "approval", Until: ts(time.Hour), ResultSize: 11, Attempt: 2, At: at.Add(time.Minute)},
			{Seq: 3, Name: "sleep-3", Kind: triagetype.StepSleep, Until: ts(2 * time.Hour), Attempt: 2, At: at.Add(time.Minute)},
		},
		Signals: []triagetype.Signal{{Name: "approval", Payload: []byte(`{"ok":true}`), At: at.Add(30 * time.Second)}},
		Suspend: &triagetype.Suspend{Kind: triagetype.StepSleep, WakeAt: at.Add(2 * time.Hour)},
	}
	var out strings.Builder
	c := &cli{out: &out, err: io.Discard}
	if err := c.printTask(tk); err != nil {
		t.Fatal(err)
	}
	_, got, _ := strings.Cut(out.String(), "steps:\n")
	want := `  1  charge    run    ok         ran 42 ms, result 8 B (attempt 1, 2026-11-27 18:00:00)
  2  reserve   run    error      ran 3 ms: out of stock (attempt 1, 2026-11-27 18:00:01)
  3  approval  wait   signalled  signal approval arrived 2026-11-27 18:00:30, payload 11 B (attempt 2, 2026-11-27 18:01:00)
  4  sleep-3   sleep  sleeping   until 2026-11-27 20:00:00 (attempt 2, 2026-11-27 18:01:00)
signals:
  approval  arrived 2026-11-27 18:00:30  payload 11 B
`
	if got != want {
		t.Errorf("triage get printed\n%s\nwant, after %q,\n%s", out.String(), "steps:", want)
	}
	if !strings.Contains(out.String(), "suspended: sleeping until 2026-11-27 20:00:00\n") {
		t.Errorf("no suspended line:\n%s", out.String())
	}
}
