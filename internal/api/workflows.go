package api

import (
	"net/http"

	"github.com/triagehq/triage/triagetype"
)

// MaxWorkflowBody bounds a workflow submit's body: up to 1,000 nodes,
// inside what a synchronous Lambda invocation accepts (6 MB).
const MaxWorkflowBody = 6 << 20

func (s *Server) submitWorkflow(w http.ResponseWriter, r *http.Request) {
	var req triagetype.WorkflowRequest
	if !decode(w, r, &req, MaxWorkflowBody) {
		return
	}
	wf, created, err := s.svc.SubmitWorkflow(r.Context(), req)
	s.answerCreated(w, r, wf, created, err)
}

func (s *Server) getWorkflow(w http.ResponseWriter, r *http.Request) {
	wf, err := s.svc.Workflow(r.Context(), r.PathValue("id"))
	s.answer(w, r, wf, err)
}

// createBatch is POST /batches: a new batch, its first members (at most
// MaxBatch), sealed unless open is true.
func (s *Server) createBatch(w http.ResponseWriter, r *http.Request) {
	var req triagetype.BatchCreate
	if !decode(w, r, &req, MaxBatchBody) {
		return
	}
	b, err := s.svc.CreateBatch(r.Context(), req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, b)
}

// addToBatch is POST /batches/{id}/tasks: more members of an open batch.
func (s *Server) addToBatch(w http.ResponseWriter, r *http.Request) {
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
	b, err := s.svc.AddToBatch(r.Context(), id, req.Tasks)
	s.answer(w, r, b, err)
}

func (s *Server) sealBatch(w http.ResponseWriter, r *http.Request) {
	b, err := s.svc.SealBatch(r.Context(), r.PathValue("id"))
	s.answer(w, r, b, err)
}

func (s *Server) getBatch(w http.ResponseWriter, r *http.Request) {
	b, err := s.svc.Batch(r.Context(), r.PathValue("id"))
	s.answer(w, r, b, err)
}
