package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// ErrWrongState is returned when an operation does not apply to the task's
// status (cancelling a finished task, deleting a running one).
var ErrWrongState = errors.New("operation not allowed in the task's status")

// StateError names the status that refused the operation.
type StateError struct {
	ID     string
	Status triagetype.Status
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
		case t.Status == triagetype.Executing:
			if t.CancelRequested {
				return t, nil
			}
			next, err = s.Touch(ctx, t, func(n *task.Task) { n.CancelRequested = true })
		default:
			now := s.now()
			next, err = s.Transition(ctx, t, triagetype.Cancelled, func(n *task.Task) {
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

// CancelRequested reports whether task id has a cancel request. It is the
// running worker's cheap, frequent check between heartbeats: one
// eventually consistent read of a single attribute (half a read unit per
// 4 KB of item), so a cancel reaches a running handler within about a
// second plus replication lag. A task that no longer exists reads as not
// cancelled; the worker's next write finds out what happened to it.
func (s *Store) CancelRequested(ctx context.Context, id string) (bool, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: taskKey(id),
		ProjectionExpression: aws.String("cancel_requested"),
	})
	if err != nil {
		return false, fmt.Errorf("read cancel request of task %s: %w", id, err)
	}
	v, ok := out.Item["cancel_requested"].(*types.AttributeValueMemberBOOL)
	return ok && v.Value, nil
}
