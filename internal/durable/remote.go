package durable

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/triagehq/triage/internal/task"
)

// Remote handlers (webhooks, Lambda functions) get steps, sleeps and
// signal waits through their protocol, driven by Drive with the same State
// (and so the same rules) as Go handlers:
//
//   - The request carries the task's records, "steps" (RemoteStep: name,
//     kind, result or error, until, timed_out) and the "signals" delivered
//     (name, payload, at). A handler replays by name: a step recorded is
//     not run again.
//   - A result object with the field ResponseField is a Directive, not
//     the task's result: it records steps (each name with its JSON result,
//     or an error, recorded as the step's permanent error), then asks to
//     sleep, to wait for a signal, to submit and await a child task
//     ("child"), or to finish with "result". With none of these it asks to be called again at once, with the new
//     records, in the same attempt: so a handler that returns after each
//     step it runs has each step's side effect run once per task.
//   - Any other result is the task's result, as without durable steps.
//
// A sleep whose time has come, or a wait whose signal arrived or whose
// timeout passed, is settled at once and the handler called again with
// it recorded: its kind "sleep" (until), or "signal" with the payload as
// "result" or "timed_out". One attempt makes at most task.MaxSteps+1
// calls, and each call past the first follows a call that recorded
// something.

// ResponseField is the field of a remote handler's result object that
// makes it a Directive.
const ResponseField = "triage_durable"

// RemoteType is the result type recorded for a remote handler's run
// steps (a Go handler records its Go type).
const RemoteType = "json"

// RemoteStep is a record as a remote handler's request carries it: Seq,
// Name and Kind (run, sleep, wait, signal); Result is a run step's JSON
// result or a consumed signal's payload; Error a run step's permanent
// error; Until when a sleep ends or a wait times out.
type RemoteStep struct {
	Seq      int             `json:"seq"`
	Name     string          `json:"name"`
	Kind     string          `json:"kind"`
	Result   json.RawMessage `json:"result,omitempty"`
	Error    string          `json:"error,omitempty"`
	Until    *time.Time      `json:"until,omitempty"`
	Signal   string          `json:"signal,omitempty"`
	TimedOut bool            `json:"timed_out,omitempty"`
}

// Records are the fields a remote handler's request adds to the task's
// (handler.Request's): embed it beside the request when encoding.
type Records struct {
	Steps   []RemoteStep  `json:"steps,omitempty"`
	Signals []task.Signal `json:"signals,omitempty"`
}

