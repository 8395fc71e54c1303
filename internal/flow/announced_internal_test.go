package flow

import (
	"testing"
	"time"

	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// clock is a Store whose only method in use is Now.
type clock struct {
	Store
	now time.Time
}

func (c clock) Now() time.Time { return c.now }

func TestAnnounced(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	f := New(clock{now: now}, nil, Options{ReleaseGrace: 2 * time.Minute})
	ago := func(d time.Duration) *time.Time { at := now.Add(-d); return &at }
	parent := func(st triagetype.Status, done *time.Time) *task.Task {
		return &task.Task{ID: "P", Status: st, CompletedAt: done}
	}
	tests := []struct {
		name  string
		child *task.Task
		p     *task.Task
		want  bool
	}{
		{"completed just now, its only parent", &task.Task{WaitingOn: []string{"P"}}, parent(triagetype.Completed, ago(time.Second)), true},
		{"completed past the grace", &task.Task{WaitingOn: []string{"P"}}, parent(triagetype.Completed, ago(3*time.Minute)), false},
		{"another parent left", &task.Task{WaitingOn: []string{"P", "Q"}}, parent(triagetype.Completed, ago(time.Second)), false},
		{"parent dead-lettered: no message was sent", &task.Task{WaitingOn: []string{"P"}}, parent(triagetype.DeadLetter, ago(time.Second)), false},
		{"delayed by run_at within the grace", &task.Task{WaitingOn: []string{"P"}, RunAt: ago(time.Minute)}, parent(triagetype.Completed, ago(10*time.Minute)), true},
		{"run_at past the grace", &task.Task{WaitingOn: []string{"P"}, RunAt: ago(5 * time.Minute)}, parent(triagetype.Completed, ago(10*time.Minute)), false},
	}
	for _, tt := range tests {
		if got := f.announced(tt.child, tt.p); got != tt.want {
			t.Errorf("%s: announced = %v, want %v", tt.name, got, tt.want)
		}
	}
}
