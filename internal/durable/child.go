package durable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Child tasks awaited durably. A step submits a child task once and the
// parent waits for it holding nothing, built on what tasks already have:
//
//   - The child's submit is a run step (kind run, type ChildType) whose
//     result is the child's id. It is idempotent on the step: the child's
//     idempotency key is ChildKey(parent, step), so an attempt that died
//     after the submit and before the step's record submits nothing new
//     and gets the same child.
//   - The child is marked as a parent (store.MarkParent, has_children), so
//     the write that moves it to a terminal status, whoever makes it (the
//     consumer, a cancel, the promoter's DLQ reconciliation), calls the
//     store's finish hook; there Notifier.Finished delivers the child's
//     outcome to the parent as the signal ChildSignal(step). MarkParent's
//     answer says whether the child had already finished: then the
//     submitter delivers it itself.
//   - The parent waits for that signal like any other (WaitSignal): a
//     signal that came before the wait is consumed at once, one that comes
//     while it waits wakes it, and the consumed signal is recorded, so a
//     replay returns the same outcome.
//   - The wait has no timeout, but every ChildRecheck without the signal
//     the parent wakes and reads the child (one GetItem): a crash between
//     the child's terminal write and its hook, which loses the signal,
//     delays the parent by at most ChildRecheck.

// ChildType is the result type recorded for a child's submit step.
const ChildType = "child"

// ChildRecheck is how long a parent waits for its child's signal before
// it reads the child itself, and waits again if it has not finished.
const ChildRecheck = 6 * time.Hour

// childKeyPrefix starts the idempotency key of a child task.
const childKeyPrefix = "triage.child:"

// childSignalPrefix starts the signal a child's outcome is delivered as.
const childSignalPrefix = "child:"

// MaxChildName is the longest name of a child step: its signal's name,
// childSignalPrefix and the name, must fit task.MaxNameBytes.
const MaxChildName = task.MaxNameBytes - len(childSignalPrefix)

// ChildKey is the idempotency key of the child that step of task parent
// submits.
func ChildKey(parent, step string) string { return childKeyPrefix + parent + ":" + step }

// ParseChildKey reads a ChildKey: the parent's id and the step's name.
func ParseChildKey(key string) (parent, step string, ok bool) {
	rest, ok := strings.CutPrefix(key, childKeyPrefix)
	if !ok {
		return "", "", false
	}
	parent, step, ok = strings.Cut(rest, ":")
	if !ok || parent == "" || step == "" {
		return "", "", false
	}
	return parent, step, true
}

// ChildSignal is the signal a child's outcome reaches step's wait as.
func ChildSignal(step string) string { return childSignalPrefix + step }

// ReservedSignal reports whether name is a child's outcome signal, which
// only a child's finish delivers: the API refuses it, so no caller can
// forge a child's outcome.
func ReservedSignal(name string) bool { return strings.HasPrefix(name, childSignalPrefix) }

// ChildOutcome is a finished child as its parent's wait gets it: its id
// and status, its result when it fits a signal (else ResultSize says how
// large it is, and the waiter reads it from the child), or its error.
type ChildOutcome struct {
	ID         string            `json:"id"`
	Status     triagetype.Status `json:"status"`
	Result     json.RawMessage   `json:"result,omitempty"`
	ResultSize int               `json:"result_size,omitempty"`
	Error      string            `json:"error,omitempty"`
}

// maxOutcomeResult leaves room in a signal's payload for the rest of a
// ChildOutcome (an id, a status, the field names).
const maxOutcomeResult = task.MaxSignalBytes - 256

// OutcomeOf is finished task t as its parent gets it.
func OutcomeOf(t *task.Task) ChildOutcome {
	o := ChildOutcome{ID: t.ID, Status: t.Status}
	if t.Error != nil {
		o.Error = task.Truncate(t.Error.Message, 1024)
	}
	if t.Status != triagetype.Completed {
		return o
	}
	o.ResultSize = max(t.ResultSize, len(t.Result))
	if t.ResultRef == "" && len(t.Result) <= maxOutcomeResult {
		o.Result = t.Result
	}
	return o
}

