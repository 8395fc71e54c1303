package execution

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/task"
)

func TestDecide(t *testing.T) {
	boom := errors.New("boom")
	until := time.Now().Add(time.Minute)
	expired, cancel := WithTimeout(context.Background(), 0)
	defer cancel()
	<-expired.Done()
	tests := []struct {
		name         string
		ctx          context.Context // default: a live one
		result       json.RawMessage
		err          error
		attempt, max int
		want         Kind
		msg          string
		retriable    bool
		snooze       time.Duration
		scope        handler.RetryScope
	}{
		{name: "success", result: json.RawMessage(`{"ok":true}`), attempt: 1, max: 3, want: Complete},
		{name: "success, no result", attempt: 3, max: 3, want: Complete},
		{name: "a result that is not JSON", result: json.RawMessage(`{`), attempt: 1, max: 3, want: DeadLetter, msg: "handler returned a result that is not valid JSON"},
		{name: "retriable, attempts left", err: boom, attempt: 1, max: 3, want: Retry, msg: "boom", retriable: true},
		{name: "retriable, last attempt", err: boom, attempt: 3, max: 3, want: DeadLetter, msg: "boom (attempt 3 of 3, none left)", retriable: true},
		{name: "permanent on the first", err: handler.Permanent(boom), attempt: 1, max: 3, want: DeadLetter, msg: "boom"},
		{name: "cancel", err: handler.Cancel(boom), attempt: 3, max: 3, want: Cancel, msg: "boom"},
		{name: "snooze on the last", err: handler.Snooze(time.Minute), attempt: 3, max: 3, want: Snooze, msg: "snoozed for 1m0s", snooze: time.Minute},
		{name: "wrapped snooze", err: errors.Join(errors.New("ctx"), handler.Snooze(time.Second)), attempt: 1, max: 1, want: Snooze, msg: "snoozed for 1s", snooze: time.Second},
		{name: "retry after, key, on the last", err: handler.RetryAfter(until, handler.ScopeKey), attempt: 1, max: 1, want: Hold, msg: (&handler.RetryAfterError{Until: until, Scope: handler.ScopeKey}).Error(), scope: handler.ScopeKey},
		{name: "retry after, type", err: handler.RetryAfter(until, handler.ScopeType), attempt: 1, max: 3, want: Hold, msg: (&handler.RetryAfterError{Until: until, Scope: handler.ScopeType}).Error(), scope: handler.ScopeType},
		{name: "retry after, type and key", err: fmt.Errorf("upstream: %w", handler.RetryAfter(until, handler.ScopeTypeKey)), attempt: 2, max: 3, want: Hold, msg: (&handler.RetryAfterError{Until: until, Scope: handler.ScopeTypeKey}).Error(), scope: handler.ScopeTypeKey},
		{name: "retry after past the timeout", ctx: expired, err: handler.RetryAfter(until, handler.ScopeKey), attempt: 1, max: 3, want: Retry, msg: "timeout: the handler ran longer than timeout_seconds=0", retriable: true},
		{name: "timeout on the last", ctx: expired, err: context.DeadlineExceeded, attempt: 2, max: 2, want: DeadLetter, msg: "timeout: the handler ran longer than timeout_seconds=0 (attempt 2 of 2, none left)", retriable: true},
		{name: "panic", err: handler.Permanent(&Panic{Value: "x"}), attempt: 1, max: 3, want: DeadLetter, msg: "handler panicked: x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := tt.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			o := Decide(ctx, tt.result, tt.err, tt.attempt, tt.max)
			if o.Kind != tt.want || o.Message != tt.msg || o.Retriable != tt.retriable || o.Snooze != tt.snooze {
				t.Errorf("Decide = %+v, want %s %q retriable %v snooze %s", o, tt.want, tt.msg, tt.retriable, tt.snooze)
			}
			if (o.Kind == Complete) != (o.Err == nil) {
				t.Errorf("Decide = %s with error %v: only Complete has none", o.Kind, o.Err)
			}
			if o.Kind == Complete && string(o.Result) != string(tt.result) {
				t.Errorf("result %s, want %s", o.Result, tt.result)
			}
			if got := o.RetryAfter; (got != nil) != (tt.scope != "") || got != nil && (got.Scope != tt.scope || !got.Until.Equal(until)) {
				t.Errorf("RetryAfter = %+v, want scope %q until %v", got, tt.scope, until)
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
