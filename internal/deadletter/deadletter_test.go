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
)

// fakeDLQ is an in-memory dead-letter queue per priority: received
// messages are hidden until released or deleted.
type fakeDLQ struct {
	msgs   map[task.Priority][]queue.Received
	hidden map[string]bool
	seq    int
}

func (q *fakeDLQ) put(p task.Priority, body string) {
	q.seq++
	id := fmt.Sprint(q.seq)
	q.msgs[p] = append(q.msgs[p], queue.Received{Priority: p, MessageID: id, ReceiptHandle: id, Body: body, Reason: "failed"})
}

func (q *fakeDLQ) ReceiveDLQ(_ context.Context, p task.Priority, n int, _, _ time.Duration) ([]queue.Received, error) {
	var out []queue.Received
	for _, m := range q.msgs[p] {
		if len(out) < n && !q.hidden[m.ReceiptHandle] {
			q.hidden[m.ReceiptHandle] = true
			out = append(out, m)
		}
	}
	return out, nil
}

func (q *fakeDLQ) DeleteDLQ(_ context.Context, p task.Priority, receipt string) error {
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

func (q *fakeDLQ) ChangeVisibilityDLQ(_ context.Context, _ task.Priority, receipt string, _ time.Duration) error {
	delete(q.hidden, receipt)
	return nil
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
	dlq := &fakeDLQ{msgs: map[task.Priority][]queue.Received{}, hidden: map[string]bool{}}
	f := &instantFailure{tasks: map[string]*task.Task{}, dlq: dlq, retries: map[string]int{}}
	for i := range 4 {
		id := fmt.Sprintf("t%d", i)
		f.tasks[id] = &task.Task{ID: id, Type: "fail", Priority: task.High, Status: task.DeadLetter, Version: 5, DispatchVersion: 4}
		body, _ := json.Marshal(task.Message{ID: id, Version: 5, Priority: task.High})
		dlq.put(task.High, string(body))
	}
	d := New(dlq, f, f)
	res, err := d.Replay(context.Background(), ReplayFilter{Priorities: []task.Priority{task.High}, Limit: 100})
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
	if got := len(dlq.msgs[task.High]); got != 4 {
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
	q := &fakeDLQ{msgs: map[task.Priority][]queue.Received{}, hidden: map[string]bool{}}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, off := range []int{30, 10, 20, 10} { // out of order, with a tie
		q.msgs[task.Low] = append(q.msgs[task.Low], queue.Received{Priority: task.Low, MessageID: fmt.Sprint("m", 9-i), ReceiptHandle: fmt.Sprint(i), Body: "x", SentAt: base.Add(time.Duration(off) * time.Second)})
	}
	q.msgs[task.High] = append(q.msgs[task.High], queue.Received{Priority: task.High, MessageID: "h", ReceiptHandle: "h", Body: "x", SentAt: base.Add(time.Hour)})
	got, err := New(q, &instantFailure{tasks: map[string]*task.Task{}}, nil).List(context.Background(), task.Priorities(), 10)
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
