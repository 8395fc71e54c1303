package workertest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/worker"
	"github.com/triagehq/triage/workertest"
)

// thumb is a typed payload whose fields steer the handler under test.
type thumb struct {
	URL  string `json:"url"`
	Mode string `json:"mode"`
}

func (thumb) Kind() string { return "thumb" }

// position is the checkpoint the thumb handler saves and resumes from.
type position struct {
	Row int `json:"row"`
}

var errFlaky = errors.New("upstream flaked")

// newWorker registers the handler under test, and a middleware that
// records every attempt's outcome as the consumer's middleware would see
// it, as a program's main would.
func newWorker(t *testing.T) (*worker.Worker, func() []string) {
	t.Helper()
	w := worker.New(worker.Options{})
	var mu sync.Mutex
	var trail []string
	w.Use(func(ctx context.Context, tk *worker.Task, next func(context.Context) error) error {
		err := next(ctx)
		mu.Lock()
		trail = append(trail, fmt.Sprintf("%s#%d:%v", tk.Type, tk.Attempt, err != nil))
		mu.Unlock()
		return err
	})
	err := worker.AddWorker(w, func(ctx context.Context, j *worker.Job[thumb]) (any, error) {
		var from position
		if _, err := j.LastCheckpoint(&from); err != nil {
			return nil, err
		}
		switch j.Args.Mode {
		case "flaky":
			return nil, errFlaky
		case "permanent":
			return nil, worker.Permanent(errors.New("not an image"))
		case "snooze":
			return nil, worker.Snooze(30 * time.Second)
		case "cancel":
			return nil, worker.Cancel(errors.New("the album was deleted"))
		case "retry-after":
			return nil, worker.RetryAfter(time.Minute, worker.ScopeType)
		case "panic":
			panic("nil map")
		case "slow":
			<-ctx.Done()
			return nil, ctx.Err()
		case "unencodable":
			return make(chan int), nil
		case "priority":
			return []triage.Priority{j.Priority, j.EffectivePriority}, nil
		case "progress":
			for row := from.Row; row < 3; row++ {
				if err := j.Progress(ctx, (row+1)*100/3, fmt.Sprintf("row %d", row+1)); err != nil {
					return nil, err
				}
				if err := j.Checkpoint(ctx, position{Row: row + 1}); err != nil {
					return nil, err
				}
			}
			if err := j.Progress(ctx, 101, ""); err == nil {
				return nil, errors.New("a progress of 101% was accepted")
			}
			return map[string]int{"from": from.Row}, nil
		}
		return map[string]string{"thumbnail": j.Args.URL + "?w=64"}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return w, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), trail...)
	}
}

