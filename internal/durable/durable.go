// Package durable is the replay of a task's recorded steps: what a
// handler's named steps, durable sleeps and signal waits do in one attempt
// given the records earlier attempts left (task.Step, task.Signal).
//
// The contract, for every handler kind that uses it:
//
//   - Steps are numbered in the order an attempt meets them (seq 0, 1, …).
//     A step met at seq n whose record exists is replayed from it (its
//     function does not run); a record of another name or kind at seq n,
//     or a run step replayed as another result type, is non-determinism
//     (ErrNonDeterminism, a permanent failure), never a silent replay.
//   - A step with no record runs, and its result or permanent error is
//     recorded (Journal.Record, fenced by the attempt's claim) before Run
//     returns. A retriable error is not recorded: the step runs again on
//     the next attempt. So a step's function runs exactly once per task
//     unless its recording write fails or the attempt dies between the
//     function's return and the write (then at least once).
//   - A sleep or a signal wait is a step too: recorded when it starts,
//     then ended by a *SuspendError that the handler returns, which ends
//     the attempt without spending it (the consumer parks the task until
//     the wake time, or the signal). On resume the sleep returns nil once
//     its time has come; the wait returns the signal's payload (and
//     records its consumption) or, once its timeout passed,
//     ErrSignalTimeout.
//
// A child step (child.go) is a run step that submits a child task once
// and a wait for the child's outcome, delivered as a signal by the
// child's finish. Webhook and Lambda handlers get all of this through
// their protocol (remote.go, Drive), over the same State.
//
// Nothing here talks to AWS: the consumer's Journal writes through
// internal/store, workertest's keeps the records in memory.
package durable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/triagehq/triage/internal/task"
)

// ErrNonDeterminism matches (errors.Is) the error of a step met out of
// the order recorded, under another name, or as another result type.
var ErrNonDeterminism = errors.New("non-determinism")

// ErrSignalTimeout is what a signal wait returns when its timeout passed
// before the signal arrived.
var ErrSignalTimeout = errors.New("signal wait timed out")

// ErrTooManySteps is returned by the step past task.MaxSteps.
var ErrTooManySteps = fmt.Errorf("a task may record at most %d steps", task.MaxSteps)

// NonDeterminismError says which step broke the recorded order.
type NonDeterminismError struct {
	Seq      int
	Met      string // what the attempt met: kind and name (and type)
	Recorded string // what was recorded at Seq ("" for none)
}

func (e *NonDeterminismError) Error() string {
	if e.Recorded == "" {
		return fmt.Sprintf("non-determinism: step %d is %s, which was recorded at another position", e.Seq, e.Met)
	}
	return fmt.Sprintf("non-determinism: step %d is %s, but the task recorded %s there", e.Seq, e.Met, e.Recorded)
}

// Unwrap lets errors.Is match ErrNonDeterminism.
func (e *NonDeterminismError) Unwrap() error { return ErrNonDeterminism }

// SuspendError ends an attempt durably: the task waits, holding no slot
// and no attempt, until WakeAt, or until signal Signal arrives when it
// names one. Its handler must return it (as it returns a Snooze).
type SuspendError struct {
	WakeAt time.Time
	Signal string
}

