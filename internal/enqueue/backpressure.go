package enqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/triagetype"
)

// ErrOverloaded means a priority's queue is over its depth limit: the new
// task was refused before anything was written, and the submit may be
// repeated after OverloadedError.RetryAfter.
var ErrOverloaded = errors.New("queue over its depth limit")

// OverloadedError is the refusal Backpressure.Check gives.
type OverloadedError struct {
	Priority   triagetype.Priority
	RetryAfter time.Duration
}

func (e *OverloadedError) Error() string {
	return fmt.Sprintf("the %s queue is over its depth limit; retry after %d s", e.Priority, int(e.RetryAfter.Seconds()))
}

// Unwrap lets errors.Is match ErrOverloaded.
func (e *OverloadedError) Unwrap() error { return ErrOverloaded }

// Depths reads a priority's queue depth.
type Depths interface {
	Depth(ctx context.Context, p triagetype.Priority) (queue.Depth, error)
}

// Backpressure refuses new tasks for a priority whose queue holds more
// than its limit of waiting messages (visible and delayed; TRIAGE_MAX_QUEUE_DEPTH
// and TRIAGE_MAX_QUEUE_DEPTH_HIGH), so that a flood of submits slows its
// producers down instead of growing a backlog nobody can drain.
//
// A depth is read at most once a second per priority (one SQS call, not one
// per submit), and a failed read admits the task: backpressure protects the
// queues, it must not make them unavailable. It is safe for concurrent use.
type Backpressure struct {
	depths    Depths
	limit     int
	limitHigh int
	log       *slog.Logger

	mu   sync.Mutex
	read map[triagetype.Priority]depthRead
}

type depthRead struct {
	at time.Time
	n  int
}

// Backpressure's timing: how long a depth read is trusted, and how long a
// refused producer is told to wait.
const (
	DepthCacheTTL   = time.Second
	OverloadBackoff = 5 * time.Second
)

// NewBackpressure returns the check for limit (0 or less: none) and, for
// high-priority tasks, limitHigh (0: limit; less: none). A nil log discards
// the warnings of failed depth reads.
func NewBackpressure(depths Depths, limit, limitHigh int, log *slog.Logger) *Backpressure {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Backpressure{depths: depths, limit: limit, limitHigh: limitHigh, log: log, read: map[triagetype.Priority]depthRead{}}
}

// Check returns an *OverloadedError when priority p's queue is over its
// limit, and nil otherwise.
func (b *Backpressure) Check(ctx context.Context, p triagetype.Priority) error {
	limit := b.limit
	if p == triagetype.High && b.limitHigh != 0 {
		limit = b.limitHigh
	}
	if limit <= 0 || b.depths == nil {
		return nil
	}
	now := time.Now()
	b.mu.Lock()
	r, fresh := b.read[p], now.Sub(b.read[p].at) < DepthCacheTTL
	b.mu.Unlock()
	if !fresh {
		d, err := b.depths.Depth(ctx, p)
		if err != nil {
			b.log.Warn("read queue depth for backpressure failed; admitting", "priority", p, "error", err)
			return nil
		}
		r = depthRead{at: now, n: d.Visible + d.Delayed}
		b.mu.Lock()
		b.read[p] = r
		b.mu.Unlock()
	}
	if r.n < limit {
		return nil
	}
	return &OverloadedError{Priority: p, RetryAfter: OverloadBackoff}
}
