package task

import (
	"errors"
	"testing"

	"github.com/triagehq/triage/triagetype"
)

func TestCheckTransition(t *testing.T) {
	tests := []struct {
		from, to triagetype.Status
		ok       bool
	}{
		{triagetype.Scheduled, triagetype.Queued, true},
		{triagetype.Scheduled, triagetype.Cancelled, true},
		{triagetype.Scheduled, triagetype.Executing, false},
		{triagetype.Queued, triagetype.Executing, true},
		{triagetype.Queued, triagetype.Queued, true}, // promotion
		{triagetype.Queued, triagetype.Completed, false},
		{triagetype.Queued, triagetype.DeadLetter, true}, // redriven by SQS
		{triagetype.Retrying, triagetype.DeadLetter, true},
		{triagetype.Executing, triagetype.Completed, true},
		{triagetype.Executing, triagetype.Retrying, true},
		{triagetype.Executing, triagetype.DeadLetter, true},
		{triagetype.Executing, triagetype.Queued, true}, // lease expired, reclaimed
		{triagetype.Retrying, triagetype.Executing, true},
		{triagetype.Retrying, triagetype.Cancelled, true},
		{triagetype.Retrying, triagetype.Completed, false},
		{triagetype.Completed, triagetype.Queued, false},
		{triagetype.Cancelled, triagetype.Queued, false},
		{triagetype.DeadLetter, triagetype.Queued, true}, // retried by hand
		{triagetype.DeadLetter, triagetype.Executing, false},
		{triagetype.Waiting, triagetype.Executing, true}, // claimed from its release message
		{triagetype.Waiting, triagetype.Completed, false},
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
	for _, s := range triagetype.Statuses() {
		if s.Terminal() && s.Claimable() {
			t.Errorf("%s is both terminal and claimable", s)
		}
		if s.Terminal() {
			for _, to := range triagetype.Statuses() {
				if to != triagetype.Queued && CanTransition(s, to) {
					t.Errorf("terminal %s may move to %s", s, to)
				}
			}
		}
	}
}

func TestParse(t *testing.T) {
	if _, err := triagetype.ParsePriority("urgent"); err == nil {
		t.Error("ParsePriority(urgent) succeeded")
	}
	if p, err := triagetype.ParsePriority("low"); err != nil || p != triagetype.Low {
		t.Errorf("ParsePriority(low) = %v, %v", p, err)
	}
	if p, ok := triagetype.Low.Next(); !ok || p != triagetype.Medium {
		t.Errorf("Low.Next = %v %v", p, ok)
	}
	if _, ok := triagetype.High.Next(); ok {
		t.Error("High.Next reported a higher priority")
	}
	if _, err := triagetype.ParseStatus("done"); err == nil {
		t.Error("ParseStatus(done) succeeded")
	}
}

func TestAddAttemptCaps(t *testing.T) {
	var tk Task
	for i := 1; i <= MaxHistory+5; i++ {
		tk.AddAttempt(triagetype.Attempt{Attempt: i})
	}
	if len(tk.History) != MaxHistory || tk.History[0].Attempt != 6 {
		t.Fatalf("history len %d first %d", len(tk.History), tk.History[0].Attempt)
	}
}
