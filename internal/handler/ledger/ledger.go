// Package ledger wraps a handler and records every execution, so tests and
// benchmarks can prove the dispatcher's promise from the handler's side:
// every task ran, none ran twice, and none ran twice at the same time.
package ledger

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/triagetype"
)

// Event is one start or end of a run.
type Event struct {
	ID       string
	Priority triagetype.Priority
	At       time.Time
}

// Ledger is a handler that records each run of the handler it wraps.
type Ledger struct {
	inner handler.Handler

	mu      sync.Mutex
	runs    map[string]int
	running map[string]int
	overlap []string
	starts  []Event
	ends    []Event
	conc    int
	maxConc int
}

// New returns a ledger around inner; a nil inner succeeds with {"ok":true}.
func New(inner handler.Handler) *Ledger {
	return &Ledger{inner: inner, runs: map[string]int{}, running: map[string]int{}}
}

// SetInner replaces the wrapped handler (before any run).
func (l *Ledger) SetInner(h handler.Handler) { l.inner = h }

// Handle records the run around the wrapped handler.
func (l *Ledger) Handle(ctx context.Context, r handler.Request) (json.RawMessage, error) {
	l.mu.Lock()
	l.runs[r.ID]++
	l.running[r.ID]++
	if l.running[r.ID] > 1 {
		l.overlap = append(l.overlap, r.ID)
	}
	l.conc++
	l.maxConc = max(l.maxConc, l.conc)
	l.starts = append(l.starts, Event{ID: r.ID, Priority: r.Priority, At: time.Now()})
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.running[r.ID]--
		l.conc--
		l.ends = append(l.ends, Event{ID: r.ID, Priority: r.Priority, At: time.Now()})
		l.mu.Unlock()
	}()
	if l.inner == nil {
		return json.RawMessage(`{"ok":true}`), nil
	}
	return l.inner.Handle(ctx, r)
}

// Runs returns how many times each task ran.
func (l *Ledger) Runs() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]int, len(l.runs))
	for k, v := range l.runs {
		out[k] = v
	}
	return out
}

// Overlaps lists the tasks that started while a run of theirs was under way.
func (l *Ledger) Overlaps() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.overlap...)
}

// Starts returns the run starts in order.
func (l *Ledger) Starts() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Event(nil), l.starts...)
}

// Ends returns the run ends in order.
func (l *Ledger) Ends() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Event(nil), l.ends...)
}

// MaxConcurrent is the most runs under way at once.
func (l *Ledger) MaxConcurrent() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.maxConc
}
