package store

import (
	"log/slog"
	"testing"

	"github.com/triagehq/triage/triagetype"
)

// A task's ordinary transitions log at Debug, so a worker's default Info
// log is not two lines a task; a dead letter still shows at Info.
func TestTransitionLevel(t *testing.T) {
	for _, tc := range []struct {
		to   triagetype.Status
		want slog.Level
	}{
		{triagetype.Queued, slog.LevelDebug},
		{triagetype.Executing, slog.LevelDebug},
		{triagetype.Completed, slog.LevelDebug},
		{triagetype.Retrying, slog.LevelDebug},
		{triagetype.Cancelled, slog.LevelDebug},
		{triagetype.DeadLetter, slog.LevelInfo},
	} {
		if got := transitionLevel(tc.to); got != tc.want {
			t.Errorf("transition to %s logs at %v, want %v", tc.to, got, tc.want)
		}
	}
}
