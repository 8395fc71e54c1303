package dispatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/metrics"
	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/internal/workers"
	"github.com/triagehq/triage/triagetype"
)

// Consumers share their queues: `triage dev`'s consumer and a developer's
// own worker both receive every type's messages, and so do two deployed
// workers built with different handlers. A consumer that has no handler for
// a task's type therefore does not claim it (a claim spends an attempt)
// while another worker may run it: it hands the message back, hidden for a
// short while, and the other worker's next receive takes it. Only when no
// live worker has advertised the type for Options.UnhandledAfter
// (triageconfig.UnhandledAfter), counted from the later of the task's queueing
// and the last heartbeat of a worker that advertised it, is the task
// claimed and dead-lettered, with that reason.
//
// Without a directory of advertised types (Options.Workers is not a
// TypeDirectory), every consumer is taken to be the only one: a type it
// cannot run is dead-lettered at once, as before workers advertised types.

// TypeDirectory says which task types the live workers advertise
// (workers.Registry).
type TypeDirectory interface {
	HandledTypes(ctx context.Context) (map[string]workers.TypeSeen, error)
}

const (
	// handBackLive is how long a message is first hidden when a live
	// worker advertises its type: short, so that worker gets it soon, at
	// one receive and one visibility change per message per period. Each
	// later receive by a consumer without the handler doubles it, up to
	// handBackLiveMax: when receives keep landing on consumers that cannot
	// run the task (say a busy worker beside an idle `triage dev`), those
	// consumers step back and leave the message to the worker that can,
	// instead of winning every race for it.
	handBackLive    = 2 * time.Second
	handBackLiveMax = 8 * time.Second
	// handBackAside is how long, after a message it handed back shows
	// again, `triage dev`'s consumer (Kind dev) leaves that message's queue
	// alone, once the message has come back to a consumer at least once
	// (receive count 2 or more: the worker that runs it lost the race for
	// it already). A queue's receivers are not served fairly (fauxqs serves
	// them first come, first served, and a busy consumer asks far more
	// often than an idle worker's long poll), so without this a busy
	// consumer beside an idle worker could win a handed-back message again
	// and again, and a user's task wait about a minute. Its own tasks on
	// that queue wait at most the hide plus this meanwhile; its other
	// queues are not affected. Workers do not step aside: for them (and
	// for SQS itself, which spreads receives over its servers) the
	// backoff of handBackFor is enough.
	handBackAside = 2 * time.Second
	// handBackWaiting is how long it is hidden while no live worker
	// advertises the type yet: a worker started now sees the first of its
	// tasks within this.
	handBackWaiting = 5 * time.Second
	// typesMaxAge is how long one reading of the registry answers for every
	// message: a registry read is O(workers), and a busy consumer sees many
	// messages a second.
	typesMaxAge = 2 * time.Second
)

// typeDirectoryCache keeps the last reading of the directory. Its zero
// value is ready to use.
type typeDirectoryCache struct {
	mu   sync.Mutex
	at   time.Time
	seen map[string]workers.TypeSeen

	// aside is, per priority, until when this consumer leaves the queue to
	// the workers that run what it handed back (handBackAside).
	aside map[triagetype.Priority]time.Time
}

// stepAside leaves p's queue alone until until (a later time wins).
func (tc *typeDirectoryCache) stepAside(p triagetype.Priority, until time.Time) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if tc.aside == nil {
		tc.aside = map[triagetype.Priority]time.Time{}
	}
	if until.After(tc.aside[p]) {
		tc.aside[p] = until
	}
}

// asideFrom reports whether p's queue is left alone at now.
func (tc *typeDirectoryCache) asideFrom(p triagetype.Priority, now time.Time) bool {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return now.Before(tc.aside[p])
}