func (e *SuspendError) Error() string {
	if e.Signal != "" {
		return fmt.Sprintf("waiting for signal %q until %s", e.Signal, e.WakeAt.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("sleeping until %s", e.WakeAt.UTC().Format(time.RFC3339))
}

// SuspendOf reports whether err asks to suspend the task.
func SuspendOf(err error) (*SuspendError, bool) {
	var se *SuspendError
	if errors.As(err, &se) {
		return se, true
	}
	return nil, false
}

// ReplayedError is a step's permanent error, replayed from its record.
type ReplayedError struct{ Step, Message string }

func (e *ReplayedError) Error() string { return fmt.Sprintf("step %q: %s", e.Step, e.Message) }

// Journal records steps for an attempt and reads large results back.
type Journal interface {
	// Record writes st; inline is the bytes of inline results recorded so
	// far (for the task.MaxStepsInline bound). It fails when the attempt
	// no longer holds the task.
	Record(ctx context.Context, st task.Step, inline int) error
	// Result returns st's result, wherever it is kept.
	Result(ctx context.Context, st task.Step) ([]byte, error)
}

// State is one attempt's replay cursor over its task's records. It is
// safe for concurrent use, though steps are meant to be met one at a time.
type State struct {
	mu      sync.Mutex
	journal Journal
	now     func() time.Time
	attempt int
	next    int
	steps   map[int]task.Step
	signals map[string]task.Signal
	inline  int
	observe func(st task.Step, replayed bool)
	spawner Spawner                 // nil: no child steps
	fetched map[int]json.RawMessage // results read from the blob store, by seq (remote.go)
}

// Observe makes s call f for every step met: replayed (true) from its
// record, or recorded (false) once its record is written. f runs under
// s's lock, so it must be quick and must not call s.
func (s *State) Observe(f func(st task.Step, replayed bool)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.observe = f
}

// New returns the state of attempt attempt of a task with the given
// records.
func New(steps []task.Step, signals []task.Signal, attempt int, j Journal, now func() time.Time) *State {
	s := &State{journal: j, now: now, attempt: attempt, steps: map[int]task.Step{}, signals: map[string]task.Signal{}}
	for _, st := range steps {
		s.steps[st.Seq] = st
		if st.ResultRef == "" {
			s.inline += len(st.Result)
		}
	}
	for _, sg := range signals {
		s.signals[sg.Name] = sg
	}
	return s
}

// Steps returns the records as they stand, in order.
func (s *State) Steps() []task.Step {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]task.Step, 0, len(s.steps))
	for i := 0; len(out) < len(s.steps) && i <= task.MaxSteps; i++ {
		if st, ok := s.steps[i]; ok {
			out = append(out, st)
		}
	}
	return out
}

// Deliver adds a signal (workertest's way to send one).
func (s *State) Deliver(sg task.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.signals[sg.Name]; !dup {
		s.signals[sg.Name] = sg
	}
}

// take reserves the next seq and returns the record there, if any. A
// step with no record there whose name was recorded elsewhere is
// non-determinism.
func (s *State) take(kind, name, typ string) (int, task.Step, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seq := s.next
	s.next++
	met := describe(kind, name, typ)
	if rec, ok := s.steps[seq]; ok {
		sameKind := rec.Kind == kind || (kind == task.StepWait && rec.Kind == task.StepSignal)
		if rec.Name != name || !sameKind || (kind == task.StepRun && rec.Type != typ) {
			return seq, rec, true, &NonDeterminismError{Seq: seq, Met: met, Recorded: describe(rec.Kind, rec.Name, rec.Type)}
		}
		if s.observe != nil {
			s.observe(rec, true)
		}
		return seq, rec, true, nil
	}
	for other, rec := range s.steps {
		if rec.Name == name && other != seq {
			return seq, rec, false, &NonDeterminismError{Seq: seq, Met: met}
		}
	}
	if seq >= task.MaxSteps {
		return seq, task.Step{}, false, ErrTooManySteps
	}
	return seq, task.Step{}, false, nil
}

func describe(kind, name, typ string) string {
	switch kind {
	case task.StepRun:
		return fmt.Sprintf("step %q of type %s", name, typ)
	case task.StepSleep:
		return fmt.Sprintf("sleep %q", name)
	}
	return fmt.Sprintf("wait for signal %q", name)
}

