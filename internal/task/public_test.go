package task

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/triagehq/triage/triagetype"
)

// jsonFields lists the JSON names of a struct type's encoded fields.
func jsonFields(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		out = append(out, name+" "+f.Type.String())
	}
	slices.Sort(out)
	return out
}

// TestPublicFields keeps the API's task object and the record in step: a
// field added to one with a JSON name must be added to the other (and to
// Public), or this fails.
func TestPublicFields(t *testing.T) {
	rec, pub := jsonFields(reflect.TypeFor[Task]()), jsonFields(reflect.TypeFor[triagetype.Task]())
	if !slices.Equal(rec, pub) {
		t.Fatalf("task.Task encodes\n  %v\ntriagetype.Task encodes\n  %v", rec, pub)
	}
}

// TestPublicMatchesJSON fills every field and checks that Public encodes
// to exactly the record's JSON, and that it copies rather than shares.
func TestPublicMatchesJSON(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	later := at.Add(time.Minute)
	tk := &Task{
		ID: NewID(at), Type: "echo", Key: "tenant-1", Held: "type#echo", Payload: json.RawMessage(`{"x":1}`), Priority: triagetype.Low, EffectivePriority: triagetype.Medium,
		Status: triagetype.Retrying, Attempts: 2, MaxAttempts: 5, TimeoutSeconds: 30, RunAt: &at, CreatedAt: at,
		EnqueuedAt: &at, StartedAt: &later, CompletedAt: &later, Result: json.RawMessage(`[1]`),
		Error: NewError("boom", true), IdempotencyKey: "k", TraceID: "tr",
		History:         []triagetype.Attempt{{Attempt: 1, WorkerID: "w", StartedAt: at, FinishedAt: later, Error: "boom"}},
		CancelRequested: true, RetryAt: &later, PayloadSize: 5000, ResultSize: 6000, PayloadRef: "t/00/x/payload", ResultRef: "t/00/x/result-3",
		Version: 7, DispatchVersion: 3, WaitingSince: at, LeaseUntil: &later, WorkerID: "w", Tracked: true, ExpiresAt: 9,
		Progress: &Progress{Percent: 40, Message: "rows", Attempt: 2, UpdatedAt: later}, Checkpoint: json.RawMessage(`{"row":4}`),
		ProgressToken: "secret", ReportedAt: &later, Schedule: "nightly",
		Promotions: []triagetype.Promotion{{From: triagetype.Low, To: triagetype.Medium, At: later, WaitedMS: 60000}},
		After:      []string{"p"}, OnParentFailure: "run", WaitingOn: []string{"p"}, WorkflowID: "w", Node: "n", BatchID: "b",
		HasChildren: true, BatchCounted: true,
		Steps:   []Step{{Seq: 0, Name: "charge", Kind: StepRun, Type: "int", Result: json.RawMessage(`1`), ResultSize: 1, Attempt: 1, At: at, DurationMS: 5}},
		Signals: []Signal{{Name: "approval", Payload: json.RawMessage(`true`), At: later}},
		Suspend: &Suspend{Kind: StepWait, Signal: "approval", WakeAt: later},
	}
	want, err := json.Marshal(tk)
	if err != nil {
		t.Fatal(err)
	}
	pub := tk.Public()
	got, err := json.Marshal(pub)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("Public encodes\n  %s\nthe record\n  %s", got, want)
	}
	// Every field is set, so an omitted one would show as a missing key.
	var keys map[string]any
	_ = json.Unmarshal(got, &keys)
	if n := len(jsonFields(reflect.TypeFor[triagetype.Task]())); len(keys) != n {
		t.Errorf("encoded %d keys, want all %d", len(keys), n)
	}
	if strings.Contains(string(got), "secret") {
		t.Error("Public shows the progress token")
	}
	pub.Payload[0], pub.Error.Message, pub.History[0].WorkerID = '[', "changed", "changed"
	*pub.RunAt = later
	pub.Progress.Percent, pub.Checkpoint[0], pub.Promotions[0].To = 99, '[', triagetype.High
	if string(tk.Payload) != `{"x":1}` || tk.Error.Message != "boom" || tk.History[0].WorkerID != "w" || !tk.RunAt.Equal(at) ||
		tk.Progress.Percent != 40 || string(tk.Checkpoint) != `{"row":4}` || tk.Promotions[0].To != triagetype.Medium {
		t.Error("Public shares memory with the record")
	}
}
