package task

import (
	"errors"
	"testing"
)

func TestCheckTransition(t *testing.T) {
	tests := []struct {
		from, to Status
		ok       bool
	}{
		{Scheduled, Queued, true},
		{Scheduled, Cancelled, true},
		{Scheduled, Executing, false},
		{Queued, Executing, true},
		{Queued, Queued, true}, // promotion
		{Queued, Completed, false},
		{Queued, DeadLetter, true}, // redriven by SQS
		{Retrying, DeadLetter, true},
		{Executing, Completed, true},
		{Executing, Retrying, true},
		{Executing, DeadLetter, true},
		{Executing, Queued, true}, // lease expired, reclaimed
		{Retrying, Executing, true},
		{Retrying, Cancelled, true},
		{Retrying, Completed, false},
		{Completed, Queued, false},
		{Cancelled, Queued, false},
		{DeadLetter, Queued, true}, // retried by hand
		{DeadLetter, Executing, false},
	}
	for _, tt := range tests {
		err := CheckTransition(tt.from, tt.to)
		if (err == nil) != tt.ok {
			t.Errorf("%s -> %s: err = %v, want ok=%v", tt.from, tt.to, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidTransition) {
			t.Errorf("%s -> %s: error %v does not match ErrInvalidTransition", tt.from, tt.to, err)
		}
	}
}

func TestTerminalAndClaimable(t *testing.T) {
	for _, s := range Statuses() {
		if s.Terminal() && s.Claimable() {
			t.Errorf("%s is both terminal and claimable", s)
		}
		if s.Terminal() {
			for _, to := range Statuses() {
				if to != Queued && CanTransition(s, to) {
					t.Errorf("terminal %s may move to %s", s, to)
				}
			}
		}
	}
}

func TestParse(t *testing.T) {
	if _, err := ParsePriority("urgent"); err == nil {
		t.Error("ParsePriority(urgent) succeeded")
	}
	if p, err := ParsePriority("low"); err != nil || p != Low {
		t.Errorf("ParsePriority(low) = %v, %v", p, err)
	}
	if p, ok := Low.Next(); !ok || p != Medium {
		t.Errorf("Low.Next = %v %v", p, ok)
	}
	if _, ok := High.Next(); ok {
		t.Error("High.Next reported a higher priority")
	}
	if _, err := ParseStatus("done"); err == nil {
		t.Error("ParseStatus(done) succeeded")
	}
}

func TestAddAttemptCaps(t *testing.T) {
	var tk Task
	for i := 1; i <= MaxHistory+5; i++ {
		tk.AddAttempt(Attempt{Attempt: i})
	}
	if len(tk.History) != MaxHistory || tk.History[0].Attempt != 6 {
		t.Fatalf("history len %d first %d", len(tk.History), tk.History[0].Attempt)
	}
}
