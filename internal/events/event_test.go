package events_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/triagehq/triage/internal/counters"
	"github.com/triagehq/triage/internal/events"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
func ptr[T any](v T) *T  { return &v }

// base is a task in status st at version v, its wait begun at second v.
func base(st triagetype.Status, v int64) *task.Task {
	return &task.Task{
		ID: "01JTASK", Type: "email", Priority: triagetype.Low, EffectivePriority: triagetype.Low, Status: st,
		Attempts: 1, MaxAttempts: 3, CreatedAt: t0, WaitingSince: at(int(v)), Version: v, TraceID: "tr-1",
	}
}

func with(t *task.Task, edit func(*task.Task)) *task.Task {
	c := t.Clone()
	edit(c)
	return c
}

func TestDerive(t *testing.T) {
	running := with(base(triagetype.Executing, 3), func(n *task.Task) { n.StartedAt = ptr(at(3)) })
	attempt := triagetype.Attempt{Attempt: 1, StartedAt: at(3), FinishedAt: at(3).Add(1500 * time.Millisecond), Error: "boom"}
	cases := []struct {
		name     string
		old, new *task.Task
		want     *events.Event // nil: no event
	}{
		{
			name: "insert is submitted",
			new:  with(base(triagetype.Queued, 1), func(n *task.Task) { n.Attempts = 0 }),
			want: &events.Event{ID: "01JTASK-1", Type: events.Submitted, Time: at(1), Status: triagetype.Queued, Attempt: 0},
		},
		{
			name: "scheduled insert is submitted too",
			new:  with(base(triagetype.Scheduled, 1), func(n *task.Task) { n.Attempts = 0 }),
			want: &events.Event{ID: "01JTASK-1", Type: events.Submitted, Time: at(1), Status: triagetype.Scheduled, Attempt: 0},
		},
		{
			name: "insert set aside at submit is submitted with its scope",
			new:  with(base(triagetype.Queued, 1), func(n *task.Task) { n.Attempts, n.Held = 0, "fair#high#acme" }),
			want: &events.Event{ID: "01JTASK-1", Type: events.Submitted, Time: at(1), Status: triagetype.Queued, Attempt: 0, Scope: "fair#high#acme"},
		},
		{
			name: "set aside is set_aside with its scope",
			old:  base(triagetype.Queued, 2), new: with(base(triagetype.Queued, 3), func(n *task.Task) { n.Held = "type#mail" }),
			want: &events.Event{ID: "01JTASK-3", Type: events.SetAside, Time: at(3), Status: triagetype.Queued, Scope: "type#mail"},
		},
		{
			name: "release is released from its scope",
			old:  with(base(triagetype.Queued, 3), func(n *task.Task) { n.Held = "key#acme" }), new: with(base(triagetype.Queued, 4), func(n *task.Task) { n.Released = true }),
			want: &events.Event{ID: "01JTASK-4", Type: events.Released, Time: at(4), Status: triagetype.Queued, Scope: "key#acme"},
		},
		{
			name: "claim is started",
			old:  base(triagetype.Queued, 2), new: running,
			want: &events.Event{ID: "01JTASK-3", Type: events.Started, Time: at(3), Status: triagetype.Executing},
		},
		{
			name: "a due retry's claim is started",
			old:  base(triagetype.Retrying, 2), new: running,
			want: &events.Event{ID: "01JTASK-3", Type: events.Started, Time: at(3), Status: triagetype.Executing},
		},
		{
			name: "retriable failure is retrying with error, retry_at and duration",
			old:  running,
			new: with(base(triagetype.Retrying, 4), func(n *task.Task) {
				n.Error, n.RetryAt, n.History = task.NewError("boom", true), ptr(at(10)), []triagetype.Attempt{attempt}
			}),
			want: &events.Event{ID: "01JTASK-4", Type: events.Retrying, Time: at(4), Status: triagetype.Retrying,
				Error: task.NewError("boom", true), RetryAt: ptr(at(10)), DurationMS: ptr(int64(1500))},
		},
		{
			name: "hand-back to queued is retrying, error from the attempt",
			old:  running,
			new: with(base(triagetype.Queued, 4), func(n *task.Task) {
				n.History = []triagetype.Attempt{{Attempt: 1, StartedAt: at(3), FinishedAt: at(5), Error: "lease expired"}}
			}),
			want: &events.Event{ID: "01JTASK-4", Type: events.Retrying, Time: at(4), Status: triagetype.Queued,
				Error: &triagetype.TaskError{Message: "lease expired", Retriable: true}, DurationMS: ptr(int64(2000))},
		},
		{
			name: "success is completed with duration",
			old:  running,
			new: with(base(triagetype.Completed, 5), func(n *task.Task) {
				n.CompletedAt, n.History = ptr(at(5)), []triagetype.Attempt{{Attempt: 1, StartedAt: at(3), FinishedAt: at(5)}}
			}),
			want: &events.Event{ID: "01JTASK-5", Type: events.Completed, Time: at(5), Status: triagetype.Completed, DurationMS: ptr(int64(2000))},
		},
		{
			name: "duration falls back to started_at when the history did not grow",
			old:  with(running, func(n *task.Task) { n.History = []triagetype.Attempt{attempt} }),
			new: with(base(triagetype.Completed, 6), func(n *task.Task) {
				n.StartedAt, n.History = ptr(at(3)), []triagetype.Attempt{attempt}
			}),
			want: &events.Event{ID: "01JTASK-6", Type: events.Completed, Time: at(6), Status: triagetype.Completed, DurationMS: ptr(int64(3000))},
		},
		{
			name: "permanent failure is dead_lettered",
			old:  running,
			new: with(base(triagetype.DeadLetter, 5), func(n *task.Task) {
				n.Error, n.History = task.NewError("bad input", false), []triagetype.Attempt{attempt}
			}),
			want: &events.Event{ID: "01JTASK-5", Type: events.DeadLettered, Time: at(5), Status: triagetype.DeadLetter,
				Error: task.NewError("bad input", false), DurationMS: ptr(int64(1500))},
		},
		{
			name: "a redriven queued message is dead_lettered without a duration",
			old:  base(triagetype.Queued, 2),
			new:  with(base(triagetype.DeadLetter, 3), func(n *task.Task) { n.Error = task.NewError("poison", false) }),
			want: &events.Event{ID: "01JTASK-3", Type: events.DeadLettered, Time: at(3), Status: triagetype.DeadLetter, Error: task.NewError("poison", false)},
		},
		{
			name: "cancel of a queued task",
			old:  base(triagetype.Queued, 2), new: base(triagetype.Cancelled, 3),
			want: &events.Event{ID: "01JTASK-3", Type: events.Cancelled, Time: at(3), Status: triagetype.Cancelled},
		},
		{
			name: "cancel while running carries the duration",
			old:  running,
			new:  with(base(triagetype.Cancelled, 4), func(n *task.Task) { n.History = []triagetype.Attempt{{StartedAt: at(3), FinishedAt: at(4)}} }),
			want: &events.Event{ID: "01JTASK-4", Type: events.Cancelled, Time: at(4), Status: triagetype.Cancelled, DurationMS: ptr(int64(1000))},
		},
		{
			name: "raised effective priority is promoted",
			old:  base(triagetype.Queued, 2),
			new:  with(base(triagetype.Queued, 3), func(n *task.Task) { n.EffectivePriority = triagetype.Medium }),
			want: &events.Event{ID: "01JTASK-3", Type: events.Promoted, Time: at(3), Status: triagetype.Queued, EffectivePriority: triagetype.Medium, PreviousPriority: triagetype.Low},
		},
		{
			name: "operator retry of a dead letter is requeued",
			old:  base(triagetype.DeadLetter, 5), new: base(triagetype.Queued, 6),
			want: &events.Event{ID: "01JTASK-6", Type: events.Requeued, Time: at(6), Status: triagetype.Queued},
		},
		{name: "re-dispatch at the same priority is no event", old: base(triagetype.Queued, 2), new: base(triagetype.Queued, 3)},
		{name: "heartbeat is no event", old: running, new: with(running, func(n *task.Task) { n.Version, n.LeaseUntil = 4, ptr(at(40)) })},
		{name: "cancel request is no event", old: running, new: with(running, func(n *task.Task) { n.Version, n.CancelRequested = 4, true })},
		{name: "release of a scheduled task is no event", old: base(triagetype.Scheduled, 1), new: base(triagetype.Queued, 2)},
		{name: "a parked retry's re-send is no event", old: base(triagetype.Retrying, 4), new: base(triagetype.Queued, 5)},
		{name: "removal is no event", old: base(triagetype.Completed, 5)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := events.Derive(c.old, c.new)
			if c.want == nil {
				if ok {
					t.Fatalf("got event %+v, want none", got)
				}
				return
			}
			if !ok {
				t.Fatal("got no event")
			}
			want := *c.want
			want.TaskID, want.TaskType, want.Priority, want.MaxAttempts, want.TraceID = "01JTASK", "email", triagetype.Low, 3, "tr-1"
			if want.EffectivePriority == "" {
				want.EffectivePriority = triagetype.Low
			}
			if want.Type != events.Submitted {
				want.Attempt = c.new.Attempts
			}
			if !reflect.DeepEqual(got, want) {
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(want)
				t.Fatalf("got  %s\nwant %s", g, w)
			}
		})
	}
}

