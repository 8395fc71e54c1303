package api

import (
	"encoding/json"
	"net/http"
	"strings"
)

// maxSignalBody bounds what POST /tasks/{id}/signals/{name} reads: well
// over task.MaxSignalBytes, so a payload over that limit is refused with
// 400 naming "payload" rather than cut off.
const maxSignalBody = 64 << 10

// signal serves POST /api/v1/tasks/{id}/signals/{name}: the body is the
// signal's JSON payload (empty: null). See service.Service.Signal.
func (s *Server) signal(w http.ResponseWriter, r *http.Request) {
	var payload json.RawMessage
	if r.ContentLength != 0 {
		if !decode(w, r, &payload, maxSignalBody) {
			return
		}
	}
	if len(strings.TrimSpace(string(payload))) == 0 {
		payload = json.RawMessage("null")
	}
	t, err := s.svc.Signal(r.Context(), r.PathValue("id"), r.PathValue("name"), payload)
	s.answer(w, r, t, err)
}
