package outcomes_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/internal/control"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triageconfig"
	"github.com/triagehq/triage/triagetype"
	"github.com/triagehq/triage/worker"
	"github.com/triagehq/triage/workertest"
)

// outcomeCase is one way a handler can end an attempt. Each case has its
// own task type and key, so a Retry-After that holds one case's type or
// key holds nothing of another's.
type outcomeCase struct {
	name    string
	handle  worker.HandlerFunc
	submit  []triage.SubmitOption
	want    workertest.Outcome
	scope   worker.RetryScope // Held: the scope the handler named
	message string            // the message both record, normalized
}

var errFlaky = errors.New("upstream flaked")

func outcomeCases() []outcomeCase {
	fail := func(err error) worker.HandlerFunc {
		return func(context.Context, *worker.Task) (any, error) { return nil, err }
	}
	retryAfter := func(scope worker.RetryScope) worker.HandlerFunc {
		return func(context.Context, *worker.Task) (any, error) {
			return nil, worker.RetryAfter(time.Hour, scope)
		}
	}
	return []outcomeCase{
		{name: "success", want: workertest.Completed,
			handle: func(_ context.Context, t *worker.Task) (any, error) {
				return map[string]any{"key": t.Key, "priority": t.Priority}, nil
			}},
		{name: "success without a result", want: workertest.Completed,
			handle: func(context.Context, *worker.Task) (any, error) { return nil, nil }},
		{name: "retriable error, attempts left", want: workertest.Retried, message: "upstream flaked",
			handle: fail(errFlaky)},
		{name: "retriable error, last attempt", want: workertest.DeadLettered, message: "upstream flaked (attempt 1 of 1, none left)",
			submit: []triage.SubmitOption{triage.WithMaxAttempts(1)}, handle: fail(errFlaky)},
		{name: "permanent", want: workertest.DeadLettered, message: "not an image",
			handle: fail(worker.Permanent(errors.New("not an image")))},
		{name: "cancel", want: workertest.Cancelled, message: "the album was deleted",
			handle: fail(worker.Cancel(errors.New("the album was deleted")))},
		{name: "snooze on the last attempt", want: workertest.Snoozed, message: "snoozed for 1h0m0s",
			submit: []triage.SubmitOption{triage.WithMaxAttempts(1)}, handle: fail(worker.Snooze(time.Hour))},
		{name: "retry after, key, on the last attempt", want: workertest.Held, scope: worker.ScopeKey, message: "retry after <until> (key)",
			submit: []triage.SubmitOption{triage.WithMaxAttempts(1)}, handle: retryAfter(worker.ScopeKey)},
		{name: "retry after, type", want: workertest.Held, scope: worker.ScopeType, message: "retry after <until> (type)",
			handle: retryAfter(worker.ScopeType)},
		{name: "retry after, type and key", want: workertest.Held, scope: worker.ScopeTypeKey, message: "retry after <until> (type_key)",
			handle: retryAfter(worker.ScopeTypeKey)},
		{name: "retry after, wrapped", want: workertest.Held, scope: worker.ScopeKey, message: "retry after <until> (key)",
			handle: func(context.Context, *worker.Task) (any, error) {
				return nil, fmt.Errorf("partner API: %w", worker.RetryAfter(time.Now().Add(time.Hour), worker.ScopeKey))
			}},
		{name: "panic", want: workertest.DeadLettered, message: "handler panicked: nil map",
			handle: func(context.Context, *worker.Task) (any, error) { panic("nil map") }},
		{name: "result that cannot be encoded", want: workertest.DeadLettered,
			message: "marshal result of task <id>: json: unsupported type: chan int",
			handle:  func(context.Context, *worker.Task) (any, error) { return make(chan int), nil }},
		{name: "result that is not JSON", want: workertest.DeadLettered, message: "handler returned a result that is not valid JSON",
			handle: func(context.Context, *worker.Task) (any, error) { return json.RawMessage(`{"a":`), nil }},
		{name: "timeout", want: workertest.Retried, message: "timeout: the handler ran longer than timeout_seconds=1",
			submit: []triage.SubmitOption{triage.WithTimeout(time.Second)},
			handle: func(ctx context.Context, _ *worker.Task) (any, error) { <-ctx.Done(); return nil, ctx.Err() }},
		{name: "retry after past the timeout", want: workertest.Retried, message: "timeout: the handler ran longer than timeout_seconds=1",
			submit: []triage.SubmitOption{triage.WithTimeout(time.Second)},
			handle: func(ctx context.Context, _ *worker.Task) (any, error) {
				<-ctx.Done()
				return nil, worker.RetryAfter(time.Hour, worker.ScopeKey)
			}},
	}
}

// seen is how one attempt ended, as workertest reports it or as the
// consumer recorded it on the task.
type seen struct {
	Outcome workertest.Outcome
	Message string // normalized: the task's id is "<id>", a Retry-After's end "<until>"
	Result  string // Completed: the result
	Held    string // Held: the scope set aside, as the task names it
}

