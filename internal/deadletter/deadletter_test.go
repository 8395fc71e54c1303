package deadletter

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// fakeDLQ is an in-memory dead-letter queue per priority: received
// messages are hidden until released or deleted.
type fakeDLQ struct {
	msgs   map[triagetype.Priority][]queue.Received
	hidden map[string]bool
	seq    int
	// onCount, if set, runs before each DLQCount (another reader handing
	// back what it held).
	onCount func()
}

func (q *fakeDLQ) put(p triagetype.Priority, body string) {
	q.seq++
	id := fmt.Sprint(q.seq)
	q.msgs[p] = append(q.msgs[p], queue.Received{Priority: p, MessageID: id, ReceiptHandle: id, Body: body, Reason: "failed"})
}

func (q *fakeDLQ) ReceiveDLQ(_ context.Context, p triagetype.Priority, n int, _, _ time.Duration) ([]queue.Received, error) {
	var out []queue.Received
	for _, m := range q.msgs[p] {
		if len(out) < n && !q.hidden[m.ReceiptHandle] {
			q.hidden[m.ReceiptHandle] = true
			out = append(out, m)
		}
	}
	return out, nil
}

func (q *fakeDLQ) DeleteDLQ(_ context.Context, p triagetype.Priority, receipt string) error {
	delete(q.hidden, receipt)
	kept := q.msgs[p][:0]
	for _, m := range q.msgs[p] {
		if m.ReceiptHandle != receipt {
			kept = append(kept, m)
		}
	}
	q.msgs[p] = kept
	return nil
}

func (q *fakeDLQ) ChangeVisibilityDLQ(_ context.Context, _ triagetype.Priority, receipt string, _ time.Duration) error {
	delete(q.hidden, receipt)
	return nil
}

func (q *fakeDLQ) DLQCount(_ context.Context, p triagetype.Priority) (int, error) {
	if q.onCount != nil {
		q.onCount()
	}
	return len(q.msgs[p]), nil
}

// instantFailure retries a task, and the task fails again at once: it is
// dead-lettered anew and a fresh copy lands in the DLQ, while the replay
// that retried it is still reading.
type instantFailure struct {
	tasks   map[string]*task.Task
	dlq     *fakeDLQ
	retries map[string]int
}

func (f *instantFailure) Get(_ context.Context, id string) (*task.Task, error) {
	t, ok := f.tasks[id]
	if !ok {
		return nil, store.ErrNotFound
	}
	return t.Clone(), nil
}

func (f *instantFailure) GetMany(ctx context.Context, ids []string) ([]*task.Task, error) {
	var out []*task.Task
	for _, id := range ids {
		if t, err := f.Get(ctx, id); err == nil {
			out = append(out, t)
		}
	}
	return out, nil
}

func (f *instantFailure) Delete(_ context.Context, cur *task.Task) error {
	delete(f.tasks, cur.ID)
	return nil
}

func (f *instantFailure) Retry(_ context.Context, _ func(context.Context, string) (*task.Task, error), id string) (*task.Task, error) {
	f.retries[id]++
	t := f.tasks[id]
	t.Version += 2
	t.DispatchVersion = t.Version - 1
	body, _ := json.Marshal(task.Message{ID: id, Version: t.Version, Priority: t.Priority})
	f.dlq.put(t.Priority, string(body))
	return t, nil
}