// The wire shape is snake_case with the fields the issue names; optional
// fields are absent, not null.
func TestEventJSON(t *testing.T) {
	ev, _ := events.Derive(with(base(triagetype.Executing, 3), func(n *task.Task) { n.StartedAt = ptr(at(3)) }),
		with(base(triagetype.Completed, 4), func(n *task.Task) {
			n.History = []triagetype.Attempt{{StartedAt: at(3), FinishedAt: at(3).Add(250 * time.Millisecond)}}
		}))
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"id":"01JTASK-4","type":"task.completed","time":"2026-03-01T12:00:04Z","task_id":"01JTASK","task_type":"email","status":"completed","priority":"low","effective_priority":"low","attempt":1,"max_attempts":3,"duration_ms":250,"trace_id":"tr-1"}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
}

func TestParseType(t *testing.T) {
	for _, typ := range events.Types() {
		if got, err := events.ParseType(string(typ)); err != nil || got != typ {
			t.Fatalf("ParseType(%q) = %q, %v", typ, got, err)
		}
	}
	if _, err := events.ParseType("task.exploded"); err == nil {
		t.Fatal("ParseType accepted an unknown type")
	}
}

func TestFilter(t *testing.T) {
	done := events.Event{Type: events.Completed, TaskID: "a"}
	cases := []struct {
		f    events.Filter
		want bool
	}{
		{events.Filter{}, true},
		{events.Filter{TaskID: "a"}, true},
		{events.Filter{TaskID: "b"}, false},
		{events.Filter{Types: []events.Type{events.Started, events.Completed}}, true},
		{events.Filter{Types: []events.Type{events.Started}}, false},
		{events.Filter{Types: []events.Type{events.Completed}, TaskID: "b"}, false},
	}
	for _, c := range cases {
		if got := c.f.Match(done); got != c.want {
			t.Errorf("%+v.Match = %v, want %v", c.f, got, c.want)
		}
	}
}

