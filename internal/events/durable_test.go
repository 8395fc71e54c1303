package events

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// A durable sleep or signal wait is task.sleeping; a delivered signal is
// task.signalled, with an ID of its own (its write keeps the version).
func TestDeriveSleepingAndSignalled(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	wake := at.Add(time.Hour)
	running := &task.Task{ID: "T", Type: "saga", Status: triagetype.Executing, Version: 3, Attempts: 1, WaitingSince: at}
	parked := running.Clone()
	parked.Status, parked.Version, parked.Attempts, parked.RetryAt = triagetype.Retrying, 4, 0, &wake
	parked.Suspend = &task.Suspend{Kind: task.StepWait, Signal: "approval", WakeAt: wake}
	ev, ok := Derive(running, parked)
	if !ok || ev.Type != Sleeping || ev.Signal != "approval" || ev.RetryAt == nil || !ev.RetryAt.Equal(wake) {
		t.Fatalf("parked: %+v %v", ev, ok)
	}
	signalled := parked.Clone()
	signalled.Signals = []task.Signal{{Name: "approval", Payload: json.RawMessage(`true`), At: at.Add(time.Minute)}}
	ev, ok = Derive(parked, signalled)
	if !ok || ev.Type != Signalled || ev.Signal != "approval" || ev.ID != "T-4-signal-approval" || !ev.Time.Equal(at.Add(time.Minute)) {
		t.Fatalf("signalled: %+v %v", ev, ok)
	}
	if _, ok := Derive(signalled, signalled.Clone()); ok {
		t.Fatal("an unchanged task is an event")
	}
}