// TestWorkertestAgreesWithTheConsumer runs every case's handler, registered
// once on one worker.Worker, through workertest and through that worker's
// own consumer (worker.Run) on the emulators, and compares the outcomes:
// what becomes of the task, the message it records, its result, and for a
// Retry-After the scope set aside. Retries wait an hour (the backoff is
// set so), so the consumer's first attempt is the one compared.
func TestWorkertestAgreesWithTheConsumer(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	cfg, err := triageconfig.Decode(env.Getenv(map[string]string{
		triageconfig.EnvRetryBackoff: "high=1h:1h,medium=1h:1h,low=1h:1h",
	}))
	if err != nil {
		t.Fatal(err)
	}
	w := worker.New(worker.Options{Config: &cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	cases := outcomeCases()
	typeOf := func(i int) string { return fmt.Sprintf("outcome-%d", i) }
	keyOf := func(i int) string { return fmt.Sprintf("k%d", i) }
	for i, c := range cases {
		if err := w.Handle(typeOf(i), c.handle); err != nil {
			t.Fatal(err)
		}
	}

	// The consumer: submit every case as the API would, then run them.
	ctx := context.Background()
	ids := make([]string, len(cases))
	for i, c := range cases {
		sr, err := triage.NewRequest(typeOf(i), map[string]int{"case": i}, append([]triage.SubmitOption{triage.WithKey(keyOf(i))}, c.submit...)...)
		if err != nil {
			t.Fatal(err)
		}
		tr := task.Request(sr)
		tk, _, err := a.Enqueuer.Submit(ctx, tr.NewTask(a.Store.Now(), 0))
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = tk.ID
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("worker.Run: %v", err)
		}
	}()

	tw := workertest.New(w)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, _ := tw.WorkTask(ctx, t, typeOf(i), map[string]int{"case": i},
				&workertest.WorkOptions{Submit: append([]triage.SubmitOption{triage.WithKey(keyOf(i))}, c.submit...)})
			unit := seen{Outcome: res.Outcome, Message: res.Message, Result: string(res.Result)}
			if res.Outcome == workertest.Held {
				unit.Held = scopeName(res.Scope, typeOf(i), keyOf(i))
				if !res.Until.After(time.Now()) {
					t.Errorf("workertest: held until %v, not in the future", res.Until)
				}
			}
			onConsumer, tk := firstOutcome(t, a.Store, ids[i])
			unit.Message = normalize(unit.Message, unitID(res.Message))
			onConsumer.Message = normalize(onConsumer.Message, tk.ID)

			if unit != onConsumer {
				t.Errorf("workertest: %+v\nconsumer:   %+v", unit, onConsumer)
			}
			if unit.Outcome != c.want {
				t.Errorf("outcome %s, want %s", unit.Outcome, c.want)
			}
			if unit.Message != c.message {
				t.Errorf("message %q, want %q", unit.Message, c.message)
			}
			if c.want == workertest.Held {
				if want := scopeName(c.scope, typeOf(i), keyOf(i)); unit.Held != want {
					t.Errorf("held in %q, want %q", unit.Held, want)
				}
			}
			// Neither a snooze nor a Retry-After spends the attempt.
			spent := 1
			if c.want == workertest.Snoozed || c.want == workertest.Held {
				spent = 0
			}
			if tk.Attempts != spent {
				t.Errorf("consumer: %d attempts spent, want %d", tk.Attempts, spent)
			}
		})
	}
	// The success case's handler saw its key and typed priority.
	if tk, err := a.Store.Get(ctx, ids[0]); err != nil || string(tk.Result) != `{"key":"k0","priority":"medium"}` {
		t.Errorf("success: result %s (%v), want the key and priority the handler saw", tk.Result, err)
	}
}

// firstOutcome waits for the consumer to record task id's first attempt
// and reads how it ended.
func firstOutcome(t *testing.T, s stacktest.TaskGetter, id string) (seen, *task.Task) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		tk, err := s.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if len(tk.History) > 0 && tk.Status != triagetype.Executing {
			return outcomeOf(tk), tk
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s is %s with %d attempts recorded after 2 min", id, tk.Status, len(tk.History))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// outcomeOf reads the outcome of tk's first attempt from its record.
func outcomeOf(tk *task.Task) seen {
	msg := ""
	if tk.Error != nil {
		msg = tk.Error.Message
	}
	switch {
	case tk.Status == triagetype.Completed:
		return seen{Outcome: workertest.Completed, Result: string(tk.Result)}
	case tk.Status == triagetype.Cancelled:
		return seen{Outcome: workertest.Cancelled, Message: msg}
	case tk.Status == triagetype.DeadLetter:
		return seen{Outcome: workertest.DeadLettered, Message: msg}
	case tk.Status == triagetype.Retrying && tk.Attempts == 0:
		return seen{Outcome: workertest.Snoozed, Message: tk.History[0].Error}
	case tk.Status == triagetype.Retrying:
		return seen{Outcome: workertest.Retried, Message: msg}
	case tk.Status == triagetype.Queued && tk.Held != "":
		return seen{Outcome: workertest.Held, Message: tk.History[0].Error, Held: tk.Held}
	}
	return seen{Outcome: workertest.Outcome("status " + string(tk.Status)), Message: msg}
}

// scopeName is the name the consumer gives the scope a Retry-After holds.
func scopeName(s worker.RetryScope, typ, key string) string {
	switch s {
	case worker.ScopeType:
		return control.TypeScope(typ).String()
	case worker.ScopeTypeKey:
		return control.TypeKeyScope(typ, key).String()
	}
	return control.KeyScope(key).String()
}

// until matches the end of a Retry-After in a message.
var until = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)

// normalize makes a message comparable across runs: the task's id becomes
// "<id>" and a Retry-After's end "<until>" (each run asks for an hour from
// its own now).
func normalize(msg, id string) string {
	if id != "" {
		msg = strings.ReplaceAll(msg, id, "<id>")
	}
	return until.ReplaceAllString(msg, "<until>")
}

// unitID is the task id workertest's message names, if any: the one
// "marshal result of task <id>" carries ("" when there is none).
func unitID(msg string) string {
	_, rest, ok := strings.Cut(msg, "marshal result of task ")
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, ":")
	return id
}
