package durable

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

func TestChildKey(t *testing.T) {
	for _, c := range []struct {
		key          string
		parent, step string
		ok           bool
	}{
		{ChildKey("01PARENT", "charge:eu"), "01PARENT", "charge:eu", true},
		{"triage.child:01PARENT", "", "", false},
		{"triage.child::step", "", "", false},
		{"order-42", "", "", false},
	} {
		p, s, ok := ParseChildKey(c.key)
		if p != c.parent || s != c.step || ok != c.ok {
			t.Errorf("ParseChildKey(%q) = %q, %q, %v; want %q, %q, %v", c.key, p, s, ok, c.parent, c.step, c.ok)
		}
	}
}

func TestOutcomeOf(t *testing.T) {
	big := json.RawMessage(`"` + strings.Repeat("x", task.MaxSignalBytes) + `"`)
	for _, c := range []struct {
		name string
		t    task.Task
		want ChildOutcome
	}{
		{"completed", task.Task{ID: "c1", Status: triagetype.Completed, Result: json.RawMessage(`49`)}, ChildOutcome{ID: "c1", Status: triagetype.Completed, Result: json.RawMessage(`49`), ResultSize: 2}},
		{"large result left on the child", task.Task{ID: "c2", Status: triagetype.Completed, Result: big}, ChildOutcome{ID: "c2", Status: triagetype.Completed, ResultSize: len(big)}},
		{"dead letter", task.Task{ID: "c3", Status: triagetype.DeadLetter, Error: &triagetype.TaskError{Message: "negative"}}, ChildOutcome{ID: "c3", Status: triagetype.DeadLetter, Error: "negative"}},
	} {
		got := OutcomeOf(&c.t)
		if got.ID != c.want.ID || got.Status != c.want.Status || string(got.Result) != string(c.want.Result) || got.ResultSize != c.want.ResultSize || got.Error != c.want.Error {
			t.Errorf("%s: %+v; want %+v", c.name, got, c.want)
		}
		if b, _ := json.Marshal(got); task.CheckSignalPayload(b) != nil {
			t.Errorf("%s: outcome of %d bytes is not a valid signal payload", c.name, len(b))
		}
	}
}

// The notifier signals a child's parent and wakes it only when it waits
// for that child.
func TestNotifierFinished(t *testing.T) {
	for _, c := range []struct {
		name    string
		child   task.Task
		parent  task.Task
		signals int
		wakes   int
	}{
		{"waiting parent", task.Task{ID: "c", Status: triagetype.Completed, IdempotencyKey: ChildKey("p", "sq")},
			task.Task{ID: "p", Status: triagetype.Retrying, Suspend: &task.Suspend{Kind: task.StepWait, Signal: "child:sq"}}, 1, 1},
		{"running parent", task.Task{ID: "c", Status: triagetype.DeadLetter, IdempotencyKey: ChildKey("p", "sq")},
			task.Task{ID: "p", Status: triagetype.Executing}, 1, 0},
		{"parent waits for another", task.Task{ID: "c", Status: triagetype.Cancelled, IdempotencyKey: ChildKey("p", "sq")},
			task.Task{ID: "p", Status: triagetype.Retrying, Suspend: &task.Suspend{Kind: task.StepWait, Signal: "approval"}}, 1, 0},
		{"not a child", task.Task{ID: "c", Status: triagetype.Completed, IdempotencyKey: "order-1"}, task.Task{}, 0, 0},
		{"not finished", task.Task{ID: "c", Status: triagetype.Executing, IdempotencyKey: ChildKey("p", "sq")}, task.Task{}, 0, 0},
	} {
		var signals, wakes int
		n := Notifier{
			Signal: func(_ context.Context, id string, sg task.Signal) (*task.Task, error) {
				signals++
				if id != "p" || sg.Name != "child:sq" || task.CheckSignalPayload(sg.Payload) != nil {
					t.Errorf("%s: signal %s %+v", c.name, id, sg)
				}
				p := c.parent
				return &p, nil
			},
			Redispatch: func(_ context.Context, cur *task.Task, to triagetype.Status, _ triagetype.Priority, delay time.Duration, _ func(*task.Task)) (*task.Task, error) {
				wakes++
				if cur.ID != "p" || to != triagetype.Queued || delay != 0 {
					t.Errorf("%s: wake %s to %s after %v", c.name, cur.ID, to, delay)
				}
				return cur, nil
			},
		}
		if err := n.Finished(context.Background(), &c.child); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		if signals != c.signals || wakes != c.wakes {
			t.Errorf("%s: %d signals, %d wakes; want %d, %d", c.name, signals, wakes, c.signals, c.wakes)
		}
	}
}

// A parent whose child's signal never came (its hook lost to a crash)
// reads the child every ChildRecheck: it waits again while the child
// runs, and consumes the outcome it reads once the child finished.
func TestChildRecheck(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	j := &memJournal{recs: map[int]task.Step{}}
	sp := &fakeSpawner{}
	attempt := func() (json.RawMessage, error) {
		st := New(j.steps(), nil, 1, j, clock)
		st.SetSpawner(sp)
		return st.Child(ctx, "sq", task.Request{Type: "square"})
	}
	_, err := attempt()
	if se, ok := SuspendOf(err); !ok || !se.WakeAt.Equal(now.Add(ChildRecheck)) || sp.reads != 0 {
		t.Fatalf("first: %v, %d reads; want a wait until the recheck and no read", err, sp.reads)
	}
	now = now.Add(ChildRecheck)
	_, err = attempt()
	if se, ok := SuspendOf(err); !ok || !se.WakeAt.Equal(now.Add(ChildRecheck)) || sp.reads != 1 {
		t.Fatalf("recheck, child running: %v, %d reads; want one read and a wait until the next recheck", err, sp.reads)
	}
	now = now.Add(time.Hour) // woken early: waits on, reads nothing
	if _, err = attempt(); err == nil || sp.reads != 1 {
		t.Fatalf("early: %v, %d reads", err, sp.reads)
	}
	now = now.Add(ChildRecheck)
	sp.done = &ChildOutcome{ID: "c-sq", Status: triagetype.Completed, Result: json.RawMessage(`49`)}
	res, err := attempt()
	if err != nil || string(res) != "49" || sp.reads != 2 || len(sp.spawned) != 1 {
		t.Fatalf("recheck, child done: %s, %v, %d reads, spawned %v", res, err, sp.reads, sp.spawned)
	}
	if res, err = attempt(); err != nil || string(res) != "49" || sp.reads != 2 {
		t.Fatalf("replay: %s, %v, %d reads; want the recorded outcome, no read", res, err, sp.reads)
	}
}
