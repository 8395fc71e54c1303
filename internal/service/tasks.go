package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/triagehq/triage/internal/fault"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/submit"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Submit accepts or refuses one task (internal/submit).
func (s *Service) Submit(ctx context.Context, r task.Request) submit.Outcome {
	return s.submit.Submit(ctx, r)
}

// SubmitBatch answers each of 1 to triagetype.MaxBatch tasks on its own;
// only a batch of the wrong size is refused whole.
func (s *Service) SubmitBatch(ctx context.Context, rs []task.Request) ([]submit.Outcome, *fault.Error) {
	return s.submit.SubmitBatch(ctx, rs)
}

// CheckID refuses an id that could never name a task, batch or workflow
// (invalid_field naming "id").
func CheckID(id string) error {
	if fe := task.CheckID(id); fe != nil {
		return fe.Fault("")
	}
	return nil
}

// CheckType refuses a malformed task type parameter (name is the
// parameter); empty is no type.
func CheckType(typ, name string) error {
	if typ == "" {
		return nil
	}
	if err := task.ValidateType(typ); err != nil {
		return fault.Invalid(name, err.Error())
	}
	return nil
}

// Get reads task id, with a payload or result kept off its record unless
// omitBodies.
func (s *Service) Get(ctx context.Context, id string, omitBodies bool) (*task.Task, error) {
	if err := CheckID(id); err != nil {
		return nil, err
	}
	t, err := s.d.Store.Get(ctx, id)
	if err != nil {
		return nil, taskFault("get task", id, err)
	}
	if !omitBodies {
		if err := s.d.Store.LoadBodies(ctx, t); err != nil {
			return nil, taskFault("read the payload or result of task "+id, id, err)
		}
	}
	return t, nil
}

// ListQuery filters and pages a task listing; zero values mean no filter.
type ListQuery struct {
	Type string
	// Statuses match a task in any of them (names, as the caller gave them).
	Statuses []string
	// Priority filters on the effective priority.
	Priority string
	// Suspended keeps only tasks waiting durably: "any", "sleep" or
	// "wait" (a signal wait). Such tasks are retrying, so with no status
	// given the listing walks the retrying tasks only.
	Suspended string
	// Limit is the page size: 0 is triagetype.DefaultListLimit; anything
	// else must be from 1 to triagetype.MaxListLimit.
	Limit  int
	Cursor string
}

// List reads one page of tasks, newest first, and the next page's cursor.
func (s *Service) List(ctx context.Context, q ListQuery) ([]*task.Task, string, error) {
	f := store.ListFilter{Type: q.Type}
	if err := CheckType(q.Type, "type"); err != nil {
		return nil, "", err
	}
	for _, name := range q.Statuses {
		st, err := triagetype.ParseStatus(name)
		if err != nil {
			return nil, "", fault.Invalid("status", err.Error())
		}
		f.Statuses = appendNew(f.Statuses, st)
	}
	switch q.Suspended {
	case "":
	case store.SuspendedAny, triagetype.StepSleep, triagetype.StepWait:
		f.Suspended = q.Suspended
		if len(f.Statuses) == 0 {
			f.Statuses = []triagetype.Status{triagetype.Retrying}
		}
	default:
		return nil, "", fault.Invalid("suspended", fmt.Sprintf("must be %s, %s or %s", store.SuspendedAny, triagetype.StepSleep, triagetype.StepWait))
	}
	if q.Priority != "" {
		p, err := triagetype.ParsePriority(q.Priority)
		if err != nil {
			return nil, "", fault.Invalid("priority", err.Error())
		}
		f.Priority = p
	}
	limit, err := pageSize(q.Limit)
	if err != nil {
		return nil, "", err
	}
	ts, next, err := s.d.Store.List(ctx, f, limit, q.Cursor)
	if errors.Is(err, store.ErrBadCursor) {
		return nil, "", fault.Invalid("cursor", "not a cursor from next_cursor")
	}
	if err != nil {
		return nil, "", internal("list tasks", err)
	}
	if ts == nil {
		ts = []*task.Task{}
	}
	return ts, next, nil
}

