package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/triagehq/triage/internal/task"
)

// ErrWrongState is returned when an operation does not apply to the task's
// status (cancelling a finished task, deleting a running one).
var ErrWrongState = errors.New("operation not allowed in the task's status")

// StateError names the status that refused the operation.
type StateError struct {
	ID     string
	Status task.Status
	Op     string
}

func (e *StateError) Error() string {
	return fmt.Sprintf("cannot %s task %s: it is %s", e.Op, e.ID, e.Status)
}

// Unwrap lets errors.Is match ErrWrongState.
func (e *StateError) Unwrap() error { return ErrWrongState }

// Cancel cancels a task that has not finished. A scheduled, queued or
// retrying task becomes cancelled at once (its message, if any, is dropped
// when received); an executing task gets a cancel request, which its
// worker's heartbeat sees and honours. A finished task is a *StateError.
func (s *Store) Cancel(ctx context.Context, id string) (*task.Task, error) {
	for range 5 {
		t, err := s.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		var next *task.Task
		switch {
		case t.Status.Terminal():
			return t, &StateError{ID: id, Status: t.Status, Op: "cancel"}
		case t.Status == task.Executing:
			if t.CancelRequested {
				return t, nil
			}
			next, err = s.Touch(ctx, t, func(n *task.Task) { n.CancelRequested = true })
		default:
			now := s.now()
			next, err = s.Transition(ctx, t, task.Cancelled, func(n *task.Task) {
				n.CompletedAt = &now
				n.RetryAt = nil
			})
		}
		if errors.Is(err, ErrConflict) {
			continue // changed under us: look again
		}
		return next, err
	}
	return nil, fmt.Errorf("cancel task %s: %w (it kept changing)", id, ErrConflict)
}
