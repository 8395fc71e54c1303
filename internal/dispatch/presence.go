package dispatch

import (
	"context"

	"github.com/triagehq/triage/internal/workers"
	"github.com/triagehq/triage/triagetype"
)

// announce starts this consumer's entry in the worker registry
// (Options.Workers): registered now, heartbeated with its busy slots until
// the returned beacon stops. Without a registry it returns nil, whose
// methods do nothing.
func (c *Consumer) announce(ctx context.Context) *workers.Beacon {
	if c.opt.Workers == nil {
		return nil
	}
	kind := c.opt.Kind
	if kind == "" {
		kind = triagetype.WorkerKindWorker
	}
	self := workers.Instance{ID: c.opt.WorkerID, Kind: kind, Capacity: c.opt.Concurrency, Every: c.opt.WorkerHeartbeat, Types: c.handledTypes(), Running: c.keyUse.running}
	return workers.Start(ctx, c.opt.Workers, self, c.busy, c.log)
}

// busy is how many of the consumer's slots run a task now.
func (c *Consumer) busy() int {
	gen, res, _ := c.slots.free()
	return c.opt.Concurrency - gen - res
}