func (s *State) record(ctx context.Context, st task.Step) error {
	s.mu.Lock()
	inline := s.inline
	s.mu.Unlock()
	if s.journal != nil {
		if err := s.journal.Record(ctx, st, inline); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.steps[st.Seq] = st
	if s.observe != nil {
		s.observe(st, false)
	}
	if len(st.Result) <= task.MaxStepInline && inline+len(st.Result) <= task.MaxStepsInline {
		s.inline += len(st.Result)
	}
	s.mu.Unlock()
	return nil
}

func (s *State) result(ctx context.Context, st task.Step) ([]byte, error) {
	if st.ResultRef == "" || s.journal == nil {
		return st.Result, nil
	}
	return s.journal.Result(ctx, st)
}

// Run meets the run step name, whose result is of type typ: replayed from
// its record, or fn run and its outcome recorded. permanent tells a
// permanent error of fn's (recorded, replayed as a *ReplayedError) from a
// retriable one (returned as it is, not recorded).
func (s *State) Run(ctx context.Context, name, typ string, fn func(context.Context) (json.RawMessage, error), permanent func(error) bool) (json.RawMessage, error) {
	seq, rec, ok, err := s.take(task.StepRun, name, typ)
	if err != nil {
		return nil, err
	}
	if ok {
		if rec.Error != "" {
			return nil, &ReplayedError{Step: name, Message: rec.Error}
		}
		return s.result(ctx, rec)
	}
	start := s.now()
	res, ferr := fn(ctx)
	st := task.Step{Seq: seq, Name: name, Kind: task.StepRun, Type: typ, Attempt: s.attempt, At: start.UTC(), DurationMS: s.now().Sub(start).Milliseconds()}
	switch {
	case ferr != nil && !permanent(ferr):
		return nil, ferr
	case ferr != nil:
		st.Error = task.Truncate(ferr.Error(), task.MaxErrorBytes)
	case res != nil && !json.Valid(res):
		return nil, fmt.Errorf("step %q returned a result that is not JSON", name)
	default:
		st.Result, st.ResultSize = res, len(res)
	}
	if err := s.record(ctx, st); err != nil {
		return nil, fmt.Errorf("record step %q: %w", name, err)
	}
	return res, ferr
}

// Sleep meets the sleep name ("": "sleep-<seq>"), until at: recorded and
// suspended on first meeting, nil once at has come.
func (s *State) Sleep(ctx context.Context, name string, at time.Time) error {
	if name == "" {
		s.mu.Lock()
		name = fmt.Sprintf("sleep-%d", s.next)
		s.mu.Unlock()
	}
	_, rec, ok, err := s.take(task.StepSleep, name, "")
	if err != nil {
		return err
	}
	if ok {
		if !s.now().Before(*rec.Until) {
			return nil
		}
		return &SuspendError{WakeAt: *rec.Until}
	}
	at = at.UTC()
	st := task.Step{Seq: s.next - 1, Name: name, Kind: task.StepSleep, Until: &at, Attempt: s.attempt, At: s.now().UTC()}
	if err := s.record(ctx, st); err != nil {
		return fmt.Errorf("record sleep %q: %w", name, err)
	}
	if !s.now().Before(at) {
		return nil
	}
	return &SuspendError{WakeAt: at}
}

// WaitSignal meets the wait for signal name, timing out after timeout
// from when it was first met: the signal's payload once it arrived
// (its consumption recorded, so a replay returns the same payload),
// ErrSignalTimeout once the timeout passed, and a *SuspendError while
// neither happened.
func (s *State) WaitSignal(ctx context.Context, name string, timeout time.Duration) (json.RawMessage, error) {
	seq, rec, ok, err := s.take(task.StepWait, name, "")
	if err != nil {
		return nil, err
	}
	if ok && rec.Kind == task.StepSignal { // consumed
		if rec.TimedOut {
			return nil, fmt.Errorf("signal %q: %w", name, ErrSignalTimeout)
		}
		return s.result(ctx, rec)
	}
	now := s.now().UTC()
	until := now.Add(timeout)
	if ok {
		until = *rec.Until
	}
	s.mu.Lock()
	sg, arrived := s.signals[name]
	s.mu.Unlock()
	done := task.Step{Seq: seq, Name: name, Kind: task.StepSignal, Signal: name, Until: &until, Attempt: s.attempt, At: now}
	switch {
	case arrived:
		done.Result, done.ResultSize = sg.Payload, len(sg.Payload)
		if err := s.record(ctx, done); err != nil {
			return nil, fmt.Errorf("record signal %q: %w", name, err)
		}
		return sg.Payload, nil
	case !now.Before(until):
		done.TimedOut = true
		if err := s.record(ctx, done); err != nil {
			return nil, fmt.Errorf("record signal %q: %w", name, err)
		}
		return nil, fmt.Errorf("signal %q: %w", name, ErrSignalTimeout)
	case !ok:
		wait := task.Step{Seq: seq, Name: name, Kind: task.StepWait, Signal: name, Until: &until, Attempt: s.attempt, At: now}
		if err := s.record(ctx, wait); err != nil {
			return nil, fmt.Errorf("record wait for signal %q: %w", name, err)
		}
	}
	return nil, &SuspendError{WakeAt: until, Signal: name}
}
