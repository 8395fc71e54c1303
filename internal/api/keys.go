package api

import (
	"net/http"

	"github.com/triagehq/triage/internal/service"
	"github.com/triagehq/triage/triagetype"
)

// setKeyControls is PUT /control/keys/{key}: pause, resume or limit one
// key, of every type or (with "type") of one type's tasks.
func (s *Server) setKeyControls(w http.ResponseWriter, r *http.Request) {
	k := r.PathValue("key")
	if err := service.CheckKey(k); err != nil {
		writeFault(w, err)
		return
	}
	var req triagetype.KeyControlsRequest
	if !decode(w, r, &req, MaxBody) {
		return
	}
	st, err := s.svc.SetKeyControls(r.Context(), k, req)
	s.answer(w, r, st, err)
}
