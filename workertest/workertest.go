// Package workertest runs the handlers registered on a worker.Worker in a
// test, one attempt at a time, with no AWS and no emulators, as River's
// rivertest.Worker does for River workers (here a Runner: the name
// Worker is the runtime's):
//
//	w := worker.New(worker.Options{})
//	if err := register(w); err != nil { // the same registration main uses
//		t.Fatal(err)
//	}
//	res, err := workertest.New(w).Work(ctx, t, Thumbnail{URL: u}, nil) // a *Runner
//	if err != nil {
//		t.Fatal(err) // the attempt failed: it would be retried or dead-lettered
//	}
//	if res.Outcome != workertest.Completed { ... }
//
// An attempt runs as the consumer runs it: the task is built from the
// submit as the API builds it (defaults and validation included), the
// handler is the one registered for the task's type wrapped in the
// worker's middleware, it runs under the task's timeout with panics
// recovered, and what it returns is read by the consumer's own rule
// (internal/execution.Decide, the one function that decides an attempt's
// outcome for both): a result that cannot be stored, Permanent, Cancel,
// Snooze, RetryAfter for each scope, a retriable error with or without
// attempts left, a timeout, a panic. Progress reports and checkpoints go
// through the same validation and are recorded in the Result. What needs
// a deployment is left out: the claim and lease, heartbeats, cancel
// requests, the writes, and the Lambda and webhook routes of
// TRIAGE_ROUTES.
package workertest

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/internal/durable"
	"github.com/triagehq/triage/internal/execution"
	"github.com/triagehq/triage/internal/gohandlers"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/worker"
)

// Runner runs one worker.Worker's Go handlers in tests. It is safe for
// concurrent use (parallel subtests) once the handlers are registered.
type Runner struct {
	handlers *gohandlers.Set
}

// New returns the test runner of w's handlers and middleware. Each Work
// runs what is registered on w at the time.
func New(w *worker.Worker) *Runner {
	s, _ := gohandlers.Of(w) // every *worker.Worker from worker.New has one
	if s == nil {
		s = &gohandlers.Set{} // a zero Worker: no handlers
	}
	return &Runner{handlers: s}
}

// WorkOptions describes the attempt Work and WorkTask run. The zero value
// (or nil) is the first attempt of a task submitted with no options.
type WorkOptions struct {
	// Submit are the options the task was submitted with (priority, max
	// attempts, timeout, ...), as for triage.Client.Submit.
	Submit []triage.SubmitOption
	// Attempt is which attempt this is, from 1 (default 1): with
	// triage.WithMaxAttempts in Submit, a test can run the last attempt.
	Attempt int
	// EffectivePriority is the priority the attempt runs at, as after the
	// promoter moved the task (default: the submitted one; never lower).
	EffectivePriority triage.Priority
	// Checkpoint is the checkpoint an earlier attempt saved, which this
	// one resumes from: a json.RawMessage as is, anything else encoded.
	Checkpoint any
	// Steps are the records earlier attempts left (durable steps, sleeps,
	// signal waits: pass a Result's Steps on), which this attempt replays.
	Steps []worker.StepRecord
	// Signals are the signals delivered to the task by name, each payload
	// a json.RawMessage as is or anything else encoded.
	Signals map[string]any
	// Now is the attempt's clock for sleeps and signal timeouts (default
	// time.Now): set it past a Result's WakeAt to run the resumed attempt.
	Now func() time.Time
	// Children are the outcomes of the task's child tasks (worker.Child)
	// by step name: the child's result (a json.RawMessage as is, anything
	// else encoded), or a *worker.ChildFailedError for a child that
	// failed. A child step with none here waits (Suspended).
	Children map[string]any
}

// Outcome is what becomes of the task after the attempt.
type Outcome string

// The outcomes of an attempt.
const (
	// Completed: the handler succeeded; Result.Result is the task's result.
	Completed Outcome = "completed"
	// Retried: a retriable error with attempts left; the task would run
	// again after its backoff.
	Retried Outcome = "retried"
	// Snoozed: the handler asked (worker.Snooze) to run again after
	// Result.Snooze, without spending the attempt.
	Snoozed Outcome = "snoozed"
	// Held: the handler asked (worker.RetryAfter) for its scope to wait
	// until Result.Until: the task, and every task of Result.Scope (its
	// key, type, or type and key), is set aside until then, without
	// spending the attempt. (Should the consumer fail to record the
	// scope's wait, it snoozes the task until then instead.)
	Held Outcome = "held"
	// Cancelled: the handler cancelled the task (worker.Cancel).
	Cancelled Outcome = "cancelled"
	// Suspended: the handler slept (worker.Sleep) or waits for a signal
	// (worker.WaitSignal); the task would wait, without spending the
	// attempt, until Result.WakeAt or the signal Result.Signal.
	Suspended Outcome = "suspended"
	// DeadLettered: a permanent error (worker.Permanent, a panic, a result
	// that cannot be stored), or a retriable one on the last attempt.
	DeadLettered Outcome = "dead_lettered"
)

