package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/internal/durable"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/task"
)

// ChildFailedError is what Child returns when the child task did not
// complete (it was dead-lettered or cancelled): its id, status and error
// message. Match it with errors.As; it is permanent.
type ChildFailedError = durable.ChildFailedError

// ErrNoChildren is Child's error in a consumer that cannot submit tasks.
var ErrNoChildren = durable.ErrNoSpawner

// Child submits req as a child task of t, once per task, under the step
// name (at most 58 characters: its signal is "child:<name>"), and returns
// the child's result, decoded into R, once the child completed. It is a
// step: the submit is idempotent on it (the child's idempotency key is
// derived from t's id and name, so an attempt that died after submitting
// makes no second child), and a later attempt gets the same child.
//
// While the child runs, Child returns an error the handler must return,
// as WaitSignal does: the parent waits holding no slot and no message
// until the child reaches a terminal status, whose write delivers the
// outcome to the parent as the signal "child:<name>" and wakes it. A
// child that fails (dead-lettered) or is cancelled is a
// *ChildFailedError. Every 6 hours without the outcome the parent wakes
// and reads the child itself, so an outcome lost to a crash delays the
// parent by at most that.
//
// Cost on AWS: the child's submit (a task's writes), one UpdateItem to
// mark it, the step record; its outcome is one signal write on the
// parent plus the parent's wake (a SendMessage and an UpdateItem).
func Child[R any](ctx context.Context, t *Task, name string, req triage.SubmitRequest) (R, error) {
	var zero R
	if fe := task.CheckStepName("name", name); fe != nil {
		return zero, handler.Permanent(fmt.Errorf("child: %w", fe))
	}
	raw, err := t.durable().Child(ctx, name, task.Request(req))
	if err != nil {
		if _, suspend := durable.SuspendOf(err); suspend || !handler.Retriable(err) {
			return zero, err
		}
		var failed *ChildFailedError
		var replayed *durable.ReplayedError
		var fe *task.FieldError
		if errors.As(err, &failed) || errors.As(err, &replayed) || errors.As(err, &fe) ||
			errors.Is(err, ErrNoChildren) {
			return zero, handler.Permanent(err)
		}
		return zero, err
	}
	var v R
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &v); err != nil {
			return zero, handler.Permanent(fmt.Errorf("child %q: result does not decode into %T: %w", name, v, err))
		}
	}
	return v, nil
}
