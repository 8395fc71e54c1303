package api

import (
	"context"
	"net/http"

	"github.com/triagehq/triage/internal/control"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// KeyControls sets the controls of fairness keys (*control.Controls).
type KeyControls interface {
	SetKeyControls(ctx context.Context, typ, key string, paused *bool, rate *float64, conc *int, weight ...*int) (control.Settings, error)
}

// setKeyControls is PUT /control/keys/{key}: pause, resume or limit one
// key, of every type or (with "type") of one type's tasks.
func (s *Server) setKeyControls(w http.ResponseWriter, r *http.Request) {
	kc, ok := s.controls.(KeyControls)
	if !ok {
		writeError(w, http.StatusNotImplemented, triagetype.CodeNotImplemented, "", "this API has no keyed controls")
		return
	}
	k := r.PathValue("key")
	if err := task.ValidateKey(k); err != nil || k == "" {
		msg := "is required"
		if err != nil {
			msg = err.Error()
		}
		writeError(w, http.StatusBadRequest, triagetype.CodeInvalidField, "key", "key: "+msg)
		return
	}
	var req triagetype.KeyControlsRequest
	if !decode(w, r, &req, MaxBody) {
		return
	}
	if !typeParam(w, req.Type, "type") {
		return
	}
	if fe := control.CheckKeyLimits(req.RateLimitPerSecond, req.MaxConcurrency, req.Weight); fe != nil {
		writeError(w, http.StatusBadRequest, triagetype.CodeInvalidField, fe.Field, fe.Error())
		return
	}
	if req.Weight != nil && req.Type != "" {
		writeError(w, http.StatusBadRequest, triagetype.CodeInvalidField, "weight", "weight: is per key; leave type out")
		return
	}
	st, err := kc.SetKeyControls(r.Context(), req.Type, k, req.Paused, req.RateLimitPerSecond, req.MaxConcurrency, req.Weight)
	if err != nil {
		s.internal(w, r, "set key controls", err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}
