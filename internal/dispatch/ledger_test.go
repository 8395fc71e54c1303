package dispatch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/task"
)

// ledger is a handler-side record of every execution: it counts runs per
// task and notices two runs of one task at the same time.
type ledger struct {
	mu      sync.Mutex
	runs    map[string]int
	running map[string]int
	overlap []string
	starts  []event
	ends    []event
	maxConc int
	conc    int
	work    func(ctx context.Context, r handler.Request) (json.RawMessage, error)
}

type event struct {
	id       string
	priority task.Priority
	at       time.Time
	worker   string
}

func newLedger() *ledger {
	return &ledger{runs: map[string]int{}, running: map[string]int{}}
}

func (l *ledger) Handle(ctx context.Context, r handler.Request) (json.RawMessage, error) {
	l.mu.Lock()
	l.runs[r.ID]++
	l.running[r.ID]++
	if l.running[r.ID] > 1 {
		l.overlap = append(l.overlap, r.ID)
	}
	l.conc++
	l.maxConc = max(l.maxConc, l.conc)
	l.starts = append(l.starts, event{id: r.ID, priority: r.Priority, at: time.Now()})
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.running[r.ID]--
		l.conc--
		l.ends = append(l.ends, event{id: r.ID, priority: r.Priority, at: time.Now()})
		l.mu.Unlock()
	}()
	if l.work != nil {
		return l.work(ctx, r)
	}
	return json.RawMessage(`{"ok":true}`), nil
}

// waitRuns waits until n distinct tasks have finished at least once.
func (l *ledger) waitEnds(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		l.mu.Lock()
		got := len(l.ends)
		l.mu.Unlock()
		if got >= n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	t.Fatalf("after %v only %d of %d runs ended", timeout, len(l.ends), n)
}

// checkOnce fails unless every id ran exactly once and none overlapped.
func (l *ledger) checkOnce(t *testing.T, ids []string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.overlap) > 0 {
		t.Errorf("%d tasks ran twice at the same time, e.g. %s", len(l.overlap), l.overlap[0])
	}
	var wrong []string
	for _, id := range ids {
		if l.runs[id] != 1 {
			wrong = append(wrong, fmt.Sprintf("%s ran %d times", id, l.runs[id]))
		}
	}
	if len(wrong) > 0 {
		t.Errorf("%d tasks did not run exactly once: %v", len(wrong), wrong[:min(5, len(wrong))])
	}
}
