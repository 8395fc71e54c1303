package direct

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/internal/api/answer"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Submit implements triage.Transport: the API's submit service, in
// process (internal/submit), so the same request gets the same answer.
func (d *Transport) Submit(ctx context.Context, r triage.SubmitRequest) (*triage.Task, bool, error) {
	o := d.submit.Submit(ctx, task.Request(r))
	if o.Err != nil {
		return nil, false, answer.Error(o.Err)
	}
	return o.Task.Public(), o.Created, nil
}

// SubmitBatch implements triage.Transport. Like the API, it answers every
// item on its own and sends the accepted ones in batches per priority; an
// item repeating an idempotency key gets the first task.
func (d *Transport) SubmitBatch(ctx context.Context, rs []triage.SubmitRequest) ([]triage.BatchResult, error) {
	reqs := make([]task.Request, len(rs))
	for i, r := range rs {
		reqs[i] = task.Request(r)
	}
	outs, e := d.submit.SubmitBatch(ctx, reqs)
	if e != nil {
		return nil, answer.Error(e)
	}
	res := make([]triage.BatchResult, len(outs))
	for i, o := range outs {
		res[i] = triage.BatchResult{Index: i, Status: answer.OutcomeStatus(o)}
		if o.Err != nil {
			res[i].Error = &triage.ErrorDetail{Code: o.Err.Code, Message: o.Err.Message, Field: o.Err.Field}
		} else {
			res[i].Task = o.Task.Public()
		}
	}
	return res, nil
}

// Get implements triage.Transport.
func (d *Transport) Get(ctx context.Context, id string) (*triage.Task, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	t, err := d.store.Get(ctx, id)
	if err != nil {
		return nil, taskError("get task", id, err)
	}
	if err := d.store.LoadBodies(ctx, t); err != nil { // as the API's GET does
		return nil, taskError("read the payload or result of task", id, err)
	}
	return t.Public(), nil
}

// List implements triage.Transport.
func (d *Transport) List(ctx context.Context, p triage.ListParams) (*triage.TaskPage, error) {
	f := store.ListFilter{Type: p.Type}
	if err := checkType(p.Type, "type"); err != nil {
		return nil, err
	}
	if p.Status != "" {
		st, err := triagetype.ParseStatus(string(p.Status))
		if err != nil {
			return nil, invalid("status", err.Error())
		}
		f.Status = st
	}
	if p.Priority != "" {
		pr, err := triagetype.ParsePriority(string(p.Priority))
		if err != nil {
			return nil, invalid("priority", err.Error())
		}
		f.Priority = pr
	}
	limit, err := listLimit(p.Limit)
	if err != nil {
		return nil, err
	}
	ts, next, err := d.store.List(ctx, f, limit, p.Cursor)
	if errors.Is(err, store.ErrBadCursor) {
		return nil, invalid("cursor", "not a cursor from next_cursor")
	}
	if err != nil {
		return nil, internal("list tasks", err)
	}
	page := &triage.TaskPage{Tasks: make([]triage.Task, len(ts)), NextCursor: next}
	for i, t := range ts {
		page.Tasks[i] = *t.Public()
	}
	return page, nil
}

// listLimit reads a page size as the HTTP client sends it: 0 or less is
// not sent, so the server's default applies.
func listLimit(n int) (int, error) {
	switch {
	case n <= 0:
		return triagetype.DefaultListLimit, nil
	case n > triagetype.MaxListLimit:
		return 0, invalid("limit", fmt.Sprintf("must be a whole number from 1 to %d", triagetype.MaxListLimit))
	}
	return n, nil
}

// Cancel implements triage.Transport.
func (d *Transport) Cancel(ctx context.Context, id string) (*triage.Task, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	t, err := d.store.Cancel(ctx, id)
	if err != nil {
		return nil, taskError("cancel task", id, err)
	}
	return t.Public(), nil
}

// Retry implements triage.Transport.
func (d *Transport) Retry(ctx context.Context, id string) (*triage.Task, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	// Through the DLQ tools: the task's DLQ copy goes with its dead_letter
	// status (package deadletter), as on the API.
	t, err := d.dlq.Retry(ctx, id)
	if err != nil {
		return nil, taskError("retry task", id, err)
	}
	return t.Public(), nil
}

// Delete implements triage.Transport.
func (d *Transport) Delete(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	t, err := d.store.Get(ctx, id)
	if err != nil {
		return taskError("delete task", id, err)
	}
	if !t.Status.Terminal() {
		return taskError("delete task", id, &store.StateError{ID: t.ID, Status: t.Status, Op: "delete"})
	}
	return taskError("delete task", id, d.dlq.Delete(ctx, t))
}

// Cleanup implements triage.Transport.
func (d *Transport) Cleanup(ctx context.Context, olderThan time.Time) (int, error) {
	// The API reads older_than to the second, as the HTTP client sends it.
	n, err := d.dlq.Cleanup(ctx, olderThan.Truncate(time.Second)) // the dead ones' DLQ copies go too
	if err != nil {
		return n, internal("cleanup", err)
	}
	return n, nil
}
