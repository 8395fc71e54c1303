package direct

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// prepare validates r as the API does (fields, then the deployment's
// types, then the queue's depth) and builds its task. prefix names a batch
// item's fields ("tasks[3].").
func (d *Transport) prepare(ctx context.Context, r *triage.SubmitRequest, now time.Time, prefix string) (*task.Task, *triage.Error) {
	req := (*task.Request)(r)
	if err := req.Validate(); err != nil {
		return nil, fieldError(err, prefix)
	}
	if fe := d.known.Check(req.Type); fe != nil {
		return nil, fieldError(fe, prefix)
	}
	t := req.NewTask(now, d.window)
	if err := d.pressure.Check(ctx, t.EffectivePriority); err != nil {
		e, _ := overloaded(err)
		return nil, e
	}
	return t, nil
}

// Submit implements triage.Transport.
func (d *Transport) Submit(ctx context.Context, r triage.SubmitRequest) (*triage.Task, bool, error) {
	t, e := d.prepare(ctx, &r, d.store.Now().UTC(), "")
	if e != nil {
		return nil, false, e
	}
	saved, created, err := d.enq.Submit(ctx, t)
	if err != nil {
		return nil, false, internal(fmt.Sprintf("submit a %q task", r.Type), err)
	}
	return saved.Public(), created, nil
}

// SubmitBatch implements triage.Transport. Like the API, it validates
// every item on its own and sends the accepted ones in batches per
// priority; an item repeating an idempotency key gets the first task.
func (d *Transport) SubmitBatch(ctx context.Context, rs []triage.SubmitRequest) ([]triage.BatchResult, error) {
	if len(rs) == 0 || len(rs) > triage.MaxBatch {
		return nil, invalid("tasks", fmt.Sprintf("must hold 1 to %d tasks, got %d", triage.MaxBatch, len(rs)))
	}
	out := make([]triage.BatchResult, len(rs))
	var ts []*task.Task
	var idx []int
	now := d.store.Now().UTC()
	for i := range rs {
		out[i].Index = i
		t, e := d.prepare(ctx, &rs[i], now, fmt.Sprintf("tasks[%d].", i))
		if e != nil {
			out[i].Status, out[i].Error = e.Status, &triage.ErrorDetail{Code: e.Code, Message: e.Message, Field: e.Field}
			continue
		}
		ts = append(ts, t)
		idx = append(idx, i)
	}
	for j, res := range d.enq.SubmitBatch(ctx, ts) {
		i := idx[j]
		switch {
		case res.Err != nil:
			e := internal("submit", res.Err)
			out[i].Status, out[i].Error = e.Status, &triage.ErrorDetail{Code: e.Code, Message: e.Message}
		case res.Created:
			out[i].Status, out[i].Task = http.StatusCreated, res.Task.Public()
		default:
			out[i].Status, out[i].Task = http.StatusOK, res.Task.Public()
		}
	}
	return out, nil
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
		st, err := task.ParseStatus(string(p.Status))
		if err != nil {
			return nil, invalid("status", err.Error())
		}
		f.Status = st
	}
	if p.Priority != "" {
		pr, err := task.ParsePriority(string(p.Priority))
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
	t, err := d.enq.Retry(ctx, d.store.Get, id)
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
	return taskError("delete task", id, d.store.Delete(ctx, t))
}

// Cleanup implements triage.Transport.
func (d *Transport) Cleanup(ctx context.Context, olderThan time.Time) (int, error) {
	// The API reads older_than to the second, as the HTTP client sends it.
	n, err := d.store.Cleanup(ctx, olderThan.Truncate(time.Second))
	if err != nil {
		return n, internal("cleanup", err)
	}
	return n, nil
}
