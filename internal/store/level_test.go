package store

import (
	"log/slog"
	"testing"

	"github.com/triagehq/triage/internal/task"
)

// A task's ordinary transitions log at Debug, so a worker's default Info
// log is not two lines a task; a dead letter still shows at Info.
func TestTransitionLevel(t *testing.T) {
	for _, tc := range []struct {
		to   task.Status
		want slog.Level
	}{
		{task.Queued, slog.LevelDebug},
		{task.Executing, slog.LevelDebug},
		{task.Completed, slog.LevelDebug},
		{task.Retrying, slog.LevelDebug},
		{task.Cancelled, slog.LevelDebug},
		{task.DeadLetter, slog.LevelInfo},
	} {
		if got := transitionLevel(tc.to); got != tc.want {
			t.Errorf("transition to %s logs at %v, want %v", tc.to, got, tc.want)
		}
	}
}
