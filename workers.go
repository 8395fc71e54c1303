package triage

import (
	"context"

	"github.com/triagehq/triage/triagetype"
)

// ListWorkers lists the consumer instances in the worker registry, oldest
// first: every one alive, and those that died in the last few minutes
// (state dead: triagetype.DeadAfterBeats heartbeat intervals with no heartbeat).
func (c *Client) ListWorkers(ctx context.Context) (*triagetype.WorkerList, error) {
	return c.t.ListWorkers(ctx)
}