// get returns the advertised types, read again once typesMaxAge passed.
func (tc *typeDirectoryCache) get(ctx context.Context, dir TypeDirectory) (map[string]workers.TypeSeen, error) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if tc.seen != nil && time.Since(tc.at) < typesMaxAge {
		return tc.seen, nil
	}
	seen, err := dir.HandledTypes(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the worker registry's task types: %w", err)
	}
	tc.seen, tc.at = seen, time.Now()
	return seen, nil
}

// typeDirectory is the directory this consumer consults, or nil.
func (c *Consumer) typeDirectory() TypeDirectory {
	dir, _ := c.opt.Workers.(TypeDirectory)
	return dir
}

// handledTypes are the task types this consumer runs, as it advertises
// them in the registry (nil when its handlers cannot list them).
func (c *Consumer) handledTypes() []string {
	if l, ok := c.handlers.(interface{ Types() []string }); ok {
		types := l.Types()
		slices.Sort(types)
		return types
	}
	return nil
}

// mayClaim reports whether the consumer should claim t now. It should when
// it has a handler for t's type, or when the type has been without a live
// worker for UnhandledAfter (the claim then dead-letters it, see lookup).
// Otherwise it hands the message back, attempt unspent, and returns false.
func (c *Consumer) mayClaim(ctx context.Context, m queue.Received, msg task.Message, t *task.Task) bool {
	if _, err := c.handlers.Lookup(t.Type); err == nil {
		return true
	}
	dir := c.typeDirectory()
	if dir == nil {
		return true
	}
	seen, err := c.unhandled.get(ctx, dir)
	if err != nil {
		c.log.Warn("no handler here, and the worker registry could not be read; the message will come back", "task_id", t.ID, "type", t.Type, "error", err)
		c.mx.PutOff(metrics.PutOffNoHandler)
		c.putOff(ctx, m, msg, handBackWaiting)
		return false
	}
	s := seen[t.Type]
	if s.Live {
		c.mx.PutOff(metrics.PutOffNoHandler)
		hide := handBackFor(m.ReceiveCount)
		if m.ReceiveCount > 1 && c.opt.Kind == triagetype.WorkerKindDev {
			// It came back: step aside as it shows again (handBackAside).
			c.unhandled.stepAside(m.Priority, time.Now().Add(hide+handBackAside))
		}
		c.log.Debug("no handler here; a live worker advertises the type: handed back", "task_id", t.ID, "type", t.Type)
		c.putOff(ctx, m, msg, hide)
		return false
	}
	since := t.EnqueuedAtOr(t.CreatedAt)
	if s.LastHeartbeat.After(since) {
		since = s.LastHeartbeat
	}
	if wait := c.opt.UnhandledAfter - c.store.Now().Sub(since); wait > 0 {
		c.mx.PutOff(metrics.PutOffNoHandler)
		c.log.Debug("no handler here and no live worker for the type yet: handed back", "task_id", t.ID, "type", t.Type, "dead_letter_in", wait.String())
		c.putOff(ctx, m, msg, min(handBackWaiting, wait))
		return false
	}
	return true
}

// lookup finds t's handler. With none, the error is permanent (the task is
// dead-lettered) and, when the consumer consulted the registry, says that
// no live worker advertised the type for UnhandledAfter.
func (c *Consumer) lookup(typ string) (handler.Handler, error) {
	h, err := c.handlers.Lookup(typ)
	if err == nil {
		return h, nil
	}
	if errors.Is(err, handler.ErrNoHandler) && c.typeDirectory() != nil {
		err = fmt.Errorf("%w; no live worker has advertised the type for %s (TRIAGE_UNHANDLED_AFTER)", err, c.opt.UnhandledAfter)
	}
	return nil, handler.Permanent(err)
}

// handBackFor is how long a consumer without the handler hides a message
// on its receiveCount-th receive while a live worker advertises the type:
// handBackLive, doubled for each earlier receive, at most handBackLiveMax.
func handBackFor(receiveCount int) time.Duration {
	d := handBackLive
	for i := 1; i < receiveCount && d < handBackLiveMax; i++ {
		d *= 2
	}
	return min(d, handBackLiveMax)
}
