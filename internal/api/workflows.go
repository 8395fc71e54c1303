package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

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
		writeError(w, http.StatusNotImplemented, "not_implemented", "", "workflows are not enabled on this server")
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
		writeError(w, http.StatusConflict, "conflict", "idempotency_key", "idempotency_key: "+err.Error())
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
		writeError(w, http.StatusNotImplemented, "not_implemented", "", "workflows are not enabled on this server")
		return
	}
	id, ok := taskID(w, r)
	if !ok {
		return
	}
	wf, err := s.flow.Workflow(r.Context(), id)
	if errors.Is(err, store.ErrBatchNotFound) {
		writeError(w, http.StatusNotFound, "not_found", "id", fmt.Sprintf("no workflow with id %q", id))
		return
	}
	if err != nil {
		s.internal(w, r, "read workflow", err)
		return
	}
	writeJSON(w, http.StatusOK, wf)
}
