package triage

import (
	"context"
)

// Workers lists the consumer instances in the worker registry, oldest
// first: every one alive, and those that died in the last few minutes
// (state dead: DeadAfterBeats heartbeat intervals with no heartbeat).
func (c *Client) Workers(ctx context.Context) (*WorkerList, error) { return c.t.Workers(ctx) }
