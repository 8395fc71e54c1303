package dispatch

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/triagehq/triage/internal/task"
)

// reporter keeps what an in-process handler reports during one attempt
// until the heartbeat writes it. It never writes itself: a report only
// replaces the pending one (latest wins) and pokes the heartbeat, which
// folds it into its next lease renewal. That is what bounds the writes a
// task's progress can cause, however often its handler reports: see
// Consumer.heartbeat.
type reporter struct {
	attempt int
	now     func() time.Time
	wake    chan struct{} // capacity 1: one poke stands for any number

	mu         sync.Mutex
	progress   *task.Progress
	checkpoint json.RawMessage
	gen        uint64 // bumped by every report
	written    uint64 // the gen the last successful write carried
}

func newReporter(attempt int, now func() time.Time) *reporter {
	return &reporter{attempt: attempt, now: now, wake: make(chan struct{}, 1)}
}

// Progress records a progress report (the handler.Reporter method).
func (r *reporter) Progress(_ context.Context, percent int, message string) error {
	if fe := task.CheckProgress(percent, message); fe != nil {
		return fe
	}
	r.mu.Lock()
	r.progress = &task.Progress{Percent: percent, Message: message, Attempt: r.attempt, UpdatedAt: r.now().UTC()}
	r.gen++
	r.mu.Unlock()
	r.poke()
	return nil
}

// Checkpoint records a checkpoint (the handler.Reporter method).
func (r *reporter) Checkpoint(_ context.Context, data json.RawMessage) error {
	if fe := task.CheckCheckpoint(data); fe != nil {
		return fe
	}
	r.mu.Lock()
	r.checkpoint = append(json.RawMessage(nil), data...)
	r.gen++
	r.mu.Unlock()
	r.poke()
	return nil
}

func (r *reporter) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// pending reports whether there is a report no write has carried yet.
func (r *reporter) pending() bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gen != r.written
}

// apply copies the latest reports onto the next state of the task, and
// returns the generation it carried, for done. A nil reporter (a job
// without a running handler) applies nothing.
func (r *reporter) apply(n *task.Task) uint64 {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.progress != nil {
		p := *r.progress
		n.Progress = &p
	}
	if r.checkpoint != nil {
		n.Checkpoint = append(json.RawMessage(nil), r.checkpoint...)
	}
	return r.gen
}

// done records that a write carrying generation gen succeeded.
func (r *reporter) done(gen uint64) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.written = max(r.written, gen)
	r.mu.Unlock()
}
