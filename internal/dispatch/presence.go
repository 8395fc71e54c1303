package dispatch

import (
	"context"
	"time"

	"github.com/triagehq/triage/internal/workers"
	"github.com/triagehq/triage/triagetype"
)

// eventRegisterAfter is how long an event-started run (RunEvent) runs
// before it registers: far longer than a lone short task's invocation
// (the task, then one round of receives that finds the queues empty), so
// sparse traffic writes nothing to the registry, and a fifth of the heartbeat interval, so an
// invocation that keeps working is listed within 2 s. A consumer whose
// types no listed instance advertises hands their tasks back for
// UnhandledAfter (5 min) before it dead-letters them, far longer.
const eventRegisterAfter = 2 * time.Second

// announce starts this consumer's entry in the worker registry
// (Options.Workers): registered after registerAfter (at once when it is
// zero), heartbeated with its busy slots until the returned beacon stops.
// Without a registry it returns nil, whose methods do nothing.
func (c *Consumer) announce(ctx context.Context, registerAfter time.Duration) *workers.Beacon {
	if c.opt.Workers == nil {
		return nil
	}
	kind := c.opt.Kind
	if kind == "" {
		kind = triagetype.WorkerKindWorker
	}
	self := workers.Instance{ID: c.opt.WorkerID, Kind: kind, Capacity: c.opt.Concurrency, Every: c.opt.WorkerHeartbeat, Types: c.handledTypes(), Running: c.keyUse.running, RegisterAfter: registerAfter}
	return workers.Start(ctx, c.opt.Workers, self, c.busy, c.log)
}

// busy is how many of the consumer's slots run a task now.
func (c *Consumer) busy() int {
	gen, res, _ := c.slots.free()
	return c.opt.Concurrency - gen - res
}
