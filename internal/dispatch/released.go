package dispatch

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// This file claims waiting tasks from their release messages: when a
// child's last parent completes, internal/flow sends the child's message
// naming that parent (task.Message.ReleasedBy) and writes nothing, and the
// claim moves the child from waiting to executing in its one write. What
// the release write used to establish, the claim checks first: the parent
// completed (a strongly consistent read, remembered) and is all the child
// still waits on (the child as read; the claim's write is conditional on
// that read's version). A message that fails the check (a parent that
// did not complete, a forged or outdated message) is dropped as stale, and
// the child stays waiting for its parents, or for the flow sweep.

// completedParents remembers the parents a consumer saw completed. A task
// never leaves completed, so one read per parent and consumer serves all
// its children: a fan-out of 1,000 reads its parent's key once per
// consumer, not 1,000 times.
type completedParents struct {
	mu   sync.Mutex
	seen map[string]struct{}
}

// completedParentsMax bounds the memory: the set starts over when full.
const completedParentsMax = 4096

func (p *completedParents) has(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.seen[id]
	return ok
}

func (p *completedParents) add(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.seen == nil || len(p.seen) >= completedParentsMax {
		p.seen = make(map[string]struct{})
	}
	p.seen[id] = struct{}{}
}

// released reports whether msg releases waiting task t: it names the one
// parent t still waits on, and that parent completed.
func (c *Consumer) released(ctx context.Context, msg task.Message, t *task.Task) (bool, error) {
	id := msg.ReleasedBy
	if id == "" || len(t.WaitingOn) != 1 || t.WaitingOn[0] != id {
		return false, nil
	}
	if c.parents.has(id) {
		return true, nil
	}
	parent, err := c.store.Get(ctx, id) // strongly consistent
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if parent.Status != triagetype.Completed {
		return false, nil
	}
	c.parents.add(id)
	return true, nil
}

// releaseInPlace moves released task t from waiting to queued, keeping its
// dispatch version so the message in hand stays its live message: the
// release write, made only when the task must be queued to go on (a
// control sets it aside).
func (c *Consumer) releaseInPlace(ctx context.Context, m queue.Received, t *task.Task) (*task.Task, error) {
	at := releasedAt(m, t)
	return c.store.Transition(ctx, t, triagetype.Queued, func(n *task.Task) {
		n.WaitingOn, n.EnqueuedAt = nil, &at
	})
}

// releasedAt is when task t, released by message m, began its queue wait:
// the message's first send (t's last write when SQS did not say).
func releasedAt(m queue.Received, t *task.Task) time.Time {
	if at := m.Origin(); !at.IsZero() {
		return at
	}
	return t.WaitingSince
}