// Directive is what a remote handler's result asks for under
// ResponseField: record Steps, in order, then at most one of Sleep, Wait
// and Result.
type Directive struct {
	Steps  []ReportedStep  `json:"steps,omitempty"`
	Sleep  *SleepDirective `json:"sleep,omitempty"`
	Wait   *WaitDirective  `json:"wait,omitempty"`
	Child  *ChildDirective `json:"child,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
}

// ChildDirective asks to submit a child task, once per task under the
// step Name, and to wait for it (State.Child). Request is the child's
// submit request, as POST /tasks takes it.
type ChildDirective struct {
	Name    string          `json:"name"`
	Request json.RawMessage `json:"request"`
}

// ReportedStep is a step a remote handler ran: its JSON result, or the
// permanent error it failed with (replayed as the step's error).
type ReportedStep struct {
	Name   string          `json:"name"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// SleepDirective asks to sleep Seconds, or until Until; Name is optional
// ("sleep-<seq>").
type SleepDirective struct {
	Name    string     `json:"name,omitempty"`
	Seconds *float64   `json:"seconds,omitempty"`
	Until   *time.Time `json:"until,omitempty"`
}

// WaitDirective asks to wait for signal Signal, at most TimeoutSeconds
// from the first time it is asked.
type WaitDirective struct {
	Signal         string  `json:"signal"`
	TimeoutSeconds float64 `json:"timeout_seconds"`
}

// Call makes one call of a remote handler with recs beside its request
// and returns its result (already mapped from the protocol's success) or
// its error.
type Call func(ctx context.Context, recs Records) (json.RawMessage, error)

// reported marks a reported step's error, recorded as the step's outcome.
type reported struct{ msg string }

func (e *reported) Error() string { return e.msg }

// Drive runs a remote handler's attempt over s: it settles the records
// (a sleep due, a wait whose signal arrived or timed out), then calls
// call until a result that is not a Directive, a Directive's result, or a
// sleep or wait that suspends the task (a *SuspendError). A malformed
// Directive is an error wrapped by permanent (the handler's mark of a
// permanent failure).
//
// A nil s (a handler run outside a consumer, with no records) drives a
// fresh State of attempt attempt.
func Drive(ctx context.Context, s *State, attempt int, call Call, permanent func(error) error) (json.RawMessage, error) {
	if s == nil {
		s = New(nil, nil, attempt, nil, time.Now)
	}
	if err := s.replayRecords(ctx); err != nil {
		return nil, err
	}
	for calls := 0; ; calls++ {
		if calls > task.MaxSteps {
			return nil, permanent(fmt.Errorf("%s: %d calls in one attempt without a result", ResponseField, calls))
		}
		recs, err := s.records(ctx)
		if err != nil {
			return nil, err
		}
		res, err := call(ctx, recs)
		if err != nil {
			return nil, err
		}
		d, ok, err := directiveOf(res)
		if err != nil {
			return nil, permanent(err)
		}
		if !ok {
			return res, nil
		}
		if err := d.check(); err != nil {
			return nil, permanent(err)
		}
		for _, st := range d.Steps {
			_, err := s.Run(ctx, st.Name, RemoteType, func(context.Context) (json.RawMessage, error) {
				if st.Error != "" {
					return nil, &reported{msg: st.Error}
				}
				if len(st.Result) == 0 {
					return json.RawMessage("null"), nil
				}
				return st.Result, nil
			}, func(error) bool { return true })
			var rep *reported
			switch {
			case errors.As(err, &rep):
			case errors.Is(err, ErrNonDeterminism), errors.Is(err, ErrTooManySteps):
				return nil, permanent(err)
			case err != nil:
				return nil, err
			}
		}
		switch {
		case d.Result != nil:
			return d.Result, nil
		case d.Sleep != nil:
			var at time.Time
			if d.Sleep.Seconds != nil {
				at = s.now().Add(time.Duration(*d.Sleep.Seconds * float64(time.Second)))
			} else {
				at = *d.Sleep.Until
			}
			if err := s.Sleep(ctx, d.Sleep.Name, at); err != nil {
				return nil, asPermanent(err, permanent)
			}
		case d.Wait != nil:
			timeout := time.Duration(d.Wait.TimeoutSeconds * float64(time.Second))
			if _, err := s.WaitSignal(ctx, d.Wait.Signal, timeout); err != nil && !errors.Is(err, ErrSignalTimeout) {
				return nil, asPermanent(err, permanent)
			}
		case d.Child != nil:
			var r task.Request
			if err := json.Unmarshal(d.Child.Request, &r); err != nil {
				return nil, permanent(fmt.Errorf("%s.child.request: %w", ResponseField, err))
			}
			_, err := s.Child(ctx, d.Child.Name, r)
			var failed *ChildFailedError
			var replayed *ReplayedError
			var fe *task.FieldError
			switch {
			case err == nil, errors.As(err, &failed):
				// recorded: the next call sees the outcome
			case errors.As(err, &fe), errors.As(err, &replayed), errors.Is(err, ErrNoSpawner):
				return nil, permanent(fmt.Errorf("%s.child: %w", ResponseField, err))
			default:
				return nil, asPermanent(err, permanent)
			}
		}
	}
}

// asPermanent marks the errors no later attempt can fix.
func asPermanent(err error, permanent func(error) error) error {
	if errors.Is(err, ErrNonDeterminism) || errors.Is(err, ErrTooManySteps) {
		return permanent(err)
	}
	return err
}

// directiveOf reads res as a Directive when it is an object with
// ResponseField.
func directiveOf(res json.RawMessage) (Directive, bool, error) {
	var d Directive
	trimmed := bytes.TrimSpace(res)
	if len(trimmed) == 0 || trimmed[0] != '{' || !bytes.Contains(trimmed, []byte(`"`+ResponseField+`"`)) {
		return d, false, nil
	}
	var body map[string]json.RawMessage
	if json.Unmarshal(trimmed, &body) != nil || body[ResponseField] == nil {
		return d, false, nil
	}
	dec := json.NewDecoder(bytes.NewReader(body[ResponseField]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return d, true, fmt.Errorf("%s: %w", ResponseField, err)
	}
	return d, true, nil
}

// check validates a Directive, naming the bad field.
func (d Directive) check() error {
	bad := func(field, msg string) error { return fmt.Errorf("%s.%s: %s", ResponseField, field, msg) }
	for i, st := range d.Steps {
		if fe := task.CheckStepName(fmt.Sprintf("steps[%d].name", i), st.Name); fe != nil {
			return bad(fe.Field, fe.Message)
		}
		if st.Error != "" && len(st.Result) > 0 && string(st.Result) != "null" {
			return bad(fmt.Sprintf("steps[%d]", i), "has both a result and an error")
		}
	}
	n := 0
	for _, set := range []bool{d.Sleep != nil, d.Wait != nil, d.Child != nil, d.Result != nil} {
		if set {
			n++
		}
	}
	switch {
	case n > 1:
		return bad("", "at most one of sleep, wait, child and result")
	case n == 0 && len(d.Steps) == 0:
		return bad("", "records nothing and asks for nothing: want steps, sleep, wait, child or result")
	case d.Child != nil && (task.CheckStepName("", d.Child.Name) != nil || len(d.Child.Name) > MaxChildName):
		return bad("child.name", fmt.Sprintf("%q must be 1 to %d letters, digits, '_', '.', ':' or '-'", task.Shorten(d.Child.Name, 80), MaxChildName))
	case d.Child != nil && len(d.Child.Request) == 0:
		return bad("child.request", "is required: the child's submit request")
	case d.Sleep != nil && (d.Sleep.Seconds == nil) == (d.Sleep.Until == nil):
		return bad("sleep", "want one of seconds and until")
	case d.Sleep != nil && d.Sleep.Seconds != nil && (*d.Sleep.Seconds < 0 || *d.Sleep.Seconds > maxSleepSeconds):
		return bad("sleep.seconds", fmt.Sprintf("must be 0 to %d", int64(maxSleepSeconds)))
	case d.Sleep != nil && d.Sleep.Name != "" && task.CheckStepName("", d.Sleep.Name) != nil:
		return bad("sleep.name", task.CheckStepName("", d.Sleep.Name).Message)
	case d.Wait != nil && task.CheckStepName("", d.Wait.Signal) != nil:
		return bad("wait.signal", task.CheckStepName("", d.Wait.Signal).Message)
	case d.Wait != nil && (d.Wait.TimeoutSeconds <= 0 || d.Wait.TimeoutSeconds > maxSleepSeconds):
		return bad("wait.timeout_seconds", fmt.Sprintf("must be more than 0 and at most %d", int64(maxSleepSeconds)))
	}
	return nil
}

// maxSleepSeconds bounds a remote sleep or wait (ten years), so that the
// wake time is a representable time.
const maxSleepSeconds = 10 * 365 * 24 * 3600.0

// replayRecords meets every record in order, up to the first gap (a
// forgotten failed step, which runs again), as a Go handler replaying
// them would: so a sleep whose time came is passed, a wait whose signal
// arrived or timed out is consumed (and recorded so), and one still
// pending suspends the task again.
func (s *State) replayRecords(ctx context.Context) error {
	for _, rec := range s.Steps() {
		s.mu.Lock()
		next := s.next
		s.mu.Unlock()
		if rec.Seq < next { // met already: a child's wait, met with its submit
			continue
		}
		if rec.Seq > next {
			return nil
		}
		var failed *ChildFailedError
		var replayed *ReplayedError
		switch {
		case rec.Kind == task.StepRun && rec.Type == ChildType:
			if _, err := s.Child(ctx, rec.Name, task.Request{}); err != nil && !errors.As(err, &failed) && !errors.As(err, &replayed) {
				return err
			}
		case rec.Kind == task.StepSleep:
			if err := s.Sleep(ctx, rec.Name, *rec.Until); err != nil {
				return err
			}
		case rec.Kind == task.StepWait || rec.Kind == task.StepSignal:
			if _, err := s.WaitSignal(ctx, rec.Name, 0); err != nil && !errors.Is(err, ErrSignalTimeout) {
				return err
			}
		default:
			if _, _, _, err := s.take(rec.Kind, rec.Name, rec.Type); err != nil {
				return err
			}
		}
	}
	return nil
}

// records are s's records as a remote handler's request carries them,
// results read from the blob store where they are kept there (once per
// attempt: the calls of one attempt share them).
func (s *State) records(ctx context.Context) (Records, error) {
	var r Records
	for _, st := range s.Steps() {
		rs := RemoteStep{Seq: st.Seq, Name: st.Name, Kind: st.Kind, Error: st.Error, Until: st.Until, Signal: st.Signal, TimedOut: st.TimedOut}
		s.mu.Lock()
		cached := s.fetched[st.Seq]
		s.mu.Unlock()
		switch {
		case st.ResultRef == "":
			rs.Result = st.Result
		case cached != nil:
			rs.Result = cached
		default:
			res, err := s.result(ctx, st)
			if err != nil {
				return r, fmt.Errorf("read result of step %q: %w", st.Name, err)
			}
			rs.Result = res
			s.mu.Lock()
			if s.fetched == nil {
				s.fetched = map[int]json.RawMessage{}
			}
			s.fetched[st.Seq] = res
			s.mu.Unlock()
		}
		r.Steps = append(r.Steps, rs)
	}
	s.mu.Lock()
	for _, sg := range s.signals {
		r.Signals = append(r.Signals, sg)
	}
	s.mu.Unlock()
	slices.SortFunc(r.Signals, func(a, b task.Signal) int { return strings.Compare(a.Name, b.Name) })
	return r, nil
}
