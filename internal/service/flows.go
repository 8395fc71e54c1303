package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/triagehq/triage/internal/fault"
	"github.com/triagehq/triage/internal/flow"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/submit"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

func (s *Service) flows(what string) (Flow, error) {
	if s.d.Flow == nil {
		return nil, fault.NotImplemented(what + " are not enabled on this server")
	}
	return s.d.Flow, nil
}

// SubmitWorkflow validates workflow r whole and records it; created is
// false when r's idempotency key named an earlier workflow, which comes
// back. The key reused for a different workflow is ErrConflict naming
// idempotency_key.
func (s *Service) SubmitWorkflow(ctx context.Context, r triagetype.WorkflowRequest) (*triagetype.Workflow, bool, error) {
	fl, err := s.flows("workflows")
	if err != nil {
		return nil, false, err
	}
	out, err := fl.SubmitWorkflow(ctx, &r, s.known)
	var we *flow.WorkflowError
	switch {
	case errors.As(err, &we):
		return nil, false, we.Fault()
	case errors.Is(err, flow.ErrKeyReused):
		return nil, false, fault.Conflict("idempotency_key", "idempotency_key: "+err.Error(), nil)
	case err != nil:
		return nil, false, internal("submit workflow", err)
	}
	return out.Workflow, out.Created, nil
}

// Workflow reads workflow id with its progress and every node's status.
func (s *Service) Workflow(ctx context.Context, id string) (*triagetype.Workflow, error) {
	fl, err := s.flows("workflows")
	if err != nil {
		return nil, err
	}
	if err := CheckID(id); err != nil {
		return nil, err
	}
	w, err := fl.Workflow(ctx, id)
	if errors.Is(err, store.ErrBatchNotFound) {
		return nil, fault.NotFound("id", fmt.Sprintf("no workflow with id %q", id))
	}
	if err != nil {
		return nil, internal("read workflow", err)
	}
	return w, nil
}

// CreateBatch creates a batch with r.Tasks as its first members (at most
// MaxBatch) and r.OnComplete as its callback, sealed unless r.Open; each
// member's outcome is in the batch's Results.
func (s *Service) CreateBatch(ctx context.Context, r triagetype.BatchCreate) (*triagetype.Batch, error) {
	fl, err := s.flows("batches")
	if err != nil {
		return nil, err
	}
	if fe := flow.CheckMembers(len(r.Tasks), true, r.Open); fe != nil {
		return nil, fe.Fault("")
	}
	h, err := fl.CreateBatch(ctx, r.OnComplete, s.known)
	var fe *task.FieldError
	if errors.As(err, &fe) {
		return nil, fe.Fault("")
	}
	if err != nil {
		return nil, internal("create batch", err)
	}
	return s.addMembers(ctx, fl, h.ID, r.Tasks, !r.Open)
}

// AddToBatch adds members (1 to MaxBatch) to open batch id; a member of a
// sealed or unknown batch is refused in its Results item.
func (s *Service) AddToBatch(ctx context.Context, id string, rs []triagetype.SubmitRequest) (*triagetype.Batch, error) {
	fl, err := s.flows("batches")
	if err != nil {
		return nil, err
	}
	if err := CheckID(id); err != nil {
		return nil, err
	}
	if fe := flow.CheckMembers(len(rs), false, false); fe != nil {
		return nil, fe.Fault("")
	}
	return s.addMembers(ctx, fl, id, rs, false)
}

func (s *Service) addMembers(ctx context.Context, fl Flow, id string, rs []triagetype.SubmitRequest, seal bool) (*triagetype.Batch, error) {
	var items []triagetype.BatchResult
	if len(rs) > 0 {
		outs, e := s.submit.SubmitBatch(ctx, flow.MemberRequests(id, rs))
		if e != nil {
			return nil, e
		}
		items = submit.Results(outs)
	}
	if seal {
		if err := fl.Seal(ctx, id); err != nil {
			return nil, internal("seal batch", err)
		}
	}
	b, err := batch(ctx, fl, id)
	if err != nil {
		return nil, err
	}
	b.Results = items
	return b, nil
}

// SealBatch closes batch id to new members; sealing a sealed or completed
// batch changes nothing.
func (s *Service) SealBatch(ctx context.Context, id string) (*triagetype.Batch, error) {
	fl, err := s.flows("batches")
	if err != nil {
		return nil, err
	}
	if err := CheckID(id); err != nil {
		return nil, err
	}
	if err := batchFault(id, fl.Seal(ctx, id)); err != nil {
		return nil, err
	}
	return batch(ctx, fl, id)
}

// Batch reads batch id: its state and progress.
func (s *Service) Batch(ctx context.Context, id string) (*triagetype.Batch, error) {
	fl, err := s.flows("batches")
	if err != nil {
		return nil, err
	}
	if err := CheckID(id); err != nil {
		return nil, err
	}
	return batch(ctx, fl, id)
}

func batch(ctx context.Context, fl Flow, id string) (*triagetype.Batch, error) {
	b, err := fl.Batch(ctx, id)
	if err := batchFault(id, err); err != nil {
		return nil, err
	}
	return b, nil
}

func batchFault(id string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrBatchNotFound):
		return fault.NotFound("id", fmt.Sprintf("no batch with id %q", id))
	}
	return internal("batch", err)
}
