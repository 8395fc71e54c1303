package dispatch

import (
	"context"
	"sync"

	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/internal/task"
)

// job is one claimed task being run. mu guards cur, which the heartbeat
// replaces as it renews the lease. rep holds what the handler reported
// and no write has carried yet (nil until the handler runs).
type job struct {
	msg queue.Received
	rep *reporter
	mu  sync.Mutex
	cur *task.Task
}

func (j *job) snapshot() *task.Task {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.cur
}

func (j *job) set(t *task.Task) {
	j.mu.Lock()
	j.cur = t
	j.mu.Unlock()
}

// process handles one received message from start to finish.
func (c *Consumer) process(ctx context.Context, m queue.Received) {
	cl, ok := c.claim(ctx, m)
	if !ok {
		return
	}
	defer cl.release()
	c.execute(ctx, &job{msg: m, cur: cl.task})
}
