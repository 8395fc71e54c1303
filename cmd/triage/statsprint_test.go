package main

import (
	"io"
	"strings"
	"testing"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/triagetype"
)

// `triage stats` prints each priority's wait p50 and p99 beside its
// oldest age, and "-" in both where no task started in the window (the
// API leaves them out then), as the oldest age shows "-" when none waits.
func TestPrintQueuesWaits(t *testing.T) {
	tests := []struct {
		name string
		q    triagetype.QueueStats
		want string // the priority's row, columns joined by single spaces
	}{
		{"nothing started", triagetype.QueueStats{Depth: 3, DLQDepth: 1}, "high 3 0 0 1 - - -"},
		{"waits under a second", triagetype.QueueStats{Waits: 40, WaitP50Seconds: 0.004, WaitP99Seconds: 0.256}, "high 0 0 0 0 - 4ms 256ms"},
		{"waits over a second", triagetype.QueueStats{Depth: 7, InFlight: 2, Delayed: 1, OldestAgeSeconds: 75.4, Waits: 9, WaitP50Seconds: 2.048, WaitP99Seconds: 131.072},
			"high 7 2 1 0 1m15s 2s 2m11s"},
		{"a p50 without a p99 still shows", triagetype.QueueStats{Waits: 1, WaitP50Seconds: 0.001}, "high 0 0 0 0 - 1ms -"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			c := &cli{out: &out, err: io.Discard}
			if err := c.printQueues(map[triage.Priority]triagetype.QueueStats{"high": tt.q, "low": {}}); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
			if len(lines) != 3 {
				t.Fatalf("printed %d lines, want a header and 2 rows:\n%s", len(lines), out.String())
			}
			if got := strings.Join(strings.Fields(lines[0]), " "); got != "QUEUE DEPTH IN FLIGHT DELAYED DLQ OLDEST WAIT P50 WAIT P99" {
				t.Errorf("header %q", got)
			}
			if got := strings.Join(strings.Fields(lines[1]), " "); got != tt.want {
				t.Errorf("row %q, want %q", got, tt.want)
			}
			if got := strings.Join(strings.Fields(lines[2]), " "); got != "low 0 0 0 0 - - -" {
				t.Errorf("an idle priority's row %q, want every age blank", got)
			}
			// The columns line up: each wait starts where its header does.
			for _, h := range []string{"WAIT P50", "WAIT P99"} {
				col := strings.Index(lines[0], h)
				if col < 0 || len(lines[1]) <= col || lines[1][col] == ' ' || lines[1][col-1] != ' ' {
					t.Errorf("%s column (at %d) does not line up with the row:\n%s", h, col, out.String())
				}
			}
		})
	}
}