// TestWork runs each way a handler can end through the consumer's own
// reading of it: the outcome, what the task records, the error Work
// returns, and what the middleware saw.
func TestWork(t *testing.T) {
	tests := []struct {
		name     string
		mode     string
		opts     *workertest.WorkOptions
		outcome  workertest.Outcome
		result   string // Completed: the result
		message  string // the recorded error contains it
		wantErr  error  // Work's error matches it (nil: no error)
		snooze   time.Duration
		scope    worker.RetryScope // Held: the scope it holds
		progress []workertest.Progress
		cp       string
	}{
		{name: "completed", mode: "", outcome: workertest.Completed, result: `{"thumbnail":"s3://b/cat.png?w=64"}`},
		{name: "retriable error, attempts left", mode: "flaky", outcome: workertest.Retried, message: "upstream flaked", wantErr: errFlaky},
		{name: "retriable error, last attempt", mode: "flaky",
			opts:    &workertest.WorkOptions{Submit: []triage.SubmitOption{triage.WithMaxAttempts(3)}, Attempt: 3},
			outcome: workertest.DeadLettered, message: "upstream flaked (attempt 3 of 3, none left)", wantErr: errFlaky},
		{name: "permanent", mode: "permanent", outcome: workertest.DeadLettered, message: "not an image", wantErr: worker.ErrPermanent},
		{name: "snooze", mode: "snooze", outcome: workertest.Snoozed, message: "snoozed for 30s", snooze: 30 * time.Second},
		{name: "cancel", mode: "cancel", outcome: workertest.Cancelled, message: "the album was deleted"},
		{name: "retry after, on the last attempt", mode: "retry-after",
			opts:    &workertest.WorkOptions{Submit: []triage.SubmitOption{triage.WithMaxAttempts(1)}},
			outcome: workertest.Held, message: "(type)", scope: worker.ScopeType},
		{name: "panic", mode: "panic", outcome: workertest.DeadLettered, message: "handler panicked: nil map", wantErr: worker.ErrPermanent},
		{name: "timeout", mode: "slow", opts: &workertest.WorkOptions{Submit: []triage.SubmitOption{triage.WithTimeout(time.Second)}},
			outcome: workertest.Retried, message: "timeout: the handler ran longer than timeout_seconds=1"},
		{name: "result that cannot be stored", mode: "unencodable", outcome: workertest.DeadLettered, message: "marshal result", wantErr: worker.ErrPermanent},
		{name: "promoted", mode: "priority",
			opts:    &workertest.WorkOptions{Submit: []triage.SubmitOption{triage.WithPriority(triage.Low)}, EffectivePriority: triage.High},
			outcome: workertest.Completed, result: `["low","high"]`},
		{name: "progress and checkpoints", mode: "progress", outcome: workertest.Completed, result: `{"from":0}`,
			progress: []workertest.Progress{{33, "row 1"}, {66, "row 2"}, {100, "row 3"}}, cp: `{"row":3}`},
		{name: "resumed from a checkpoint", mode: "progress", opts: &workertest.WorkOptions{Attempt: 2, Checkpoint: position{Row: 2}},
			outcome: workertest.Completed, result: `{"from":2}`, progress: []workertest.Progress{{100, "row 3"}}, cp: `{"row":3}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, trail := newWorker(t)
			res, err := workertest.New(w).Work(context.Background(), t, thumb{URL: "s3://b/cat.png", Mode: tt.mode}, tt.opts)
			if tt.wantErr == nil && tt.outcome != workertest.Retried && err != nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("Work error = %v, want %v", err, tt.wantErr)
			}
			if res.Outcome != tt.outcome || (tt.result != "" && string(res.Result) != tt.result) {
				t.Fatalf("outcome %s result %s, want %s %s", res.Outcome, res.Result, tt.outcome, tt.result)
			}
			if !strings.Contains(res.Message, tt.message) || (tt.message == "") != (res.Message == "") {
				t.Errorf("message %q, want one containing %q", res.Message, tt.message)
			}
			if res.Snooze != tt.snooze {
				t.Errorf("snooze %s, want %s", res.Snooze, tt.snooze)
			}
			if res.Scope != tt.scope || (tt.scope != "") != res.Until.After(time.Now()) {
				t.Errorf("held %q until %v, want %q (and a time to come)", res.Scope, res.Until, tt.scope)
			}
			if fmt.Sprint(res.Progress) != fmt.Sprint(tt.progress) || string(res.Checkpoint) != tt.cp {
				t.Errorf("progress %v checkpoint %s, want %v %s", res.Progress, res.Checkpoint, tt.progress, tt.cp)
			}
			attempt := 1
			if tt.opts != nil && tt.opts.Attempt > 0 {
				attempt = tt.opts.Attempt
			}
			want := []string{fmt.Sprintf("thumb#%d:%v", attempt, tt.outcome != workertest.Completed)}
			if tt.mode == "panic" {
				want = nil // a panic unwinds through the middleware to the consumer
			}
			if got := trail(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("middleware saw %v, want %v", got, want)
			}
		})
	}
}

// TestWorkTask runs an untyped handler by type name, with a raw payload.
func TestWorkTask(t *testing.T) {
	w := worker.New(worker.Options{})
	if err := w.Handle("echo", func(_ context.Context, tk *worker.Task) (any, error) { return tk.Payload, nil }); err != nil {
		t.Fatal(err)
	}
	res, err := workertest.New(w).WorkTask(context.Background(), t, "echo", json.RawMessage(`{"x": 1}`), nil)
	if err != nil || res.Outcome != workertest.Completed || string(res.Result) != `{"x":1}` {
		t.Fatalf("WorkTask = %+v, %v", res, err)
	}
	// A payload that does not decode into the typed worker's args fails
	// for good, as on the consumer.
	tw, _ := newWorker(t)
	res, err = workertest.New(tw).WorkTask(context.Background(), t, "thumb", `not json`, nil)
	if !errors.Is(err, worker.ErrPermanent) || res.Outcome != workertest.DeadLettered {
		t.Fatalf("undecodable payload: %+v, %v", res, err)
	}
}

// fatalTB records a Fatalf and ends the calling goroutine, as testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestWorkRefusesWhatCannotRun: a test that cannot run as written fails,
// naming why, rather than reporting an outcome.
func TestWorkRefusesWhatCannotRun(t *testing.T) {
	w, _ := newWorker(t)
	tests := []struct {
		name string
		typ  string
		opts *workertest.WorkOptions
		says string
	}{
		{"no handler", "resize", nil, "no handler registered"},
		{"submit the API refuses", "thumb", &workertest.WorkOptions{Submit: []triage.SubmitOption{triage.WithPriority("urgent")}}, "would refuse"},
		{"attempt past the last", "thumb", &workertest.WorkOptions{Attempt: 4}, "attempt 4 of a task allowed 3"},
		{"demoted", "thumb", &workertest.WorkOptions{EffectivePriority: triage.Low}, "submitted priority (medium) or higher"},
		{"checkpoint too large", "thumb", &workertest.WorkOptions{Checkpoint: strings.Repeat("x", 4<<10)}, "checkpoint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fatalTB{TB: t}
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _ = workertest.New(w).WorkTask(context.Background(), f, tt.typ, `{"url":"u"}`, tt.opts)
			}()
			<-done
			if !strings.Contains(f.msg, tt.says) {
				t.Errorf("Fatalf(%q), want it to say %q", f.msg, tt.says)
			}
		})
	}
}