// ChildFailedError is what a child step returns when its child did not
// complete: dead-lettered or cancelled.
type ChildFailedError struct {
	Step    string
	ID      string
	Status  triagetype.Status
	Message string
}

func (e *ChildFailedError) Error() string {
	msg := fmt.Sprintf("child %q (task %s) is %s", e.Step, e.ID, e.Status)
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// Spawner submits a parent's children and reads their results (the
// consumer's, bound to the attempt's task).
type Spawner interface {
	// Spawn submits the child of step, idempotent on ChildKey(parent,
	// step), and marks it so its finish notifies the parent. done is its
	// outcome when it had already finished.
	Spawn(ctx context.Context, step string, r task.Request) (id string, done *ChildOutcome, err error)
	// ChildResult reads a completed child's result (one too large for
	// its outcome's signal).
	ChildResult(ctx context.Context, id string) (json.RawMessage, error)
	// ChildOutcome reads child id: its outcome once it finished, nil
	// while it has not.
	ChildOutcome(ctx context.Context, id string) (*ChildOutcome, error)
}

// ErrNoSpawner is a child step's error where nothing can submit tasks
// (a unit test's State without a Spawner).
var ErrNoSpawner = errors.New("child tasks need a consumer that can submit them")

// SetSpawner sets what submits s's children.
func (s *State) SetSpawner(sp Spawner) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spawner = sp
}

// Child meets the child step name: it submits the child r once (a run
// step recording its id), then waits for it (a signal wait of
// ChildSignal(name), re-checked every ChildRecheck), and returns its
// result once it completed, a *ChildFailedError once it failed or was
// cancelled, or a *SuspendError while it runs.
func (s *State) Child(ctx context.Context, name string, r task.Request) (json.RawMessage, error) {
	if len(name) > MaxChildName {
		return nil, fmt.Errorf("child step name %q is longer than %d", task.Shorten(name, 80), MaxChildName)
	}
	s.mu.Lock()
	sp := s.spawner
	s.mu.Unlock()
	raw, err := s.Run(ctx, name, ChildType, func(ctx context.Context) (json.RawMessage, error) {
		if sp == nil {
			return nil, ErrNoSpawner
		}
		id, done, err := sp.Spawn(ctx, name, r)
		if err != nil {
			return nil, err
		}
		if done != nil {
			if b, err := json.Marshal(done); err == nil {
				s.Deliver(task.Signal{Name: ChildSignal(name), Payload: b, At: s.now().UTC()})
			}
		}
		return json.Marshal(id)
	}, func(err error) bool { var fe *task.FieldError; return errors.As(err, &fe) })
	if err != nil {
		return nil, err
	}
	var id string
	if err := json.Unmarshal(raw, &id); err != nil {
		return nil, fmt.Errorf("child %q: recorded id %s: %w", name, raw, ErrNonDeterminism)
	}
	payload, err := s.awaitChild(ctx, ChildSignal(name), id, sp)
	if err != nil {
		return nil, err
	}
	var o ChildOutcome
	if err := json.Unmarshal(payload, &o); err != nil {
		return nil, fmt.Errorf("child %q: outcome %s: %w", name, task.Shorten(string(payload), 80), err)
	}
	if o.Status != triagetype.Completed {
		return nil, &ChildFailedError{Step: name, ID: o.ID, Status: o.Status, Message: o.Error}
	}
	if o.Result == nil && o.ResultSize > 0 {
		if sp == nil {
			return nil, ErrNoSpawner
		}
		return sp.ChildResult(ctx, o.ID)
	}
	return o.Result, nil
}