func TestReplayTouchesEachTaskOnce(t *testing.T) {
	dlq := &fakeDLQ{msgs: map[triagetype.Priority][]queue.Received{}, hidden: map[string]bool{}}
	f := &instantFailure{tasks: map[string]*task.Task{}, dlq: dlq, retries: map[string]int{}}
	for i := range 4 {
		id := fmt.Sprintf("t%d", i)
		f.tasks[id] = &task.Task{ID: id, Type: "fail", Priority: triagetype.High, Status: triagetype.DeadLetter, Version: 5, DispatchVersion: 4}
		body, _ := json.Marshal(task.Message{ID: id, Version: 5, Priority: triagetype.High})
		dlq.put(triagetype.High, string(body))
	}
	d := New(dlq, f, f)
	res, err := d.Replay(context.Background(), ReplayFilter{Priorities: []triagetype.Priority{triagetype.High}, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if res.Replayed != 4 {
		t.Fatalf("replayed %d, want 4 (each task once)", res.Replayed)
	}
	for id, n := range f.retries {
		if n != 1 {
			t.Errorf("task %s retried %d times in one replay", id, n)
		}
	}
	if got := len(dlq.msgs[triagetype.High]); got != 4 {
		t.Fatalf("DLQ holds %d messages; want the 4 fresh failures left for the next replay", got)
	}
	if len(dlq.hidden) != 0 {
		t.Fatalf("%d messages were not handed back", len(dlq.hidden))
	}
}

// SQS hands DLQ messages out in no particular order; a listing is sorted
// by priority, then send time, then message id, so it reads the same way
// every time.
func TestListIsOrderedBySendTime(t *testing.T) {
	q := &fakeDLQ{msgs: map[triagetype.Priority][]queue.Received{}, hidden: map[string]bool{}}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, off := range []int{30, 10, 20, 10} { // out of order, with a tie
		q.msgs[triagetype.Low] = append(q.msgs[triagetype.Low], queue.Received{Priority: triagetype.Low, MessageID: fmt.Sprint("m", 9-i), ReceiptHandle: fmt.Sprint(i), Body: "x", SentAt: base.Add(time.Duration(off) * time.Second)})
	}
	q.msgs[triagetype.High] = append(q.msgs[triagetype.High], queue.Received{Priority: triagetype.High, MessageID: "h", ReceiptHandle: "h", Body: "x", SentAt: base.Add(time.Hour)})
	got, err := New(q, &instantFailure{tasks: map[string]*task.Task{}}, nil).List(context.Background(), triagetype.Priorities(), 10)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range got {
		ids = append(ids, m.MessageID)
	}
	if want := []string{"h", "m6", "m8", "m7", "m9"}; !slices.Equal(ids, want) {
		t.Fatalf("order %v, want %v", ids, want)
	}
}

// TestStaleCopies is the rule that keeps one DLQ message per dead task:
// only a task's own copy (dead_letter, at the version of its record) is
// replayed; every other message naming the task is deleted without
// re-queueing it, and a message SQS redrove that the promoter has yet to
// reconcile is left alone.
func TestStaleCopies(t *testing.T) {
	const id = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
	tests := []struct {
		name     string
		task     *task.Task // nil: the task is gone
		msgV     int64
		replayed int
		kept     int
	}{
		{"own copy", &task.Task{ID: id, Status: triagetype.DeadLetter, Version: 7, DispatchVersion: 6}, 7, 1, 0},
		{"copy of an earlier death", &task.Task{ID: id, Status: triagetype.DeadLetter, Version: 9, DispatchVersion: 8}, 7, 0, 0},
		{"retried by hand, running again", &task.Task{ID: id, Status: triagetype.Executing, Version: 8, DispatchVersion: 8}, 7, 0, 0},
		{"retried by hand, completed", &task.Task{ID: id, Status: triagetype.Completed, Version: 10, DispatchVersion: 8}, 7, 0, 0},
		{"task deleted", nil, 7, 0, 0},
		{"redriven, not yet reconciled", &task.Task{ID: id, Status: triagetype.Queued, Version: 7, DispatchVersion: 7}, 7, 0, 1},
		{"poison body", nil, -1, 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dlq := &fakeDLQ{msgs: map[triagetype.Priority][]queue.Received{}, hidden: map[string]bool{}}
			f := &instantFailure{tasks: map[string]*task.Task{}, dlq: dlq, retries: map[string]int{}}
			if tc.task != nil {
				tc.task.Type, tc.task.Priority = "fail", triagetype.Low
				f.tasks[id] = tc.task
			}
			body, _ := json.Marshal(task.Message{ID: id, Version: tc.msgV, Priority: triagetype.Low})
			if tc.msgV < 0 {
				body = []byte("not a task message")
			}
			dlq.put(triagetype.Low, string(body))
			res, err := New(dlq, f, f).Replay(context.Background(), Filter{Priorities: triagetype.Priorities(), Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			if res.Replayed != tc.replayed || f.retries[id] != tc.replayed {
				t.Errorf("replayed %d (retries %d), want %d", res.Replayed, f.retries[id], tc.replayed)
			}
			// A replayed task that fails again adds its new copy; count the
			// original message only.
			kept := 0
			for _, m := range dlq.msgs[triagetype.Low] {
				if m.MessageID == "1" {
					kept++
				}
			}
			if kept != tc.kept {
				t.Errorf("the message is kept %d times, want %d", kept, tc.kept)
			}
		})
	}
}

// TestRetryRemovesItsCopy: a retry by hand deletes the task's copy, found
// in the DLQ of the priority it died at, and leaves other tasks' messages
// and a copy of a failure newer than the retry alone.
func TestRetryRemovesItsCopy(t *testing.T) {
	const id, other = "01ARZ3NDEKTSV4RRFFQ69G5FAV", "01ARZ3NDEKTSV4RRFFQ69G5FAW"
	dlq := &fakeDLQ{msgs: map[triagetype.Priority][]queue.Received{}, hidden: map[string]bool{}}
	f := &instantFailure{tasks: map[string]*task.Task{}, dlq: dlq, retries: map[string]int{}}
	f.tasks[id] = &task.Task{ID: id, Type: "fail", Priority: triagetype.Low, EffectivePriority: triagetype.Medium, Status: triagetype.DeadLetter, Version: 5}
	f.tasks[other] = &task.Task{ID: other, Type: "fail", Priority: triagetype.Medium, EffectivePriority: triagetype.Medium, Status: triagetype.DeadLetter, Version: 3}
	for _, m := range []task.Message{{ID: other, Version: 3}, {ID: id, Version: 5}} {
		body, _ := json.Marshal(m)
		dlq.put(triagetype.Medium, string(body))
	}
	got, err := New(dlq, f, f).Retry(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	// The fake fails the retried task again at once: its new copy (v7)
	// stays, the old one (v5) is gone, the other task's is untouched.
	var left []string
	for _, p := range triagetype.Priorities() {
		for _, m := range dlq.msgs[p] {
			left = append(left, fmt.Sprint(p, " ", m.Body))
		}
	}
	want := []string{
		`medium {"id":"01ARZ3NDEKTSV4RRFFQ69G5FAW","v":3,"p":""}`,
		`low {"id":"01ARZ3NDEKTSV4RRFFQ69G5FAV","v":7,"p":"low"}`,
	}
	slices.Sort(left)
	slices.Sort(want)
	if !slices.Equal(left, want) {
		t.Errorf("DLQ after the retry: %q, want %q", left, want)
	}
	if got.Version != 7 || len(dlq.hidden) != 0 {
		t.Errorf("retried task v%d, %d messages not handed back", got.Version, len(dlq.hidden))
	}
	if _, err := New(dlq, f, f).Retry(context.Background(), other+"X"); err == nil {
		t.Error("retry of a missing task succeeded")
	}
}

// TestRescanOnlyWhatWasOutOfSight: a replay, a purge or a retry's search
// for its copy looks again only when a DLQ holds messages it could not
// see (held by another reader during its pass), and then finds them; with
// nothing out of sight it makes one pass (it used to pay 2 s of rescans
// every time).
func TestRescanOnlyWhatWasOutOfSight(t *testing.T) {
	const id = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
	tests := []struct {
		name    string
		held    int // of the 3 dead tasks' copies, held by another reader during the first pass
		op      string
		acted   int
		rescans int64
	}{
		{"replay, nothing held", 0, "replay", 3, 0},
		{"replay, two held then handed back", 2, "replay", 3, 1},
		{"purge, nothing held", 0, "purge", 3, 0},
		{"purge, one held then handed back", 1, "purge", 3, 1},
		{"retry whose copy is gone", 0, "retry gone", 1, 0},
		{"retry whose copy was held", 3, "retry", 1, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dlq := &fakeDLQ{msgs: map[triagetype.Priority][]queue.Received{}, hidden: map[string]bool{}}
			f := &instantFailure{tasks: map[string]*task.Task{}, dlq: dlq, retries: map[string]int{}}
			for i := range 3 {
				tid := id[:25] + fmt.Sprint(i)
				f.tasks[tid] = &task.Task{ID: tid, Type: "fail", Priority: triagetype.Medium, EffectivePriority: triagetype.Medium, Status: triagetype.DeadLetter, Version: 5}
				if tc.op == "retry gone" && i == 0 {
					continue
				}
				body, _ := json.Marshal(task.Message{ID: tid, Version: 5})
				dlq.put(triagetype.Medium, string(body))
			}
			for _, m := range dlq.msgs[triagetype.Medium][:tc.held] {
				dlq.hidden[m.ReceiptHandle] = true
			}
			dlq.onCount = func() { // the other reader hands back after the first pass
				for _, m := range dlq.msgs[triagetype.Medium][:min(tc.held, len(dlq.msgs[triagetype.Medium]))] {
					delete(dlq.hidden, m.ReceiptHandle)
				}
				dlq.onCount = nil
			}
			d := New(dlq, f, f)
			all := Filter{Priorities: triagetype.Priorities(), Limit: 10}
			acted := 0
			switch tc.op {
			case "replay":
				r, err := d.Replay(context.Background(), all)
				if err != nil {
					t.Fatal(err)
				}
				acted = r.Replayed
			case "purge":
				r, err := d.Purge(context.Background(), all)
				if err != nil {
					t.Fatal(err)
				}
				acted = r.Purged
			default:
				if _, err := d.Retry(context.Background(), id[:25]+"0"); err != nil {
					t.Fatal(err)
				}
				acted = f.retries[id[:25]+"0"]
			}
			if acted != tc.acted || d.rescans.Load() != tc.rescans {
				t.Errorf("acted on %d, rescans %d; want %d and %d", acted, d.rescans.Load(), tc.acted, tc.rescans)
			}
			// A retry's copy (v5) is gone; the fake's instant failure adds a v7.
			for _, m := range dlq.msgs[triagetype.Medium] {
				if tid, v := taskIDOf(m); tid == id[:25]+"0" && v == 5 {
					t.Errorf("the retried task's copy is still there")
				}
			}
		})
	}
}
