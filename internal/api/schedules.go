package api

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/triagehq/triage/internal/auth"
	"github.com/triagehq/triage/internal/schedule"
	"github.com/triagehq/triage/triagetype"
)

// The periodic tasks' routes (package schedule): all answers come from
// schedule.Service, which the direct transport calls too.

// scheduleRoutes registers the schedule routes: reads need a read token,
// writes an admin token (a schedule makes tasks on its own, for as long
// as it exists).
func (s *Server) scheduleRoutes() {
	s.handle("POST /api/v1/schedules", auth.Admin, s.putSchedule)
	s.handle("GET /api/v1/schedules", auth.Read, s.listSchedules)
	s.handle("GET /api/v1/schedules/{name}", auth.Read, s.getSchedule)
	s.handle("DELETE /api/v1/schedules/{name}", auth.Admin, s.deleteSchedule)
	s.handle("POST /api/v1/schedules/{name}/pause", auth.Admin, s.pauseSchedule(true))
	s.handle("POST /api/v1/schedules/{name}/resume", auth.Admin, s.pauseSchedule(false))
}

// MaxScheduleBody bounds POST /schedules: a schedule's payload is at most
// schedule.MaxTaskPayload.
const MaxScheduleBody = 64 << 10

func (s *Server) scheduleError(w http.ResponseWriter, r *http.Request, err error) {
	var e *triagetype.Error
	if !errors.As(err, &e) {
		s.internal(w, r, "schedule request", err)
		return
	}
	if e.Status >= 500 {
		s.internal(w, r, "schedule request", e.Cause)
		return
	}
	writeError(w, e.Status, e.Code, e.Field, e.Message)
}

func (s *Server) noSchedules(w http.ResponseWriter) bool {
	if s.schedules == nil {
		writeError(w, http.StatusNotImplemented, triagetype.CodeNotImplemented, "", "this server keeps no schedules")
		return true
	}
	return false
}

func (s *Server) putSchedule(w http.ResponseWriter, r *http.Request) {
	if s.noSchedules(w) {
		return
	}
	var sc schedule.Schedule
	if !decode(w, r, &sc, MaxScheduleBody) {
		return
	}
	got, created, err := s.schedules.Put(r.Context(), sc)
	if err != nil {
		s.scheduleError(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, got)
}

func (s *Server) listSchedules(w http.ResponseWriter, r *http.Request) {
	if s.noSchedules(w) {
		return
	}
	q := r.URL.Query()
	limit := 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeError(w, http.StatusBadRequest, triagetype.CodeInvalidField, "limit", "limit: must be between 1 and 100")
			return
		}
		limit = n
	}
	page, err := s.schedules.List(r.Context(), limit, q.Get("cursor"))
	if err != nil {
		s.scheduleError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

func (s *Server) getSchedule(w http.ResponseWriter, r *http.Request) {
	if s.noSchedules(w) {
		return
	}
	got, err := s.schedules.Get(r.Context(), r.PathValue("name"))
	if err != nil {
		s.scheduleError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, got)
}

func (s *Server) deleteSchedule(w http.ResponseWriter, r *http.Request) {
	if s.noSchedules(w) {
		return
	}
	if err := s.schedules.Delete(r.Context(), r.PathValue("name")); err != nil {
		s.scheduleError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) pauseSchedule(paused bool) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.noSchedules(w) {
			return
		}
		got, err := s.schedules.SetPaused(r.Context(), r.PathValue("name"), paused)
		if err != nil {
			s.scheduleError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, got)
	}
}
