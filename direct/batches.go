package direct

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/internal/api/answer"
	"github.com/triagehq/triage/internal/flow"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/submit"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

var _ triage.Transport = (*Transport)(nil)

// The batch calls run the API's steps (internal/api/workflows.go) on the
// same flow and submit service: check the member count (flow.CheckMembers),
// create the head, submit the members with their batch id as a batch
// submit does, seal, and read the progress.

// CreateBatch implements triage.Transport as POST /batches does.
func (d *Transport) CreateBatch(ctx context.Context, r triage.BatchCreate) (*triage.Batch, error) {
	if fe := flow.CheckMembers(len(r.Tasks), true, r.Open); fe != nil {
		return nil, fe.APIError("")
	}
	h, err := d.flow.CreateBatch(ctx, r.OnComplete, d.known)
	var fe *task.FieldError
	if errors.As(err, &fe) {
		return nil, fe.APIError("")
	}
	if err != nil {
		return nil, internal("create batch", err)
	}
	return d.addMembers(ctx, h.ID, r.Tasks, !r.Open)
}

// AddToBatch implements triage.Transport as POST /batches/{id}/tasks
// does.
func (d *Transport) AddToBatch(ctx context.Context, id string, rs []triage.SubmitRequest) (*triage.Batch, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	if fe := flow.CheckMembers(len(rs), false, false); fe != nil {
		return nil, fe.APIError("")
	}
	return d.addMembers(ctx, id, rs, false)
}

func (d *Transport) addMembers(ctx context.Context, id string, rs []triage.SubmitRequest, seal bool) (*triage.Batch, error) {
	var items []triage.BatchResult
	if len(rs) > 0 {
		outs, e := d.submit.SubmitBatch(ctx, flow.MemberRequests(id, rs))
		if e != nil {
			return nil, answer.Error(e)
		}
		items = batchResults(outs)
	}
	if seal {
		if err := d.flow.Seal(ctx, id); err != nil {
			return nil, internal("seal batch", err)
		}
	}
	b, err := d.batch(ctx, id)
	if err != nil {
		return nil, err
	}
	b.Results = items
	return b, nil
}

// SealBatch implements triage.Transport as POST /batches/{id}/seal
// does.
func (d *Transport) SealBatch(ctx context.Context, id string) (*triage.Batch, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	if err := batchError(id, d.flow.Seal(ctx, id)); err != nil {
		return nil, err
	}
	return d.batch(ctx, id)
}

// Batch implements triage.Transport as GET /batches/{id} does.
func (d *Transport) Batch(ctx context.Context, id string) (*triage.Batch, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	return d.batch(ctx, id)
}

func (d *Transport) batch(ctx context.Context, id string) (*triage.Batch, error) {
	b, err := d.flow.Batch(ctx, id)
	if err := batchError(id, err); err != nil {
		return nil, err
	}
	return b, nil
}

// batchError is the API's answer to a failed batch call (batchError in
// internal/api).
func batchError(id string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrBatchNotFound):
		return &triage.Error{Status: http.StatusNotFound, Code: triagetype.CodeNotFound, Field: "id", Message: fmt.Sprintf("no batch with id %q", id)}
	}
	return internal("batch", err)
}

// batchResults are the members' outcomes as the API's batch endpoints
// give them.
func batchResults(outs []submit.Outcome) []triage.BatchResult {
	items := make([]triage.BatchResult, len(outs))
	for i, o := range outs {
		items[i] = triage.BatchResult{Index: i, Status: answer.OutcomeStatus(o)}
		if o.Task != nil {
			items[i].Task = o.Task.Public()
		}
		if o.Err != nil {
			items[i].Error = &triage.ErrorDetail{Code: o.Err.Code, Message: o.Err.Message, Field: o.Err.Field}
		}
	}
	return items
}
