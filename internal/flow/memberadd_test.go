package flow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/flow"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// TestMemberAddCrashSettledBySweep: a request's members are counted on
// their shard before they are written (store.MemberAdd). A request that
// counted 10 members and crashed after writing 6 leaves the batch
// waiting (never completed early: its count is 4 too high); the sweep,
// once the add is stale, reads the members, takes the 4 back, and the
// batch completes with the 106 members that exist, its callback once. A
// request that ran to its end leaves no add behind, and a member written
// past its add's deadline is refused with nothing written.
func TestMemberAddCrashSettledBySweep(t *testing.T) {
	a, h := reportBatch(t)
	ctx := context.Background()
	addMembers(t, a, h.ID, 1, 100) // one request: one add, settled by its writer
	if left := staleAdds(t, a.Store); left != 0 {
		t.Fatalf("%d member adds left after a request that ran to its end, want 0", left)
	}

	// The crashed request: Link counts 10, 6 records are written, then
	// nothing (no Settle). The 6 are cancelled, so they finish.
	var crashed []*task.Task
	for i := range 10 {
		r := task.Request{Type: "member", BatchID: h.ID, Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, 1001+i))}
		crashed = append(crashed, r.NewTask(time.Now().UTC(), 15*time.Minute))
	}
	for i, err := range a.Flow.Link(ctx, crashed) {
		if err != nil {
			t.Fatalf("link member %d: %v", i, err)
		}
	}
	if crashed[0].MemberAdd == "" {
		t.Fatal("a request of 10 members was not counted as one add")
	}
	for _, m := range crashed[:6] {
		if _, created, err := a.Store.Create(ctx, m); err != nil || !created {
			t.Fatalf("create member %s: created %v, %v", m.ID, created, err)
		}
		if _, err := a.Store.Cancel(ctx, m.ID); err != nil {
			t.Fatal(err)
		}
	}
	late := *crashed[6]
	late.MemberWriteBy = time.Now().Add(-time.Second)
	if _, _, err := a.Store.Create(ctx, &late); !errors.Is(err, store.ErrAddExpired) {
		t.Fatalf("a member written past its add's deadline: %v, want ErrAddExpired", err)
	}
	if _, err := a.Store.Get(ctx, late.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the late member's record: %v, want none", err)
	}

	if err := a.Flow.Seal(ctx, h.ID); err != nil {
		t.Fatal(err)
	}
	cb := &callbacks{}
	runBatchConsumer(t, a, cb)
	p := waitDone(t, 106, func() (triagetype.BatchProgress, error) {
		b, err := a.Flow.Batch(ctx, h.ID)
		if err != nil {
			return triagetype.BatchProgress{}, err
		}
		return b.Progress, nil
	})
	if p.Done != 106 || p.Total != 110 {
		t.Fatalf("before the sweep: %+v, want 106 done of 110 counted", p)
	}
	time.Sleep(2 * time.Second) // time for a wrong completion to show
	if b, err := a.Flow.Batch(ctx, h.ID); err != nil || b.State == triagetype.BatchCompleted {
		t.Fatalf("the batch completed with 4 counted members never written: %+v, %v", b, err)
	}

	// The promoter's sweep, with the add already stale.
	sweeper := flow.New(a.Store, a.Enqueuer, flow.Options{AddStale: time.Millisecond})
	if _, err := sweeper.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if left := staleAdds(t, a.Store); left != 0 {
		t.Fatalf("%d member adds left after the sweep, want 0", left)
	}
	b := waitBatch(t, a, h.ID, time.Minute)
	want := triagetype.BatchProgress{Total: 106, Done: 106, Completed: 98, DeadLettered: 2, Cancelled: 6}
	if b.Progress != want {
		t.Fatalf("batch %+v, want %+v", b.Progress, want)
	}
	stacktest.WaitStatus(t, a.Store, b.CallbackID, triagetype.Completed, time.Minute)
	if _, err := sweeper.Sweep(ctx); err != nil { // settles nothing twice
		t.Fatal(err)
	}
	if runs := cb.runs.Load(); runs != 1 {
		t.Fatalf("the callback ran %d times, want 1", runs)
	}
}

// staleAdds counts the member adds not settled, in every shard of the
// batch sweep's index.
func staleAdds(t *testing.T, s *store.Store) int {
	t.Helper()
	n := 0
	for sh := range s.Shards() {
		for mark := ""; ; {
			_, adds, next, err := s.OpenBatches(context.Background(), sh, mark, 100)
			if err != nil {
				t.Fatal(err)
			}
			n += len(adds)
			if mark = next; mark == "" {
				break
			}
		}
	}
	return n
}
