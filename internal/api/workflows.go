package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/triagehq/triage/internal/api/answer"
	"github.com/triagehq/triage/internal/flow"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Flow submits and reads workflows and batches (*flow.Flow).
type Flow interface {
	SubmitWorkflow(ctx context.Context, r *triagetype.WorkflowRequest, known task.KnownTypes) (*flow.WorkflowOutcome, error)
	Workflow(ctx context.Context, id string) (*triagetype.Workflow, error)
}

// MaxWorkflowBody bounds a workflow submit's body: up to 1,000 nodes,
// inside what a synchronous Lambda invocation accepts (6 MB).
const MaxWorkflowBody = 6 << 20

func (s *Server) submitWorkflow(w http.ResponseWriter, r *http.Request) {
	if s.flow == nil {
		writeError(w, http.StatusNotImplemented, triagetype.CodeNotImplemented, "", "workflows are not enabled on this server")
		return
	}
	var req triagetype.WorkflowRequest
	if !decode(w, r, &req, MaxWorkflowBody) {
		return
	}
	out, err := s.flow.SubmitWorkflow(r.Context(), &req, task.NewKnownTypes(s.opt.KnownTypes))
	var we *flow.WorkflowError
	switch {
	case errors.As(err, &we):
		e := we.APIError()
		writeError(w, e.Status, e.Code, e.Field, e.Message)
		return
	case errors.Is(err, flow.ErrKeyReused):
		writeError(w, http.StatusConflict, triagetype.CodeConflict, "idempotency_key", "idempotency_key: "+err.Error())
		return
	case err != nil:
		s.internal(w, r, "submit workflow", err)
		return
	}
	status := http.StatusOK
	if out.Created {
		status = http.StatusCreated
	}
	writeJSON(w, status, out.Workflow)
}

func (s *Server) getWorkflow(w http.ResponseWriter, r *http.Request) {
	if s.flow == nil {
		writeError(w, http.StatusNotImplemented, triagetype.CodeNotImplemented, "", "workflows are not enabled on this server")
		return
	}
	id, ok := taskID(w, r)
	if !ok {
		return
	}
	wf, err := s.flow.Workflow(r.Context(), id)
	if errors.Is(err, store.ErrBatchNotFound) {
		writeError(w, http.StatusNotFound, triagetype.CodeNotFound, "id", fmt.Sprintf("no workflow with id %q", id))
		return
	}
	if err != nil {
		s.internal(w, r, "read workflow", err)
		return
	}
	writeJSON(w, http.StatusOK, wf)
}

// Batches. The API's Flow also creates, seals and reads batches.
type batchFlow interface {
	CreateBatch(ctx context.Context, onComplete *triagetype.SubmitRequest, known task.KnownTypes) (*store.BatchHead, error)
	Seal(ctx context.Context, id string) error
	Batch(ctx context.Context, id string) (*triagetype.Batch, error)
}

func (s *Server) batchFlow(w http.ResponseWriter) (batchFlow, bool) {
	bf, ok := s.flow.(batchFlow)
	if !ok {
		writeError(w, http.StatusNotImplemented, triagetype.CodeNotImplemented, "", "batches are not enabled on this server")
	}
	return bf, ok
}

// createBatch is POST /batches: a new batch, its first members (at most
// MaxBatch), sealed unless open is true.
func (s *Server) createBatch(w http.ResponseWriter, r *http.Request) {
	bf, ok := s.batchFlow(w)
	if !ok {
		return
	}
	var req triagetype.BatchCreate
	if !decode(w, r, &req, MaxBatchBody) {
		return
	}
	if fe := flow.CheckMembers(len(req.Tasks), true, req.Open); fe != nil {
		writeError(w, http.StatusBadRequest, triagetype.CodeInvalidField, fe.Field, fe.Error())
		return
	}
	h, err := bf.CreateBatch(r.Context(), req.OnComplete, task.NewKnownTypes(s.opt.KnownTypes))
	var fe *task.FieldError
	if errors.As(err, &fe) {
		e := fe.APIError("")
		writeError(w, e.Status, e.Code, e.Field, e.Message)
		return
	}
	if err != nil {
		s.internal(w, r, "create batch", err)
		return
	}
	s.addMembers(w, r, bf, h.ID, req.Tasks, !req.Open, http.StatusCreated)
}

// addToBatch is POST /batches/{id}/tasks: more members of an open batch.
func (s *Server) addToBatch(w http.ResponseWriter, r *http.Request) {
	bf, ok := s.batchFlow(w)
	if !ok {
		return
	}
	id, ok := taskID(w, r)
	if !ok {
		return
	}
	var req struct {
		Tasks []triagetype.SubmitRequest `json:"tasks"`
	}
	if !decode(w, r, &req, MaxBatchBody) {
		return
	}
	if fe := flow.CheckMembers(len(req.Tasks), false, false); fe != nil {
		writeError(w, http.StatusBadRequest, triagetype.CodeInvalidField, fe.Field, fe.Error())
		return
	}
	s.addMembers(w, r, bf, id, req.Tasks, false, http.StatusOK)
}

func (s *Server) addMembers(w http.ResponseWriter, r *http.Request, bf batchFlow, id string, rs []triagetype.SubmitRequest, seal bool, status int) {
	var items []triagetype.BatchResult
	if len(rs) > 0 {
		outs, e := s.submitter.SubmitBatch(r.Context(), flow.MemberRequests(id, rs))
		if e != nil {
			s.refuse(w, r, e)
			return
		}
		for i, o := range outs {
			item := triagetype.BatchResult{Index: i, Status: answer.OutcomeStatus(o)}
			if o.Task != nil {
				item.Task = o.Task.Public()
			}
			if o.Err != nil {
				item.Error = &triagetype.ErrorDetail{Code: o.Err.Code, Message: o.Err.Message, Field: o.Err.Field}
			}
			items = append(items, item)
		}
	}
	if seal {
		if err := bf.Seal(r.Context(), id); err != nil {
			s.internal(w, r, "seal batch", err)
			return
		}
	}
	b, err := bf.Batch(r.Context(), id)
	if s.batchError(w, r, id, err) {
		return
	}
	b.Results = items
	writeJSON(w, status, b)
}

func (s *Server) sealBatch(w http.ResponseWriter, r *http.Request) {
	bf, ok := s.batchFlow(w)
	if !ok {
		return
	}
	id, ok := taskID(w, r)
	if !ok {
		return
	}
	if s.batchError(w, r, id, bf.Seal(r.Context(), id)) {
		return
	}
	b, err := bf.Batch(r.Context(), id)
	if s.batchError(w, r, id, err) {
		return
	}
	writeJSON(w, http.StatusOK, b)
}

func (s *Server) getBatch(w http.ResponseWriter, r *http.Request) {
	bf, ok := s.batchFlow(w)
	if !ok {
		return
	}
	id, ok := taskID(w, r)
	if !ok {
		return
	}
	b, err := bf.Batch(r.Context(), id)
	if s.batchError(w, r, id, err) {
		return
	}
	writeJSON(w, http.StatusOK, b)
}

func (s *Server) batchError(w http.ResponseWriter, r *http.Request, id string, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, store.ErrBatchNotFound):
		writeError(w, http.StatusNotFound, triagetype.CodeNotFound, "id", fmt.Sprintf("no batch with id %q", id))
	default:
		s.internal(w, r, "batch", err)
	}
	return true
}
