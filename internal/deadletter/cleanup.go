package deadletter

import (
	"context"

	"github.com/triagehq/triage/internal/task"
)

// RemoveCopies removes the DLQ copies of dead, dead letters just deleted
// (package cleanup's pages), as Delete does for one: one bounded scan of
// the DLQs for all of them.
func (d *DLQ) RemoveCopies(ctx context.Context, dead []*task.Task) {
	below := make(map[string]int64, len(dead))
	for _, t := range dead {
		below[t.ID] = t.Version + 1 // no version of a deleted task is current
	}
	if len(below) > 0 {
		d.removeCopies(ctx, below, "")
	}
}