func appendNew[T comparable](s []T, v T) []T {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

// pageSize reads a page size: 0 is the default, else 1 to MaxListLimit.
func pageSize(n int) (int, error) {
	switch {
	case n == 0:
		return triagetype.DefaultListLimit, nil
	case n < 1 || n > triagetype.MaxListLimit:
		return 0, fault.Invalid("limit", fmt.Sprintf("must be a whole number from 1 to %d", triagetype.MaxListLimit))
	}
	return n, nil
}

// Cancel cancels a task that is not terminal; a terminal one is
// ErrConflict.
func (s *Service) Cancel(ctx context.Context, id string) (*task.Task, error) {
	if err := CheckID(id); err != nil {
		return nil, err
	}
	t, err := s.d.Store.Cancel(ctx, id)
	if err != nil {
		return nil, taskFault("cancel task", id, err)
	}
	return t, nil
}

// Retry puts a dead_letter task back on its queue, through the DLQ tools
// so that its DLQ copy goes with its dead_letter status; any other status
// is ErrConflict.
func (s *Service) Retry(ctx context.Context, id string) (*task.Task, error) {
	if err := CheckID(id); err != nil {
		return nil, err
	}
	t, err := s.d.DLQ.Retry(ctx, id)
	if err != nil {
		return nil, taskFault("retry task", id, err)
	}
	return t, nil
}

// Delete removes a task. Only a finished (terminal) task can be deleted:
// any other is ErrConflict. A dead task's DLQ copy goes with it.
func (s *Service) Delete(ctx context.Context, id string) error {
	if err := CheckID(id); err != nil {
		return err
	}
	t, err := s.d.Store.Get(ctx, id)
	if err != nil {
		return taskFault("delete task", id, err)
	}
	if !t.Status.Terminal() {
		return taskFault("delete task", id, &store.StateError{ID: t.ID, Status: t.Status, Op: "delete"})
	}
	return taskFault("delete task", id, s.d.DLQ.Delete(ctx, t))
}

// Cleanup starts a cleanup job that deletes every task that finished
// before olderThan (and the dead ones' DLQ copies), and returns it at
// once, running: the promoter does the work (package cleanup). While
// another cleanup runs, it is ErrConflict naming that one.
func (s *Service) Cleanup(ctx context.Context, olderThan time.Time) (*triagetype.Cleanup, error) {
	cl, ok := s.cleanups()
	if !ok {
		return nil, fault.NotImplemented("cleanup")
	}
	j, err := cl.StartCleanup(ctx, olderThan)
	var running *store.CleanupRunningError
	switch {
	case errors.As(err, &running):
		return nil, fault.Conflict("older_than", fmt.Sprintf("cleanup %s is running (tasks finished before %s, %d deleted so far); one runs at a time: follow it with GET /api/v1/cleanups/%s",
			running.Job.ID, running.Job.OlderThan.Format(time.RFC3339), running.Job.Deleted, running.Job.ID), err)
	case errors.Is(err, store.ErrCleanupRunning):
		return nil, fault.Conflict("older_than", "a cleanup is running; one runs at a time", err)
	case err != nil:
		return nil, internal("start cleanup", err)
	}
	return j.Public(), nil
}

// GetCleanup reads cleanup job id: how far it has got.
func (s *Service) GetCleanup(ctx context.Context, id string) (*triagetype.Cleanup, error) {
	if err := CheckID(id); err != nil {
		return nil, err
	}
	cl, ok := s.cleanups()
	if !ok {
		return nil, fault.NotImplemented("cleanup")
	}
	j, err := cl.CleanupJob(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, fault.NotFound("id", fmt.Sprintf("no cleanup with id %q", id))
	case err != nil:
		return nil, internal("read cleanup", err)
	}
	return j.Public(), nil
}

// cleanups is Deps.Cleanups, or the store when it keeps cleanup jobs.
func (s *Service) cleanups() (Cleanups, bool) {
	if s.d.Cleanups != nil {
		return s.d.Cleanups, true
	}
	c, ok := s.d.Store.(Cleanups)
	return c, ok
}

// taskFault is the fault of a failed operation on task id: ErrNotFound
// naming "id", ErrConflict when its status or a concurrent change does
// not allow it, else internal.
func taskFault(what, id string, err error) error {
	var se *store.StateError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound):
		return fault.NotFound("id", fmt.Sprintf("no task with id %q", id))
	case errors.As(err, &se):
		return fault.Conflict("", se.Error(), nil)
	case errors.Is(err, store.ErrConflict):
		return fault.Conflict("", "the task changed while this request ran; try again", err)
	}
	return internal(what, err)
}
