package api

import (
	"net/http"
)

// listWorkers serves GET /workers: every consumer instance registered in
// the worker registry, alive or dead within the last few minutes.
func (s *Server) listWorkers(w http.ResponseWriter, r *http.Request) {
	l, err := s.svc.Workers(r.Context())
	s.answer(w, r, l, err)
}
