package api

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/triagehq/triage/internal/control"
	"github.com/triagehq/triage/internal/counters"
	"github.com/triagehq/triage/internal/deadletter"
	"github.com/triagehq/triage/internal/fault"
	"github.com/triagehq/triage/internal/service"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/internal/tracing"
	"github.com/triagehq/triage/triagetype"
)

// MaxBatch is the most tasks one batch submit may carry.
const MaxBatch = triagetype.MaxBatch

// BatchRequest is the body of POST /tasks/batch.
type BatchRequest struct {
	Tasks []task.Request `json:"tasks"`
}

// BatchItem is one task's outcome in a batch response.
type BatchItem struct {
	Index  int                     `json:"index"`
	Status int                     `json:"status"`
	Task   *task.Task              `json:"task,omitempty"`
	Error  *triagetype.ErrorDetail `json:"error,omitempty"`
}

func (s *Server) submitBatch(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Tasks []json.RawMessage `json:"tasks"`
	}
	if !decode(w, r, &req, MaxBatchBody) {
		return
	}
	rs, err := batchTasks(req.Tasks)
	if err != nil {
		writeError(w, http.StatusBadRequest, triagetype.CodeInvalidField, err.Field, err.Error())
		return
	}
	outs, e := s.svc.SubmitBatch(tracing.WithParent(r.Context(), r.Header.Get(tracing.Header)), rs)
	if e != nil {
		s.refuse(w, r, e)
		return
	}
	items := make([]BatchItem, len(outs))
	for i, o := range outs {
		items[i] = BatchItem{Index: i, Status: o.Status(), Task: o.Task}
		if o.Err != nil {
			s.logRefusal(r, o.Err, items[i].Status)
			items[i].Error = &triagetype.ErrorDetail{Code: o.Err.Code, Message: o.Err.Message, Field: o.Err.Field}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"results": items})
}

// batchTasks decodes the items of a batch one by one, as a single submit's
// body is decoded, so that a refusal names its item ("tasks[3].run_at").
// An item that cannot be read as a task (null, a number, a type error)
// refuses the whole batch; one that reads but fails validation is refused
// alone, in its result.
func batchTasks(items []json.RawMessage) ([]task.Request, *task.FieldError) {
	rs := make([]task.Request, len(items))
	for i, raw := range items {
		at := fmt.Sprintf("tasks[%d]", i)
		if b := bytes.TrimSpace(raw); len(b) == 0 || b[0] != '{' {
			return nil, &task.FieldError{Field: at, Message: fmt.Sprintf("must be a task (a JSON object), not %s", task.Truncate(string(b), 16))}
		}
		if err := DecodeStrict(raw, &rs[i]); err != nil {
			var fe *task.FieldError
			if errors.As(err, &fe) {
				return nil, &task.FieldError{Field: at + "." + fe.Field, Message: fe.Message}
			}
			return nil, &task.FieldError{Field: at, Message: err.Error()}
		}
	}
	return rs, nil
}

// TaskList is the body of GET /tasks.
type TaskList struct {
	Tasks      []*task.Task `json:"tasks"`
	NextCursor string       `json:"next_cursor,omitempty"`
}

// MaxListLimit bounds a page of GET /tasks.
const MaxListLimit = triagetype.MaxListLimit

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	lq := service.ListQuery{Type: q.Get("type"), Priority: q.Get("priority"), Suspended: q.Get("suspended"), Cursor: q.Get("cursor")}
	// status may name several, comma-separated or repeated
	// (status=queued,retrying or status=queued&status=retrying).
	for _, v := range q["status"] {
		for _, name := range strings.Split(v, ",") {
			if name != "" {
				lq.Statuses = append(lq.Statuses, name)
			}
		}
	}
	lq.Limit = limitParam(q.Get("limit"))
	ts, next, err := s.svc.List(r.Context(), lq)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, TaskList{Tasks: ts, NextCursor: next})
}