// Progress is one progress report of the attempt.
type Progress struct {
	Percent int
	Message string
}

// Result is what one attempt did.
type Result struct {
	Outcome Outcome
	// Result is the task's result when it completed (nil: none).
	Result json.RawMessage
	// Message is the error the task records: the failure, the cancel's
	// reason, "snoozed for 30s"; for a dead letter after a retriable
	// error it names the attempts that ran out.
	Message string
	// Snooze is how long a snoozed task waits.
	Snooze time.Duration
	// Until and Scope are, for Held, when the scope the handler named
	// may run again, and which scope it is.
	Until time.Time
	Scope worker.RetryScope
	// Progress is every progress report the attempt made, in order.
	Progress []Progress
	// Checkpoint is the last checkpoint the attempt saved (nil: none);
	// the task keeps it for its next attempt whatever the outcome.
	Checkpoint json.RawMessage
	// Steps are the task's step records after the attempt: the ones it
	// was given and the ones it recorded, for the next attempt's
	// WorkOptions.Steps.
	Steps []worker.StepRecord
	// WakeAt and Signal are, for Suspended, when the task wakes and the
	// signal that would wake it sooner ("" for a sleep).
	WakeAt time.Time
	Signal string
	// Children are the child tasks the attempt submitted (worker.Child),
	// by step name; a child's id in the steps is "child-<name>".
	Children map[string]triage.SubmitRequest
}

// Work runs one attempt of a task whose type is args.Kind() and whose
// payload is args, as triage.Client.SubmitArgs would submit it. See
// WorkTask.
func (rn *Runner) Work(ctx context.Context, tb testing.TB, args triage.Args, opts *WorkOptions) (*Result, error) {
	tb.Helper()
	if args == nil {
		tb.Fatalf("workertest: Work with nil args")
	}
	return rn.WorkTask(ctx, tb, args.Kind(), args, opts)
}

// WorkTask runs one attempt of a task of type typ with payload (taken as
// triage.Client.Submit takes it). The error is the attempt's failure when
// the outcome is Retried or DeadLettered, as the consumer reads it (the
// timeout named, a panic as a permanent error), and nil otherwise: like
// rivertest, a snooze, Retry-After or cancel the handler asked for is an
// outcome, not an error. A test that cannot run (no handler for typ, a
// submit the API would refuse, bad WorkOptions) fails tb.
func (rn *Runner) WorkTask(ctx context.Context, tb testing.TB, typ string, payload any, opts *WorkOptions) (*Result, error) {
	tb.Helper()
	if opts == nil {
		opts = &WorkOptions{}
	}
	t := rn.task(tb, typ, payload, opts)
	h, err := rn.handlers.Registry().Lookup(t.Type)
	if err != nil {
		tb.Fatalf("workertest: %v (register it on the worker.Worker before New)", err)
	}
	rec := &recorder{}
	r := execution.Request(t, t.Payload)
	r.Reporter = rec
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	var signals []task.Signal
	for name, p := range opts.Signals {
		raw, ok := p.(json.RawMessage)
		if !ok {
			var err error
			if raw, err = json.Marshal(p); err != nil {
				tb.Fatalf("workertest: signal %q: %v", name, err)
			}
		}
		signals = append(signals, task.Signal{Name: name, Payload: raw, At: now()})
	}
	for name, c := range opts.Children {
		o := durable.ChildOutcome{ID: "child-" + name, Status: triage.Completed}
		if f, ok := c.(*worker.ChildFailedError); ok {
			o.Status, o.Error = f.Status, f.Message
		} else {
			raw, ok := c.(json.RawMessage)
			if !ok {
				var err error
				if raw, err = json.Marshal(c); err != nil {
					tb.Fatalf("workertest: child %q: %v", name, err)
				}
			}
			o.Result = raw
		}
		payload, _ := json.Marshal(o) // an outcome always marshals
		signals = append(signals, task.Signal{Name: durable.ChildSignal(name), Payload: payload, At: now()})
	}
	r.Durable = durable.New(opts.Steps, signals, t.Attempts, nil, now)
	sp := &spawner{}
	r.Durable.SetSpawner(sp)

	runCtx, cancel := execution.WithTimeout(ctx, t.TimeoutSeconds)
	defer cancel()
	result, err := execution.Run(runCtx, h, r)
	o := execution.Decide(runCtx, result, err, t.Attempts, t.MaxAttempts)
	res := &Result{Outcome: outcomeOf(o.Kind), Result: o.Result, Message: o.Message, Snooze: o.Snooze}
	if o.RetryAfter != nil {
		res.Until, res.Scope = o.RetryAfter.Until, o.RetryAfter.Scope
	}
	if o.Suspend != nil {
		res.WakeAt, res.Signal = o.Suspend.WakeAt, o.Suspend.Signal
	}
	res.Steps = r.Durable.Steps()
	res.Children = sp.submitted
	res.Progress, res.Checkpoint = rec.reports()
	if o.Kind == execution.Retry || o.Kind == execution.DeadLetter {
		return res, o.Err
	}
	return res, nil
}