// recorder is a Sink that keeps what it got and fails when told to.
type recorder struct {
	got  []events.Event
	fail error
}

func (r *recorder) Publish(_ context.Context, evs []events.Event) error {
	if r.fail != nil {
		return r.fail
	}
	r.got = append(r.got, evs...)
	return nil
}

// Every sink gets the batch's events in order even when another sink
// fails, and the failure is returned so the batch is delivered again.
func TestFanoutTriesEverySink(t *testing.T) {
	bad, good := &recorder{fail: errors.New("down")}, &recorder{}
	f := events.NewFanout(bad, nil, good)
	if f.Len() != 2 {
		t.Fatalf("Len = %d, want 2 (nil sinks skipped)", f.Len())
	}
	q := base(triagetype.Queued, 1)
	changes := []counters.Change{
		{Seq: "1", New: q},
		{Seq: "2", Old: q, New: base(triagetype.Executing, 2)},
		{Seq: "3", Old: base(triagetype.Executing, 2), New: with(base(triagetype.Executing, 3), func(n *task.Task) { n.CancelRequested = true })},
		{Seq: "4", Old: base(triagetype.Executing, 3), New: base(triagetype.Cancelled, 4)},
	}
	err := f.PublishChanges(context.Background(), changes)
	if err == nil || !errors.Is(err, bad.fail) {
		t.Fatalf("error %v, want the failing sink's", err)
	}
	var types []events.Type
	for _, e := range good.got {
		types = append(types, e.Type)
	}
	if want := []events.Type{events.Submitted, events.Started, events.Cancelled}; !reflect.DeepEqual(types, want) {
		t.Fatalf("good sink got %v, want %v", types, want)
	}
}

// A schedule's tick task gives a schedule.ticked event at the tick's time
// besides its task.submitted; other inserts and later changes give none.
func TestDeriveTick(t *testing.T) {
	at := time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC)
	id := ulid.MustNew(ulid.Timestamp(at), ulid.DefaultEntropy()).String()
	tk := &task.Task{ID: id, Type: "cleanup", Status: triagetype.Queued, Schedule: "nightly", CreatedAt: at.Add(40 * time.Second), Version: 1}
	evs := events.FromChanges([]counters.Change{{New: tk}})
	if len(evs) != 2 || evs[0].Type != events.Submitted || evs[1].Type != events.ScheduleTicked {
		t.Fatalf("events %+v, want task.submitted then schedule.ticked", evs)
	}
	if e := evs[1]; e.ID != id+"-tick" || !e.Time.Equal(at) || e.Schedule != "nightly" || e.TaskID != id {
		t.Fatalf("schedule.ticked %+v", e)
	}
	next := tk.Clone()
	next.Status, next.Version = triagetype.Executing, 2
	if _, ok := events.DeriveTick(tk, next); ok {
		t.Fatal("a later change of the tick's task is a tick again")
	}
	plain := tk.Clone()
	plain.Schedule = ""
	if _, ok := events.DeriveTick(nil, plain); ok {
		t.Fatal("a task no schedule made is a tick")
	}
}