// limitParam reads a page size parameter for the service: absent is 0
// (the default); one that is not a whole number from 1 up is -1, which
// the service refuses as out of range.
func limitParam(v string) int {
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return -1
	}
	return n
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request) {
	t, err := s.svc.Cancel(r.Context(), r.PathValue("id"))
	s.answer(w, r, t, err)
}
func (s *Server) retry(w http.ResponseWriter, r *http.Request) {
	t, err := s.svc.Retry(r.Context(), r.PathValue("id"))
	s.answer(w, r, t, err)
}

// answer writes v with 200, or err.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, v any, err error) {
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// answerCreated is answer for an idempotent create: 201 when v was made
// by this request, 200 when an earlier one made it.
func (s *Server) answerCreated(w http.ResponseWriter, r *http.Request, v any, created bool, err error) {
	if err != nil {
		s.fail(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, v)
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request) {
	if err := s.svc.Delete(r.Context(), r.PathValue("id")); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
func (s *Server) cleanup(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query().Get("older_than")
	if v == "" {
		writeError(w, http.StatusBadRequest, triagetype.CodeInvalidField, "older_than", "older_than: required, an RFC 3339 time such as 2026-01-02T15:04:05Z")
		return
	}
	before, err := time.Parse(time.RFC3339, v)
	if err != nil {
		writeError(w, http.StatusBadRequest, triagetype.CodeInvalidField, "older_than", "older_than: not an RFC 3339 time: "+err.Error())
		return
	}
	job, err := s.svc.Cleanup(r.Context(), before)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// Accepted: the promoter does the work; the job's URL shows progress.
	w.Header().Set("Location", "/api/v1/cleanups/"+job.ID)
	writeJSON(w, http.StatusAccepted, job)
}

func (s *Server) getCleanup(w http.ResponseWriter, r *http.Request) {
	job, err := s.svc.GetCleanup(r.Context(), r.PathValue("id"))
	s.answer(w, r, job, err)
}

func (s *Server) stats(w http.ResponseWriter, r *http.Request) {
	st, err := s.svc.Stats(r.Context())
	s.answer(w, r, st, err)
}

// AgingInfo is the body of GET /aging.
type AgingInfo struct {
	LowAfterSeconds        float64 `json:"low_after_seconds"`
	MediumAfterSeconds     float64 `json:"medium_after_seconds"`
	PromoteIntervalSeconds float64 `json:"promote_interval_seconds"`
	// StarvationBoundSeconds is the longest a task waits before it
	// reaches the high queue: LowAfter + MediumAfter + 2 × Interval (each
	// promotion happens in the first run after its threshold).
	StarvationBoundSeconds float64 `json:"starvation_bound_seconds"`
}

func (s *Server) aging(w http.ResponseWriter, r *http.Request) {
	a := s.opt.Aging
	if a == (Aging{}) {
		writeError(w, http.StatusNotImplemented, triagetype.CodeNotImplemented, "", "this API was not told the promoter's schedule")
		return
	}
	writeJSON(w, http.StatusOK, AgingInfo{
		LowAfterSeconds: a.LowAfter.Seconds(), MediumAfterSeconds: a.MediumAfter.Seconds(), PromoteIntervalSeconds: a.Interval.Seconds(),
		StarvationBoundSeconds: (a.LowAfter + a.MediumAfter + 2*a.Interval).Seconds(),
	})
}

// Historian is the part of the counters behind GET /stats/history.
type Historian interface {
	History(ctx context.Context, minutes int) ([]counters.Minute, error)
}

// History is the body of GET /stats/history.
type History struct {
	Minutes []counters.Minute `json:"minutes"`
}

// statsHistory answers completions and dead letters per minute over the
// last hour at most, from the counters' throughput buckets: a constant
// number of small reads, never a read of tasks.
func (s *Server) statsHistory(w http.ResponseWriter, r *http.Request) {
	minutes := 60
	if v := r.URL.Query().Get("minutes"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > counters.MaxHistory {
			writeError(w, http.StatusBadRequest, triagetype.CodeInvalidField, "minutes", fmt.Sprintf("minutes: must be a whole number from 1 to %d", counters.MaxHistory))
			return
		}
		minutes = n
	}
	h, ok := s.counters.(Historian)
	if !ok {
		writeError(w, http.StatusNotImplemented, triagetype.CodeNotImplemented, "", "this API's counters keep no history")
		return
	}
	ms, err := h.History(r.Context(), minutes)
	if err != nil {
		s.fail(w, r, fault.Internal("read stats history", err))
		return
	}
	writeJSON(w, http.StatusOK, History{Minutes: ms})
}

func (s *Server) pause(paused bool) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		st, err := s.svc.SetPaused(r.Context(), r.URL.Query().Get("type"), paused)
		s.answer(w, r, st, err)
	}
}

