package execution

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/task"
)

func TestDecide(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name         string
		err          error
		attempt, max int
		want         Kind
		msg          string
		retriable    bool
		snooze       time.Duration
	}{
		{"retriable, attempts left", boom, 1, 3, Retry, "boom", true, 0},
		{"retriable, last attempt", boom, 3, 3, DeadLetter, "boom (attempt 3 of 3, none left)", true, 0},
		{"permanent on the first", handler.Permanent(boom), 1, 3, DeadLetter, "boom", false, 0},
		{"cancel", handler.Cancel(boom), 3, 3, Cancel, "boom", false, 0},
		{"snooze on the last", handler.Snooze(time.Minute), 3, 3, Snooze, "snoozed for 1m0s", false, time.Minute},
		{"wrapped snooze", errors.Join(errors.New("ctx"), handler.Snooze(time.Second)), 1, 1, Snooze, "snoozed for 1s", false, time.Second},
		{"panic", handler.Permanent(&Panic{Value: "x"}), 1, 3, DeadLetter, "handler panicked: x", false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Decide(tt.err, tt.attempt, tt.max)
			if o.Kind != tt.want || o.Message != tt.msg || o.Retriable != tt.retriable || o.Snooze != tt.snooze {
				t.Errorf("Decide = %+v, want kind %d %q retriable %v snooze %s", o, tt.want, tt.msg, tt.retriable, tt.snooze)
			}
		})
	}
}

func TestCheckResult(t *testing.T) {
	for _, tt := range []struct {
		name   string
		result json.RawMessage
		bad    string
	}{
		{"none", nil, ""},
		{"JSON", json.RawMessage(`{"a":1}`), ""},
		{"not JSON", json.RawMessage(`{`), "not valid JSON"},
		{"too large", json.RawMessage(`"` + strings.Repeat("a", task.MaxResultBytes) + `"`), "the limit is"},
	} {
		err := CheckResult(tt.result)
		if (tt.bad == "") != (err == nil) || err != nil && (!strings.Contains(err.Error(), tt.bad) || handler.Retriable(err)) {
			t.Errorf("%s: CheckResult = %v, want a permanent error saying %q", tt.name, err, tt.bad)
		}
	}
}

func TestRunAndTimeout(t *testing.T) {
	_, err := Run(context.Background(), handler.Func(func(context.Context, handler.Request) (json.RawMessage, error) { panic("bad") }), handler.Request{})
	var p *Panic
	if !errors.As(err, &p) || p.Value != "bad" || handler.Retriable(err) {
		t.Fatalf("a panic: %v, want a permanent *Panic", err)
	}
	ctx, cancel := WithTimeout(context.Background(), 0)
	defer cancel()
	<-ctx.Done()
	if err := Expired(ctx); err == nil || !strings.Contains(err.Error(), "timeout_seconds=0") {
		t.Errorf("Expired after the timeout = %v", err)
	}
	plain, stop := context.WithCancel(context.Background())
	stop()
	if err := Expired(plain); err != nil {
		t.Errorf("Expired after a plain cancel = %v, want nil", err)
	}
}
