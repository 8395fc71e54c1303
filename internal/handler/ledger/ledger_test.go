package ledger

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/handler"
)

func TestLedgerRecordsRunsAndOverlaps(t *testing.T) {
	release := make(chan struct{})
	l := New(handler.Func(func(ctx context.Context, r handler.Request) (json.RawMessage, error) {
		if r.ID == "slow" {
			<-release
		}
		return nil, nil
	}))
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = l.Handle(context.Background(), handler.Request{ID: "slow"}) }()
	}
	time.Sleep(50 * time.Millisecond)
	_, _ = l.Handle(context.Background(), handler.Request{ID: "fast"})
	close(release)
	wg.Wait()
	if r := l.Runs(); r["slow"] != 2 || r["fast"] != 1 {
		t.Fatalf("runs %v", r)
	}
	if o := l.Overlaps(); len(o) != 1 || o[0] != "slow" {
		t.Fatalf("overlaps %v", o)
	}
	if l.MaxConcurrent() != 3 || len(l.Starts()) != 3 || len(l.Ends()) != 3 {
		t.Fatalf("max %d starts %d ends %d", l.MaxConcurrent(), len(l.Starts()), len(l.Ends()))
	}
}