// LimitsRequest is the body of PUT /control/types/{type}.
type LimitsRequest struct {
	RateLimitPerSecond *float64 `json:"rate_limit_per_second"`
	MaxConcurrency     *int     `json:"max_concurrency"`
}

func (s *Server) setLimits(w http.ResponseWriter, r *http.Request) {
	typ := r.PathValue("type")
	if err := service.CheckType(typ, "type"); err != nil {
		writeFault(w, err)
		return
	}
	var req LimitsRequest
	if !decode(w, r, &req, MaxBody) {
		return
	}
	var rate float64
	var conc int
	if req.RateLimitPerSecond != nil {
		rate = *req.RateLimitPerSecond
	}
	if req.MaxConcurrency != nil {
		conc = *req.MaxConcurrency
	}
	st, err := s.svc.SetLimits(r.Context(), typ, rate, conc)
	s.answer(w, r, st, err)
}

// RateUse is how much of a rate limit (a type's or a keyed scope's) its
// current window used.
type RateUse = triagetype.RateUse

// ControlList is the body of GET /control: the settings, global first,
// and for each type or keyed scope with a rate limit the use of its
// current window, keyed scopes by their scope's name (a small read per
// such scope: O(scopes with settings), never O(tasks)). A
// type's concurrency in use is its executing count in /stats.
type ControlList struct {
	Controls []control.Settings `json:"controls"`
	RateUse  map[string]RateUse `json:"rate_use,omitempty"`
}

func (s *Server) listControls(w http.ResponseWriter, r *http.Request) {
	cs, err := s.svc.Controls(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	use, err := s.svc.RateUse(r.Context(), cs)
	s.answer(w, r, ControlList{Controls: cs, RateUse: use}, err)
}

// DLQList is the body of GET /dlq: the messages, and whether the read
// stopped at deadletter.MaxScan messages of a priority before the page
// filled (a filter may then have more matches than shown).
type DLQList struct {
	Messages  []deadletter.Message `json:"messages"`
	Truncated bool                 `json:"truncated,omitempty"`
}

func (s *Server) listDLQ(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	msgs, truncated, err := s.svc.DLQ(r.Context(), service.DLQQuery{
		Priority: q.Get("priority"), Type: q.Get("type"), Reason: q.Get("reason"), Limit: limitParam(q.Get("limit")),
	})
	s.answer(w, r, DLQList{Messages: msgs, Truncated: truncated}, err)
}

// selection reads the body of a replay or a purge (none selects every
// dead task).
func selection(w http.ResponseWriter, r *http.Request) (ReplayRequest, bool) {
	var req ReplayRequest
	if r.ContentLength != 0 && !decode(w, r, &req, MaxBody) {
		return req, false
	}
	return req, true
}

// ReplayRequest is the body of POST /dlq/replay and POST /dlq/purge.
// Empty fields match everything.
type ReplayRequest = service.DLQSelection

func (s *Server) replayDLQ(w http.ResponseWriter, r *http.Request) {
	if sel, ok := selection(w, r); ok {
		res, err := s.svc.ReplayDLQ(r.Context(), sel)
		s.answer(w, r, res, err)
	}
}
func (s *Server) purgeDLQ(w http.ResponseWriter, r *http.Request) {
	if sel, ok := selection(w, r); ok {
		res, err := s.svc.PurgeDLQ(r.Context(), sel)
		s.answer(w, r, res, err)
	}
}

//go:embed openapi.json
var openapiDoc []byte

func (s *Server) openapi(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openapiDoc)
}
