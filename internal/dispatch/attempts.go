package dispatch

import (
	"time"

	"github.com/triagehq/triage/internal/task"
)

// attemptStart is when attempt t.Attempts started, as its history entry
// records it: the claim's time, which the claim also wrote as the task's
// started_at ("when the current or last attempt started"). So the last
// history entry and started_at always agree (and a single attempt's
// history[0].started_at is the task's started_at), however long the
// controls' check and the claim's write took before the handler ran;
// reclaim records a lost attempt's start the same way. ran (when execute
// began) stands in only for a claim that wrote none.
func attemptStart(t *task.Task, ran time.Time) time.Time {
	if t.StartedAt != nil {
		return *t.StartedAt
	}
	return ran
}
