package store

import (
	"testing"

	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// FirstFinish picks out the one record of a member that counts: the write
// that set batch_counted with a terminal status.
func TestFirstFinish(t *testing.T) {
	member := func(st triagetype.Status, counted bool) *task.Task {
		return &task.Task{ID: "m", BatchID: "b", BatchShard: 7, Status: st, BatchCounted: counted}
	}
	plain := &task.Task{ID: "p", Status: triagetype.Completed, BatchCounted: true}
	for _, c := range []struct {
		name     string
		old, new *task.Task
		outcome  string // "" for a record that does not count
	}{
		{"completed", member(triagetype.Executing, false), member(triagetype.Completed, true), "completed"},
		{"dead-lettered", member(triagetype.Executing, false), member(triagetype.DeadLetter, true), "dead_lettered"},
		{"cancelled", member(triagetype.Queued, false), member(triagetype.Cancelled, true), "cancelled"},
		{"inserted finished", nil, member(triagetype.Cancelled, true), "cancelled"},
		{"a retry's finish", member(triagetype.Executing, true), member(triagetype.Completed, true), ""},
		{"a write after the finish", member(triagetype.DeadLetter, true), member(triagetype.DeadLetter, true), ""},
		{"a claim", member(triagetype.Queued, false), member(triagetype.Executing, false), ""},
		{"removed", member(triagetype.Completed, true), nil, ""},
		{"not a member", nil, plain, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			ref, outcome, ok := FirstFinish(c.old, c.new)
			if ok != (c.outcome != "") || outcome != c.outcome {
				t.Fatalf("FirstFinish = %v, %q, %v; want %q", ref, outcome, ok, c.outcome)
			}
			if ok && (ref != ShardRef{Batch: "b", Shard: 7} || ref.PK() != "BATCH#b#7") {
				t.Fatalf("shard %+v (%s), want b's shard 7", ref, ref.PK())
			}
		})
	}
}
