package api

import (
	"net/http"

	"github.com/triagehq/triage/internal/auth"
	"github.com/triagehq/triage/internal/schedule"
)

// The periodic tasks' routes (package schedule): all answers come from
// the service, which the direct transport calls too.

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

func (s *Server) putSchedule(w http.ResponseWriter, r *http.Request) {
	var sc schedule.Schedule
	if !decode(w, r, &sc, MaxScheduleBody) {
		return
	}
	got, created, err := s.svc.PutSchedule(r.Context(), sc)
	s.answerCreated(w, r, got, created, err)
}

func (s *Server) listSchedules(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	page, err := s.svc.ListSchedules(r.Context(), limitParam(q.Get("limit")), q.Get("cursor"))
	s.answer(w, r, page, err)
}

func (s *Server) getSchedule(w http.ResponseWriter, r *http.Request) {
	got, err := s.svc.GetSchedule(r.Context(), r.PathValue("name"))
	s.answer(w, r, got, err)
}

func (s *Server) deleteSchedule(w http.ResponseWriter, r *http.Request) {
	if err := s.svc.DeleteSchedule(r.Context(), r.PathValue("name")); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) pauseSchedule(paused bool) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		got, err := s.svc.SetSchedulePaused(r.Context(), r.PathValue("name"), paused)
		s.answer(w, r, got, err)
	}
}
