package api

import (
	"net/http"

	"github.com/triagehq/triage/internal/stats"
	"github.com/triagehq/triage/triagetype"
)

// listWorkers serves GET /workers: every consumer instance registered in
// the worker registry, alive or dead within the last few minutes.
func (s *Server) listWorkers(w http.ResponseWriter, r *http.Request) {
	if s.workers == nil {
		writeJSON(w, http.StatusOK, triagetype.WorkerList{Workers: []triagetype.Worker{}, GeneratedAt: s.store.Now().UTC()})
		return
	}
	ws, err := s.workers.List(r.Context())
	if err != nil {
		s.internal(w, r, "list workers", err)
		return
	}
	if ws == nil {
		ws = []triagetype.Worker{}
	}
	writeJSON(w, http.StatusOK, triagetype.WorkerList{Workers: ws, GeneratedAt: s.store.Now().UTC()})
}

// withWorkers adds the workers and keys sections to st when a registry
// is wired.
func (s *Server) withWorkers(r *http.Request, st *stats.Stats) error {
	if s.workers == nil {
		return nil
	}
	keyed, _ := s.controls.(stats.Keyed)
	ws, ks, err := stats.CollectFleet(r.Context(), s.workers, keyed)
	if err != nil {
		return err
	}
	st.Workers, st.Keys = ws, ks
	return nil
}