// awaitChild is WaitSignal for child id's outcome, signal name, with no
// timeout: each time its wake time (every ChildRecheck) comes without the
// signal it reads the child, consumes its outcome if it finished, and
// waits again otherwise.
func (s *State) awaitChild(ctx context.Context, name, id string, sp Spawner) (json.RawMessage, error) {
	seq, rec, ok, err := s.take(task.StepWait, name, "")
	if err != nil {
		return nil, err
	}
	if ok && rec.Kind == task.StepSignal { // consumed
		return s.result(ctx, rec)
	}
	now := s.now().UTC()
	s.mu.Lock()
	sg, arrived := s.signals[name]
	s.mu.Unlock()
	var payload json.RawMessage
	switch {
	case arrived:
		payload = sg.Payload
	case ok && !now.Before(*rec.Until) && sp != nil:
		o, err := sp.ChildOutcome(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("read child %s: %w", id, err)
		}
		if o != nil {
			if payload, err = json.Marshal(o); err != nil {
				return nil, err
			}
		}
	case ok:
		return nil, &SuspendError{WakeAt: *rec.Until, Signal: name}
	}
	if payload != nil {
		done := task.Step{Seq: seq, Name: name, Kind: task.StepSignal, Signal: name, Until: &now, Attempt: s.attempt, At: now, Result: payload, ResultSize: len(payload)}
		if err := s.record(ctx, done); err != nil {
			return nil, fmt.Errorf("record outcome of child %s: %w", id, err)
		}
		return payload, nil
	}
	until := now.Add(ChildRecheck)
	wait := task.Step{Seq: seq, Name: name, Kind: task.StepWait, Signal: name, Until: &until, Attempt: s.attempt, At: now}
	if err := s.record(ctx, wait); err != nil {
		return nil, fmt.Errorf("record wait for child %s: %w", id, err)
	}
	return nil, &SuspendError{WakeAt: until, Signal: name}
}

// Notifier delivers a finished child's outcome to its parent: the
// store's finish hook (store.OnFinish) calls Finished for every task with
// children that reaches a terminal status.
type Notifier struct {
	// Signal delivers a signal to a task (store.Store.Signal) and returns
	// the task as written.
	Signal func(ctx context.Context, id string, sg task.Signal) (*task.Task, error)
	// Redispatch re-dispatches a task (enqueue.Enqueuer.Redispatch), a
	// conditional write on its version: of racing wakers, one wins.
	Redispatch func(ctx context.Context, cur *task.Task, to triagetype.Status, p triagetype.Priority, delay time.Duration, apply func(*task.Task)) (*task.Task, error)
}

// Finished delivers t's outcome when t is a child task that reached a
// terminal status, and wakes the parent when it waits for it; it does
// nothing for any other task. Its errors wrap the store's: a second
// delivery (store.ErrSignalExists) and a lost race to wake
// (store.ErrConflict) are harmless.
func (n Notifier) Finished(ctx context.Context, t *task.Task) error {
	parent, step, ok := ParseChildKey(t.IdempotencyKey)
	if !ok || !t.Status.Terminal() || n.Signal == nil {
		return nil
	}
	b, err := json.Marshal(OutcomeOf(t))
	if err != nil {
		return err
	}
	name := ChildSignal(step)
	p, err := n.Signal(ctx, parent, task.Signal{Name: name, Payload: b, At: time.Now().UTC()})
	if err != nil {
		return fmt.Errorf("deliver child %s's outcome to task %s: %w", t.ID, parent, err)
	}
	if n.Redispatch == nil || p.Suspend == nil || p.Suspend.Signal != name || (p.Status != triagetype.Retrying && p.Status != triagetype.Queued) {
		return nil
	}
	if _, err := n.Redispatch(ctx, p, triagetype.Queued, p.EffectivePriority, 0, func(n *task.Task) { n.RetryAt = nil }); err != nil {
		return fmt.Errorf("wake task %s for its child %s: %w", parent, t.ID, err)
	}
	return nil
}
