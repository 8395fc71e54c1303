package events

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/counters"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

func TestWaitingTaskIsTaskWaiting(t *testing.T) {
	now := time.Now()
	w := &task.Task{ID: "a", Type: "x", Status: triagetype.Waiting, Version: 1, CreatedAt: now, WaitingSince: now, Priority: triagetype.Low, EffectivePriority: triagetype.Low}
	ev, ok := Derive(nil, w)
	if !ok || ev.Type != Waiting {
		t.Fatalf("insert of a waiting task: %+v, %v; want task.waiting", ev, ok)
	}
	q := w.Clone()
	q.Status, q.Version = triagetype.Queued, 2
	if _, ok := Derive(w, q); ok {
		t.Fatal("a release (waiting -> queued) is an event; like a scheduled release, it should not be")
	}
}

func TestCompletionEvents(t *testing.T) {
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	head := func(state string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"pk": s("BATCH#B1"), "batch_id": s("B1"), "kind": s("workflow"), "state": s(state),
			"version": n("3"), "total": n("4"), "completed": n("3"), "dead_lettered": n("1"), "cancelled": n("0"),
			"completed_at": s("2026-11-26T10:00:00Z"), "callback_id": s("")}
	}
	for _, tc := range []struct {
		name     string
		old, new map[string]types.AttributeValue
		want     Type
	}{
		{"completes", head("running"), head("completed"), WorkflowCompleted},
		{"already completed", head("completed"), head("completed"), ""},
		{"still running", head("pending"), head("running"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs := FromChanges(changes(t, tc.old, tc.new))
			if tc.want == "" {
				if len(evs) != 0 {
					t.Fatalf("events %+v, want none", evs)
				}
				return
			}
			if len(evs) != 1 || evs[0].Type != tc.want || evs[0].BatchID != "B1" || evs[0].Counts.DeadLettered != 1 || evs[0].ID != "B1-3" {
				t.Fatalf("events %+v", evs)
			}
		})
	}
}

// changes builds the Change the stream reader makes of one record.
func changes(t *testing.T, old, new map[string]types.AttributeValue) []counters.Change {
	t.Helper()
	c, ok, err := counters.ChangeOf("1", old, new)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return nil
	}
	return []counters.Change{c}
}
