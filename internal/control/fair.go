package control

import (
	"context"
	"sync"
	"time"

	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Fair dispatch within a priority (issue #22 item 2).
//
// Every key keeps at most its window of messages on each priority's queue:
// FairWindow × its weight (default 1) sent in one second by one API
// process. Past that, the process raises the key's fair flag for that
// priority (scope fair#<priority>#<key>) and the key's further submits go
// straight to its held set (no SQS send) while the flag is up, read
// through the cache. Each start of one of the key's tasks at that priority
// releases its next held one, in submit order, so the key keeps about its
// window on the queue; when its held set is empty the flag drops and its
// submits are sent again.
//
// So a flood cannot bury another key's message: on the queue, ahead of a
// newcomer B, there are at most (M × TTL + 1) × FairWindow × w_A of key
// A's messages (M API processes, each sending one window a second before
// the flag it raised is in every cache, TTL the cache's in seconds, plus
// the window the releases keep up). With C slots running tasks of T
// seconds, B starts within about ((M × TTL + 1) × FairWindow × w_A / C + 1) × T
// plus the receive, whatever A's backlog. With several keys flooding, each
// keeps window × weight messages on the queue, and since each start puts
// one of the same key back, starts split by weight.
//
// Cost: nothing for a key within its window; for a flooding key, per task
// one hold index entry (written at creation, in place of the send) and the
// release's write and send; one cached read of the key's fair flag per
// consumer and TTL.

// FairWindow is a key's window of messages per priority, at weight 1.
const FairWindow = 20

// FairScope is the fair scope of key at priority p.
func FairScope(p triagetype.Priority, key string) string { return "fair#" + string(p) + "#" + key }

// fairCounts counts one API process's sends per fair scope in the current
// second, and keeps each key's virtual time (stamp).
type fairCounts struct {
	mu     sync.Mutex
	second int64
	n      map[string]int
	vt     map[string]time.Time // key -> its last task's FairAt, while ahead of now
}

// stamp returns the fair time of key's next task: now, or, while the key
// submits faster than its pace of one task per step, step after its
// previous task's (start-time fair queueing: sorted by it, keys that all
// keep ahead of the clock interleave in proportion to their weights, and
// each key keeps its own submit order). Keys whose time the clock has
// passed are forgotten, so memory holds only keys flooding now.
func (f *fairCounts) stamp(key string, now time.Time, step time.Duration) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.vt == nil {
		f.vt = map[string]time.Time{}
	}
	if len(f.vt) > 1024 {
		for k, at := range f.vt {
			if at.Before(now) {
				delete(f.vt, k)
			}
		}
	}
	at := now
	if last, ok := f.vt[key]; ok && !last.Before(now) {
		at = last.Add(step)
	}
	f.vt[key] = at
	return at
}

func (f *fairCounts) add(scope string, now time.Time) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := now.Unix(); s != f.second || f.n == nil {
		f.second, f.n = s, map[string]int{}
	}
	f.n[scope]++
	return f.n[scope]
}

// weight is key's weight: its keyed settings' (default 1).
func (c *Controls) weight(ctx context.Context, key string) int {
	reg, err := c.cachedKeyed(ctx)
	if err != nil || !reg[KeyScope(key).String()] {
		return 1
	}
	s, err := c.cachedScope(ctx, KeyScope(key))
	if err != nil || s.Weight <= 0 {
		return 1
	}
	return s.Weight
}

// Route says where a new task goes, "" to its queue, or the fair scope to
// hold it in (the key is past its window at its priority, or its held set
// is not empty). It is the submit path's router; errors route to the
// queue (fairness is best effort, a task is never refused for it).
//
// It also stamps t's FairAt (fairCounts.stamp, a step of
// 1/(FairWindow × weight) s), the order of every held set it may join:
// its fair scope here, or a type, key or global scope's when a pause or
// limit sets it aside later. Keyless tasks are stamped as the key
// "default" at weight 1.
func (c *Controls) Route(ctx context.Context, t *task.Task) string {
	if t.Status == triagetype.Queued && t.RunAt == nil {
		w := 1
		if t.Key != "" {
			w = c.weight(ctx, t.FairKey())
		}
		at := c.fair.stamp(t.FairKey(), t.CreatedAt, time.Second/time.Duration(FairWindow*w))
		t.FairAt = &at
	}
	if scope := c.pausedScope(ctx, t); scope != "" {
		return scope
	}
	if t.Status != triagetype.Queued || t.RunAt != nil || t.Key == "" {
		// Keyless tasks share the default key and are never windowed: a
		// single-tenant deployment pays nothing for fairness, and a batch
		// of them is sent at once, as before keys existed.
		return ""
	}
	scope := FairScope(t.EffectivePriority, t.FairKey())
	sc, _ := ParseScope(scope)
	s, err := c.cachedScope(ctx, sc)
	if err != nil {
		return ""
	}
	if s.Held {
		return scope
	}
	if c.fair.add(scope, c.now()) <= FairWindow*c.weight(ctx, t.FairKey()) {
		return ""
	}
	if err := c.MarkHeld(ctx, scope); err != nil {
		return ""
	}
	return scope
}

// pausedScope is the scope a new task is set aside in at submit because
// everything or its type is paused (its type's scope) or its key is (its
// key's scope), or "" when none is, as this process's cache sees it (at most its TTL old). A paused
// backlog so costs no send and no receive, and its tasks wait in fair
// order for the resume, which releases them. A task sent while the pause
// was spreading is set aside by the consumer that receives it (Decide),
// in the same place.
func (c *Controls) pausedScope(ctx context.Context, t *task.Task) string {
	if t.Status != triagetype.Queued || t.RunAt != nil {
		return ""
	}
	global, err := c.cachedGet(ctx, "")
	if err != nil {
		return ""
	}
	scope := TypeScope(t.Type).String()
	if !global.Paused {
		typ, err := c.cachedGet(ctx, t.Type)
		if err != nil {
			return ""
		}
		if !typ.Paused {
			if scope = c.pausedKey(ctx, t); scope == "" {
				return ""
			}
		}
	}
	if err := c.MarkHeld(ctx, scope); err != nil {
		return ""
	}
	return scope
}

// pausedKey is t's key scope when its key (of every type) is paused, as the
// cached registry and settings say; "" otherwise. One key's tasks so wait
// in one held set, not in its fair one too, and its resume releases them
// by its weight.
func (c *Controls) pausedKey(ctx context.Context, t *task.Task) string {
	if t.Key == "" {
		return ""
	}
	sc := KeyScope(t.FairKey())
	reg, err := c.cachedKeyed(ctx)
	if err != nil || !reg[sc.String()] {
		return ""
	}
	s, err := c.cachedScope(ctx, sc)
	if err != nil || !s.Paused {
		return ""
	}
	return sc.String()
}
