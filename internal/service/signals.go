package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/triagehq/triage/internal/durable"
	"github.com/triagehq/triage/internal/fault"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Signaller delivers signals (*store.Store).
type Signaller interface {
	Signal(ctx context.Context, id string, sig task.Signal) (*task.Task, error)
}

// Waker re-dispatches a task now (*enqueue.Enqueuer).
type Waker interface {
	Redispatch(ctx context.Context, cur *task.Task, to triagetype.Status, p triagetype.Priority, delay time.Duration, apply func(*task.Task)) (*task.Task, error)
}

// Signal delivers signal name with its JSON payload to task id, and wakes
// the task when it waits for that signal. The rules:
//
//   - name is 1 to 64 letters, digits, '_', '.', ':' or '-', and does
//     not start with "child:", reserved for child tasks' outcomes (400
//     naming "name"); payload a JSON value of at most
//     task.MaxSignalBytes (400 naming "payload"); an unknown task is 404,
//     a finished one 409.
//   - The signal is kept on the task (one conditional UpdateItem) whether
//     or not the task waits for it yet: a wait that comes later consumes
//     it at once, so no wake-up is lost.
//   - The first signal of a name is kept: a second is 409 (conflict,
//     naming "name"), and does not change what the wait returns.
//   - A task that waits for it (status retrying or queued with
//     suspended.signal = name) is re-dispatched at once with a conditional
//     write on its version, so however many wakers race (this signal, the
//     consumer that parked it, the promoter at the timeout), it runs once.
//
// It returns the task as it stands after the signal.
func (s *Service) Signal(ctx context.Context, id, name string, payload json.RawMessage) (*task.Task, error) {
	if err := CheckID(id); err != nil {
		return nil, err
	}
	if fe := task.CheckStepName("name", name); fe != nil {
		return nil, fe.Fault("")
	}
	if durable.ReservedSignal(name) {
		return nil, (&task.FieldError{Field: "name", Message: fmt.Sprintf("%q is reserved: a child task's outcome reaches its parent as a signal child:<step>", task.Shorten(name, 80))}).Fault("")
	}
	if fe := task.CheckSignalPayload(payload); fe != nil {
		return nil, fe.Fault("")
	}
	sg, ok := s.d.Store.(Signaller)
	if !ok {
		return nil, fault.NotImplemented("signals")
	}
	t, err := sg.Signal(ctx, id, task.Signal{Name: name, Payload: payload, At: s.d.Store.Now().UTC()})
	var ce *store.ConflictError
	switch {
	case errors.Is(err, store.ErrSignalExists):
		return nil, fault.Conflict("name", fmt.Sprintf("task %s already has signal %q; the first signal of a name is kept", id, name), err)
	case errors.As(err, &ce) && ce.Current != nil:
		return nil, fault.Conflict("", fmt.Sprintf("task %s is %s: a finished task takes no signals", id, ce.Current.Status), err)
	case err != nil:
		return nil, taskFault("signal task", id, err)
	}
	if w, ok := s.d.Enqueuer.(Waker); ok && waitsFor(t, name) {
		if woken, err := w.Redispatch(ctx, t, triagetype.Queued, t.EffectivePriority, 0, func(n *task.Task) { n.RetryAt = nil }); err == nil {
			t = woken
		} else if !errors.Is(err, store.ErrConflict) {
			// The signal is kept: the wait consumes it when the task wakes
			// at its timeout, or the promoter's recovery re-sends it.
			s.log.Warn("signal kept, but waking the task failed", "task_id", id, "signal", name, "error", err)
		}
	}
	return t, nil
}

// waitsFor reports whether t is suspended waiting for signal name.
func waitsFor(t *task.Task, name string) bool {
	if t.Suspend == nil || t.Suspend.Signal != name {
		return false
	}
	return t.Status == triagetype.Retrying || t.Status == triagetype.Queued
}
