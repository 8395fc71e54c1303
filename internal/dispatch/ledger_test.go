package dispatch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/handler/ledger"
)

// newLedger returns a handler-side ledger around work (nil: succeed at once).
func newLedger(work func(ctx context.Context, r handler.Request) (json.RawMessage, error)) *ledger.Ledger {
	if work == nil {
		return ledger.New(nil)
	}
	return ledger.New(handler.Func(work))
}

// waitEnds waits until n runs have ended.
func waitEnds(t *testing.T, l *ledger.Ledger, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if len(l.Ends()) >= n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("after %v only %d of %d runs ended", timeout, len(l.Ends()), n)
}

// checkOnce fails unless every id ran exactly once and no run overlapped another of its task.
func checkOnce(t *testing.T, l *ledger.Ledger, ids []string) {
	t.Helper()
	if o := l.Overlaps(); len(o) > 0 {
		t.Errorf("%d tasks ran twice at the same time, e.g. %s", len(o), o[0])
	}
	runs := l.Runs()
	var wrong []string
	for _, id := range ids {
		if runs[id] != 1 {
			wrong = append(wrong, fmt.Sprintf("%s ran %d times", id, runs[id]))
		}
	}
	if len(wrong) > 0 {
		t.Errorf("%d tasks did not run exactly once: %v", len(wrong), wrong[:min(5, len(wrong))])
	}
}