// outcomeOf names the consumer's decision about an attempt.
func outcomeOf(k execution.Kind) Outcome {
	switch k {
	case execution.Complete:
		return Completed
	case execution.Retry:
		return Retried
	case execution.Snooze:
		return Snoozed
	case execution.Hold:
		return Held
	case execution.Cancel:
		return Cancelled
	case execution.Suspend:
		return Suspended
	}
	return DeadLettered
}

// task builds the task as the API would for the submit, at the attempt
// opts describes.
func (rn *Runner) task(tb testing.TB, typ string, payload any, opts *WorkOptions) *task.Task {
	tb.Helper()
	sr, err := triage.NewRequest(typ, payload, opts.Submit...)
	if err != nil {
		tb.Fatalf("workertest: the deployment would refuse this task: %v", err)
	}
	tr := task.Request(sr)
	tr.RunAt, tr.DelaySeconds = nil, nil // it is running now
	t := tr.NewTask(time.Now(), 0)
	t.Attempts = max(opts.Attempt, 1)
	if t.Attempts > t.MaxAttempts {
		tb.Fatalf("workertest: attempt %d of a task allowed %d (set triage.WithMaxAttempts in WorkOptions.Submit)", t.Attempts, t.MaxAttempts)
	}
	if p := opts.EffectivePriority; p != "" {
		if err := p.Validate(); err != nil || p.Rank() > t.Priority.Rank() {
			tb.Fatalf("workertest: effective priority %q: a task runs at its submitted priority (%s) or higher", p, t.Priority)
		}
		t.EffectivePriority = p
	}
	if opts.Checkpoint != nil {
		cp, ok := opts.Checkpoint.(json.RawMessage)
		if !ok {
			if cp, err = json.Marshal(opts.Checkpoint); err != nil {
				tb.Fatalf("workertest: encode the checkpoint: %v", err)
			}
		}
		if fe := task.CheckCheckpoint(cp); fe != nil {
			tb.Fatalf("workertest: checkpoint: %v", fe)
		}
		t.Checkpoint = cp
	}
	return t
}

// recorder keeps what the attempt reported; reports arrive validated
// (handler.Request checks them before the Reporter sees them).
type recorder struct {
	mu         sync.Mutex
	progress   []Progress
	checkpoint json.RawMessage
}

func (r *recorder) Progress(_ context.Context, percent int, message string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.progress = append(r.progress, Progress{Percent: percent, Message: message})
	return nil
}

func (r *recorder) Checkpoint(_ context.Context, data json.RawMessage) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checkpoint = append(json.RawMessage(nil), data...)
	return nil
}

func (r *recorder) reports() ([]Progress, json.RawMessage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.progress, r.checkpoint
}

// spawner records the child tasks an attempt submits.
type spawner struct {
	mu        sync.Mutex
	submitted map[string]triage.SubmitRequest
}

func (sp *spawner) Spawn(_ context.Context, step string, r task.Request) (string, *durable.ChildOutcome, error) {
	if err := r.Validate(); err != nil {
		return "", nil, err
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.submitted == nil {
		sp.submitted = map[string]triage.SubmitRequest{}
	}
	sp.submitted[step] = triage.SubmitRequest(r)
	return "child-" + step, nil, nil
}

func (sp *spawner) ChildOutcome(context.Context, string) (*durable.ChildOutcome, error) {
	return nil, nil // a child's outcome is given in WorkOptions.Children
}

func (sp *spawner) ChildResult(context.Context, string) (json.RawMessage, error) {
	return nil, errors.New("workertest: a child's result is given whole in WorkOptions.Children")
}
