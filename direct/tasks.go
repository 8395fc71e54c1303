package direct

import (
	"context"
	"encoding/json"
	"time"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/internal/service"
	"github.com/triagehq/triage/internal/submit"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Each call is the service's operation, with its input as the HTTP
// client would send it: a page size of 0 or less, or a replay limit of
// 0, is not sent, and a cleanup's cut is sent to the second.

// Submit implements triage.Transport.
func (d *Transport) Submit(ctx context.Context, r triage.SubmitRequest) (*triage.Task, bool, error) {
	o := d.svc.Submit(ctx, task.Request(r))
	if o.Err != nil {
		return nil, false, public(o.Err)
	}
	return o.Task.Public(), o.Created, nil
}

// SubmitBatch implements triage.Transport.
func (d *Transport) SubmitBatch(ctx context.Context, rs []triage.SubmitRequest) ([]triagetype.BatchResult, error) {
	reqs := make([]task.Request, len(rs))
	for i, r := range rs {
		reqs[i] = task.Request(r)
	}
	outs, e := d.svc.SubmitBatch(ctx, reqs)
	if e != nil {
		return nil, public(e)
	}
	return submit.Results(outs), nil
}

// Get implements triage.Transport.
func (d *Transport) Get(ctx context.Context, id string) (*triage.Task, error) {
	t, err := d.svc.Get(ctx, id, false)
	if err != nil {
		return nil, public(err)
	}
	return t.Public(), nil
}

// List implements triage.Transport.
func (d *Transport) List(ctx context.Context, p triage.ListParams) (*triagetype.TaskPage, error) {
	q := service.ListQuery{Type: p.Type, Priority: string(p.Priority), Suspended: p.Suspended, Limit: max(p.Limit, 0), Cursor: p.Cursor}
	if p.Status != "" {
		q.Statuses = []string{string(p.Status)}
	}
	ts, next, err := d.svc.List(ctx, q)
	if err != nil {
		return nil, public(err)
	}
	page := &triagetype.TaskPage{Tasks: make([]triage.Task, len(ts)), NextCursor: next}
	for i, t := range ts {
		page.Tasks[i] = *t.Public()
	}
	return page, nil
}

// Cancel implements triage.Transport.
func (d *Transport) Cancel(ctx context.Context, id string) (*triage.Task, error) {
	return publicTask(d.svc.Cancel(ctx, id))
}

// Retry implements triage.Transport.
func (d *Transport) Retry(ctx context.Context, id string) (*triage.Task, error) {
	return publicTask(d.svc.Retry(ctx, id))
}

func publicTask(t *task.Task, err error) (*triage.Task, error) {
	if err != nil {
		return nil, public(err)
	}
	return t.Public(), nil
}

// Delete implements triage.Transport.
func (d *Transport) Delete(ctx context.Context, id string) error {
	return public(d.svc.Delete(ctx, id))
}

// StartCleanup implements triage.Transport.
func (d *Transport) StartCleanup(ctx context.Context, olderThan time.Time) (*triagetype.Cleanup, error) {
	return result(d.svc.Cleanup(ctx, olderThan.Truncate(time.Second)))
}

// GetCleanup implements triage.Transport.
func (d *Transport) GetCleanup(ctx context.Context, id string) (*triagetype.Cleanup, error) {
	return result(d.svc.GetCleanup(ctx, id))
}

// GetStats implements triage.Transport.
func (d *Transport) GetStats(ctx context.Context) (*triagetype.Stats, error) {
	return result(d.svc.Stats(ctx))
}

// ListWorkers implements triage.Transport.
func (d *Transport) ListWorkers(ctx context.Context) (*triagetype.WorkerList, error) {
	return result(d.svc.Workers(ctx))
}

// SetPaused implements triage.Transport.
func (d *Transport) SetPaused(ctx context.Context, typ string, paused bool) (*triagetype.ControlSettings, error) {
	return result(d.svc.SetPaused(ctx, typ, paused))
}

// SetLimits implements triage.Transport.
func (d *Transport) SetLimits(ctx context.Context, typ string, l triagetype.LimitsRequest) (*triagetype.ControlSettings, error) {
	return result(d.svc.SetLimits(ctx, typ, l.RateLimitPerSecond, l.MaxConcurrency))
}

// SetKeyControls implements triage.Transport.
func (d *Transport) SetKeyControls(ctx context.Context, key string, r triagetype.KeyControlsRequest) (*triagetype.ControlSettings, error) {
	return result(d.svc.SetKeyControls(ctx, key, r))
}

// ListControls implements triage.Transport.
func (d *Transport) ListControls(ctx context.Context) ([]triagetype.ControlSettings, error) {
	cs, err := d.svc.Controls(ctx)
	return cs, public(err)
}

// ListDLQ implements triage.Transport.
func (d *Transport) ListDLQ(ctx context.Context, priority triage.Priority, limit int) ([]triagetype.DLQMessage, error) {
	msgs, _, err := d.svc.DLQ(ctx, service.DLQQuery{Priority: string(priority), Limit: max(limit, 0)})
	if err != nil {
		return nil, public(err)
	}
	return msgs, nil
}

// ReplayDLQ implements triage.Transport.
func (d *Transport) ReplayDLQ(ctx context.Context, r triagetype.ReplayRequest) (*triagetype.ReplayResult, error) {
	sel := service.DLQSelection{Priority: string(r.Priority), Type: r.Type}
	if r.Limit != 0 {
		sel.Limit = &r.Limit
	}
	return result(d.svc.ReplayDLQ(ctx, sel))
}

// SubmitWorkflow implements triage.Transport.
func (d *Transport) SubmitWorkflow(ctx context.Context, r triage.WorkflowRequest) (*triagetype.Workflow, bool, error) {
	w, created, err := d.svc.SubmitWorkflow(ctx, r)
	if err != nil {
		return nil, false, public(err)
	}
	return w, created, nil
}

// GetWorkflow implements triage.Transport.
func (d *Transport) GetWorkflow(ctx context.Context, id string) (*triagetype.Workflow, error) {
	return result(d.svc.Workflow(ctx, id))
}

// CreateBatch implements triage.Transport.
func (d *Transport) CreateBatch(ctx context.Context, r triage.BatchCreate) (*triagetype.Batch, error) {
	return result(d.svc.CreateBatch(ctx, r))
}

// AddToBatch implements triage.Transport.
func (d *Transport) AddToBatch(ctx context.Context, id string, rs []triage.SubmitRequest) (*triagetype.Batch, error) {
	return result(d.svc.AddToBatch(ctx, id, rs))
}

// SealBatch implements triage.Transport.
func (d *Transport) SealBatch(ctx context.Context, id string) (*triagetype.Batch, error) {
	return result(d.svc.SealBatch(ctx, id))
}

// GetBatch implements triage.Transport.
func (d *Transport) GetBatch(ctx context.Context, id string) (*triagetype.Batch, error) {
	return result(d.svc.Batch(ctx, id))
}

// PutSchedule implements triage.Transport.
func (d *Transport) PutSchedule(ctx context.Context, s triage.Schedule) (*triage.Schedule, bool, error) {
	sc, created, err := d.svc.PutSchedule(ctx, s)
	if err != nil {
		return nil, false, public(err)
	}
	return sc, created, nil
}

// GetSchedule implements triage.Transport.
func (d *Transport) GetSchedule(ctx context.Context, name string) (*triage.Schedule, error) {
	return result(d.svc.GetSchedule(ctx, name))
}

// ListSchedules implements triage.Transport.
func (d *Transport) ListSchedules(ctx context.Context, limit int, cursor string) (*triagetype.SchedulePage, error) {
	return result(d.svc.ListSchedules(ctx, limit, cursor))
}

// DeleteSchedule implements triage.Transport.
func (d *Transport) DeleteSchedule(ctx context.Context, name string) error {
	return public(d.svc.DeleteSchedule(ctx, name))
}

// SetSchedulePaused implements triage.Transport.
func (d *Transport) SetSchedulePaused(ctx context.Context, name string, paused bool) (*triage.Schedule, error) {
	return result(d.svc.SetSchedulePaused(ctx, name, paused))
}

// Signal implements triage.Signaller.
func (d *Transport) Signal(ctx context.Context, id, name string, payload json.RawMessage) (*triage.Task, error) {
	return publicTask(d.svc.Signal(ctx, id, name, payload))
}
