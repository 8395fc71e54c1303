package deadletter

import (
	"context"
	"errors"
	"time"

	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Cleaner deletes finished tasks older than a cut, telling deleted about
// each (store.Store.CleanupEach).
type Cleaner interface {
	CleanupEach(ctx context.Context, olderThan time.Time, deleted func(*task.Task)) (int, error)
}

// ErrNoCleanup means the DLQ tools were given a store that cannot clean up.
var ErrNoCleanup = errors.New("deadletter: the store cannot clean up tasks")

// Cleanup deletes the finished tasks that finished before olderThan (the
// API's POST /tasks/cleanup) and then the DLQ copies of the dead-lettered
// ones, found as Delete finds one (a bounded scan: MaxScan messages per
// priority, for all of them at once), so a cleanup leaves the DLQ depth
// equal to the dead tasks still held. A copy the scan does not reach is
// logged and removed by the next replay that reads it, as before.
func (d *DLQ) Cleanup(ctx context.Context, olderThan time.Time) (int, error) {
	c, ok := d.store.(Cleaner)
	if !ok {
		return 0, ErrNoCleanup
	}
	dead := map[string]int64{}
	n, err := c.CleanupEach(ctx, olderThan, func(t *task.Task) {
		if t.Status == triagetype.DeadLetter {
			// No version of a deleted task is current: every copy is stale.
			dead[t.ID] = t.Version + 1
		}
	})
	if len(dead) > 0 {
		d.removeCopies(ctx, dead, "")
	}
	return n, err
}

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
