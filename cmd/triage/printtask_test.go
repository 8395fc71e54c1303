package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/triagehq/triage"
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
