package store

import (
	"encoding/json"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// names lists the attribute names of map attribute av, sorted.
func names(t *testing.T, av types.AttributeValue) []string {
	t.Helper()
	m, ok := av.(*types.AttributeValueMemberM)
	if !ok {
		t.Fatalf("attribute is %T, want a map", av)
	}
	var ns []string
	for k := range m.Value {
		ns = append(ns, k)
	}
	sort.Strings(ns)
	return ns
}

// The parts of a task whose types are triagetype's keep the item names
// the table has always had, and every field comes back.
func TestTaskItemNames(t *testing.T) {
	at := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	tk := &task.Task{
		ID: "01J", Type: "echo", Status: triagetype.DeadLetter, Priority: triagetype.Low, EffectivePriority: triagetype.Medium,
		Payload:    json.RawMessage(`{"a":1}`),
		Error:      &triagetype.TaskError{Message: "boom", Retriable: true},
		History:    []triagetype.Attempt{{Attempt: 1, WorkerID: "w1", StartedAt: at, FinishedAt: at.Add(time.Second), Error: "boom"}, {Attempt: 2, WorkerID: "w2", StartedAt: at, FinishedAt: at}},
		Progress:   &triagetype.Progress{Percent: 40, Message: "half", Attempt: 2, UpdatedAt: at},
		Promotions: []triagetype.Promotion{{From: triagetype.Low, To: triagetype.Medium, At: at, WaitedMS: 60_000}},
		CreatedAt:  at,
	}
	av, err := MarshalTask(tk)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what string
		av   types.AttributeValue
		want []string
	}{
		{"error", av["error"], []string{"message", "retriable"}},
		{"history[0]", av["history"].(*types.AttributeValueMemberL).Value[0], []string{"attempt", "error", "finished_at", "started_at", "worker_id"}},
		{"history[1]", av["history"].(*types.AttributeValueMemberL).Value[1], []string{"attempt", "finished_at", "started_at", "worker_id"}},
		{"progress", av["progress"], []string{"attempt", "message", "percent", "updated_at"}},
		{"promotions[0]", av["promotions"].(*types.AttributeValueMemberL).Value[0], []string{"at", "f", "t", "w"}},
	} {
		if got := names(t, c.av); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s stored as %v, want %v", c.what, got, c.want)
		}
	}
	if _, ok := av["promotions"].(*types.AttributeValueMemberL).Value[0].(*types.AttributeValueMemberM).Value["at"].(*types.AttributeValueMemberN); !ok {
		t.Error("a promotion's at is not a number of Unix seconds")
	}
	p, err := MarshalProgress(*tk.Progress)
	if err != nil || !reflect.DeepEqual(p, av["progress"]) {
		t.Errorf("MarshalProgress = %v, %v; want the record's progress %v", p, err, av["progress"])
	}
	back, err := UnmarshalTask(av)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(back)
	want, _ := json.Marshal(tk)
	if string(got) != string(want) {
		t.Errorf("round trip:\n got %s\nwant %s", got, want)
	}
	bare, err := MarshalTask(&task.Task{ID: "02J"})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"error", "history", "progress", "promotions"} {
		if _, ok := bare[k]; ok {
			t.Errorf("a task without %s stores one", k)
		}
	}
}

// A control item's attributes decode under their stored names; a field
// the item lacks keeps the value it had.
func TestUnmarshalControls(t *testing.T) {
	until := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	item := map[string]types.AttributeValue{
		"key":                   &types.AttributeValueMemberS{Value: "tenant"},
		"paused":                &types.AttributeValueMemberBOOL{Value: true},
		"rate_limit_per_second": &types.AttributeValueMemberN{Value: "2.5"},
		"max_concurrency":       &types.AttributeValueMemberN{Value: "3"},
		"held":                  &types.AttributeValueMemberBOOL{Value: true},
		"wait_until":            &types.AttributeValueMemberS{Value: until.Format(time.RFC3339Nano)},
		"weight":                &types.AttributeValueMemberN{Value: "4"},
	}
	s := triagetype.ControlSettings{Type: "echo"}
	if err := UnmarshalControls(item, &s); err != nil {
		t.Fatal(err)
	}
	want := triagetype.ControlSettings{Type: "echo", Key: "tenant", Paused: true, RateLimitPerSecond: 2.5, MaxConcurrency: 3, Held: true, WaitUntil: &until, Weight: 4}
	if s.WaitUntil == nil || !s.WaitUntil.Equal(until) {
		t.Errorf("wait_until decoded as %v, want %v", s.WaitUntil, until)
	}
	s.WaitUntil = want.WaitUntil
	if !reflect.DeepEqual(s, want) {
		t.Errorf("decoded %+v, want %+v", s, want)
	}
}

// A task writes its by-type index attribute only when the store indexes
// types: without it the table's by-type index holds no entry for it, and
// the task's write costs one write unit less.
func TestTypeIndexAttribute(t *testing.T) {
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	tk := &task.Task{ID: "01K", Type: "echo", Status: triagetype.Queued, Priority: triagetype.Low, EffectivePriority: triagetype.Low,
		MaxAttempts: 3, CreatedAt: at, WaitingSince: at, Version: 1}
	for _, tc := range []struct {
		on   bool
		want bool
	}{{false, false}, {true, true}} {
		s := New(nil, "t", WithTypeIndex(tc.on))
		av, err := s.item(tk)
		if err != nil {
			t.Fatal(err)
		}
		_, has := av[spec.AttrTypePK]
		if has != tc.want {
			t.Errorf("type index %v: item has %s: %v, want %v", tc.on, spec.AttrTypePK, has, tc.want)
		}
		if _, ok := av[spec.AttrCreatedPK]; !ok {
			t.Errorf("type index %v: item has no %s", tc.on, spec.AttrCreatedPK)
		}
	}
}
