package api

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/triagehq/triage/internal/api/answer"
	"github.com/triagehq/triage/internal/control"
	"github.com/triagehq/triage/internal/counters"
	"github.com/triagehq/triage/internal/deadletter"
	"github.com/triagehq/triage/internal/stats"
	"github.com/triagehq/triage/internal/store"
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
	outs, e := s.submitter.SubmitBatch(tracing.WithParent(r.Context(), r.Header.Get(tracing.Header)), rs)
	if e != nil {
		s.refuse(w, r, e)
		return
	}
	items := make([]BatchItem, len(outs))
	for i, o := range outs {
		items[i] = BatchItem{Index: i, Status: answer.OutcomeStatus(o), Task: o.Task}
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
const MaxListLimit = 1000

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var f store.ListFilter
	if f.Type = q.Get("type"); !typeParam(w, f.Type, "type") {
		return
	}
	// status may name several, comma-separated or repeated
	// (status=queued,retrying or status=queued&status=retrying).
	for _, v := range q["status"] {
		for _, name := range strings.Split(v, ",") {
			if name == "" {
				continue
			}
			st, err := triagetype.ParseStatus(name)
			if err != nil {
				writeError(w, http.StatusBadRequest, triagetype.CodeInvalidField, "status", "status: "+err.Error())
				return
			}
			if !slices.Contains(f.Statuses, st) {
				f.Statuses = append(f.Statuses, st)
			}
		}
	}
	if v := q.Get("priority"); v != "" {
		p, err := triagetype.ParsePriority(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, triagetype.CodeInvalidField, "priority", "priority: "+err.Error())
			return
		}
		f.Priority = p
	}
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxListLimit {
			writeError(w, http.StatusBadRequest, triagetype.CodeInvalidField, "limit", fmt.Sprintf("limit: must be a whole number from 1 to %d", MaxListLimit))
			return
		}
		limit = n
	}
	ts, next, err := s.store.List(r.Context(), f, limit, q.Get("cursor"))
	if errors.Is(err, store.ErrBadCursor) {
		writeError(w, http.StatusBadRequest, triagetype.CodeInvalidField, "cursor", "cursor: not a cursor from next_cursor")
		return
	}
	if err != nil {
		s.internal(w, r, "list tasks", err)
		return
	}
	if ts == nil {
		ts = []*task.Task{}
	}
	writeJSON(w, http.StatusOK, TaskList{Tasks: ts, NextCursor: next})
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request) {
	id, ok := taskID(w, r)
	if !ok {
		return
	}
	t, err := s.store.Cancel(r.Context(), id)
	if s.taskError(w, r, "cancel task", err) {
		return
	}
	writeJSON(w, http.StatusOK, t)
}

func (s *Server) retry(w http.ResponseWriter, r *http.Request) {
	id, ok := taskID(w, r)
	if !ok {
		return
	}
	t, err := s.dlq.Retry(r.Context(), id)
	if s.taskError(w, r, "retry task", err) {
		return
	}
	writeJSON(w, http.StatusOK, t)
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request) {
	id, ok := taskID(w, r)
	if !ok {
		return
	}
	t, err := s.store.Get(r.Context(), id)
	if s.taskError(w, r, "delete task", err) {
		return
	}
	if !t.Status.Terminal() {
		s.taskError(w, r, "delete task", &store.StateError{ID: t.ID, Status: t.Status, Op: "delete"})
		return
	}
	if s.taskError(w, r, "delete task", s.dlq.Delete(r.Context(), t)) {
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
	n, err := s.dlq.Cleanup(r.Context(), before) // the dead ones' DLQ copies go too
	if err != nil {
		s.internal(w, r, "cleanup", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"deleted": n})
}

func (s *Server) stats(w http.ResponseWriter, r *http.Request) {
	st, err := stats.Collect(r.Context(), s.counters, s.queues, s.store.Now())
	if err == nil {
		err = s.withWorkers(r, &st)
	}
	if err != nil {
		s.internal(w, r, "collect stats", err)
		return
	}
	writeJSON(w, http.StatusOK, st)
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
		s.internal(w, r, "read stats history", err)
		return
	}
	writeJSON(w, http.StatusOK, History{Minutes: ms})
}

func (s *Server) pause(paused bool) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		typ := r.URL.Query().Get("type")
		if !typeParam(w, typ, "type") {
			return
		}
		st, err := s.controls.SetPaused(r.Context(), typ, paused)
		if err != nil {
			s.internal(w, r, "set pause", err)
			return
		}
		writeJSON(w, http.StatusOK, st)
	}
}

// LimitsRequest is the body of PUT /control/types/{type}.
type LimitsRequest struct {
	RateLimitPerSecond *float64 `json:"rate_limit_per_second"`
	MaxConcurrency     *int     `json:"max_concurrency"`
}

func (s *Server) setLimits(w http.ResponseWriter, r *http.Request) {
	if !typeParam(w, r.PathValue("type"), "type") {
		return
	}
	var req LimitsRequest
	if !decode(w, r, &req, MaxBody) {
		return
	}
	var rate float64
	var conc int
	if req.RateLimitPerSecond != nil {
		if rate = *req.RateLimitPerSecond; rate < 0 || rate > 100000 {
			writeError(w, http.StatusBadRequest, triagetype.CodeInvalidField, "rate_limit_per_second", "rate_limit_per_second: must be from 0 (no limit) to 100000")
			return
		}
	}
	if req.MaxConcurrency != nil {
		if conc = *req.MaxConcurrency; conc < 0 || conc > 10000 {
			writeError(w, http.StatusBadRequest, triagetype.CodeInvalidField, "max_concurrency", "max_concurrency: must be from 0 (no limit) to 10000")
			return
		}
	}
	st, err := s.controls.SetLimits(r.Context(), r.PathValue("type"), rate, conc)
	if err != nil {
		s.internal(w, r, "set limits", err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// RateUse is how much of a type's rate limit its current window used.
type RateUse = triagetype.RateUse

// ControlList is the body of GET /control: the settings, global first,
// and for each type with a rate limit the use of its current window (one
// small read per such type: O(types with settings), never O(tasks)). A
// type's concurrency in use is its executing count in /stats.
type ControlList struct {
	Controls []control.Settings `json:"controls"`
	RateUse  map[string]RateUse `json:"rate_use,omitempty"`
}

func (s *Server) listControls(w http.ResponseWriter, r *http.Request) {
	cs, err := s.controls.List(r.Context())
	if err != nil {
		s.internal(w, r, "list controls", err)
		return
	}
	out := ControlList{Controls: cs}
	for _, c := range cs {
		if c.Type == "" || c.Key != "" || c.RateLimitPerSecond <= 0 {
			continue
		}
		starts, limit, window, err := s.controls.RateUse(r.Context(), c.Type, c.RateLimitPerSecond)
		if err != nil {
			s.internal(w, r, "read rate use", err)
			return
		}
		if out.RateUse == nil {
			out.RateUse = map[string]RateUse{}
		}
		out.RateUse[c.Type] = RateUse{Starts: starts, Limit: limit, WindowSeconds: window.Seconds()}
	}
	writeJSON(w, http.StatusOK, out)
}

// dlqPriorities reads the optional priority parameter.
func dlqPriorities(w http.ResponseWriter, v string) ([]triagetype.Priority, bool) {
	if v == "" {
		return triagetype.Priorities(), true
	}
	p, err := triagetype.ParsePriority(v)
	if err != nil {
		writeError(w, http.StatusBadRequest, triagetype.CodeInvalidField, "priority", "priority: "+err.Error())
		return nil, false
	}
	return []triagetype.Priority{p}, true
}

// DLQList is the body of GET /dlq: the messages, and whether the read
// stopped at deadletter.MaxScan messages of a priority before the page
// filled (a filter may then have more matches than shown).
type DLQList struct {
	Messages  []deadletter.Message `json:"messages"`
	Truncated bool                 `json:"truncated,omitempty"`
}

// MaxReasonFilter bounds the reason filter: a DLQ reason is at most
// queue.MaxReasonBytes, so a longer filter could match nothing.
const MaxReasonFilter = 256

// dlqFilter reads the filters GET /dlq takes as query parameters:
// priority, type, reason and limit (default 100).
func dlqFilter(w http.ResponseWriter, r *http.Request) (deadletter.Filter, bool) {
	q := r.URL.Query()
	prios, ok := dlqPriorities(w, q.Get("priority"))
	if !ok {
		return deadletter.Filter{}, false
	}
	f := deadletter.Filter{Priorities: prios, Type: q.Get("type"), Reason: q.Get("reason"), Limit: 100}
	if !typeParam(w, f.Type, "type") || !reasonParam(w, f.Reason) {
		return f, false
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxListLimit {
			writeError(w, http.StatusBadRequest, triagetype.CodeInvalidField, "limit", fmt.Sprintf("limit: must be a whole number from 1 to %d", MaxListLimit))
			return f, false
		}
		f.Limit = n
	}
	return f, true
}

func reasonParam(w http.ResponseWriter, reason string) bool {
	if len(reason) > MaxReasonFilter || !utf8.ValidString(reason) {
		writeError(w, http.StatusBadRequest, triagetype.CodeInvalidField, "reason", fmt.Sprintf("reason: must be UTF-8 text of at most %d bytes", MaxReasonFilter))
		return false
	}
	return true
}

func (s *Server) listDLQ(w http.ResponseWriter, r *http.Request) {
	f, ok := dlqFilter(w, r)
	if !ok {
		return
	}
	msgs, truncated, err := s.dlq.Find(r.Context(), f)
	if err != nil {
		s.internal(w, r, "list DLQ", err)
		return
	}
	if msgs == nil {
		msgs = []deadletter.Message{}
	}
	writeJSON(w, http.StatusOK, DLQList{Messages: msgs, Truncated: truncated})
}

// ReplayRequest is the body of POST /dlq/replay and POST /dlq/purge.
// Empty fields match everything.
type ReplayRequest struct {
	Priority string `json:"priority"`
	Type     string `json:"type"`
	// Reason matches messages whose reason contains it (any case).
	Reason string `json:"reason"`
	// TaskIDs limits the call to the messages of these tasks (rows an
	// operator selected), at most MaxSelect.
	TaskIDs []string `json:"task_ids"`
	// MessageIDs limits the call to these messages (purge only: poison
	// bodies name no task), at most MaxSelect.
	MessageIDs []string `json:"message_ids"`
	Limit      *int     `json:"limit"`
	// Confirm must be true for a purge: it deletes tasks for good.
	Confirm bool `json:"confirm"`
}

// MaxSelect bounds task_ids and message_ids: a page's worth.
const MaxSelect = MaxListLimit

// replayFilter reads and checks a replay or purge body.
func replayFilter(w http.ResponseWriter, r *http.Request, purge bool) (deadletter.Filter, bool) {
	var req ReplayRequest
	if r.ContentLength != 0 && !decode(w, r, &req, MaxBody) {
		return deadletter.Filter{}, false
	}
	prios, ok := dlqPriorities(w, req.Priority)
	if !ok || !typeParam(w, req.Type, "type") || !reasonParam(w, req.Reason) {
		return deadletter.Filter{}, false
	}
	f := deadletter.Filter{Priorities: prios, Type: req.Type, Reason: req.Reason, TaskIDs: req.TaskIDs, MessageIDs: req.MessageIDs, Limit: MaxListLimit}
	if len(req.TaskIDs) > MaxSelect {
		writeError(w, http.StatusBadRequest, triagetype.CodeInvalidField, "task_ids", fmt.Sprintf("task_ids: at most %d", MaxSelect))
		return f, false
	}
	for i, id := range req.TaskIDs {
		if fe := task.CheckID(id); fe != nil {
			writeError(w, http.StatusBadRequest, triagetype.CodeInvalidField, "task_ids", fmt.Sprintf("task_ids[%d]: %s", i, fe.Message))
			return f, false
		}
	}
	if len(req.MessageIDs) > MaxSelect {
		writeError(w, http.StatusBadRequest, triagetype.CodeInvalidField, "message_ids", fmt.Sprintf("message_ids: at most %d", MaxSelect))
		return f, false
	}
	for i, id := range req.MessageIDs {
		if id == "" || len(id) > 100 || !utf8.ValidString(id) {
			writeError(w, http.StatusBadRequest, triagetype.CodeInvalidField, "message_ids", fmt.Sprintf("message_ids[%d]: must be an SQS message id (1 to 100 characters)", i))
			return f, false
		}
	}
	if !purge && len(req.MessageIDs) > 0 {
		writeError(w, http.StatusBadRequest, triagetype.CodeInvalidField, "message_ids", "message_ids: only a purge takes message ids (a replay selects by task_ids)")
		return f, false
	}
	if purge && !req.Confirm {
		writeError(w, http.StatusBadRequest, triagetype.CodeInvalidField, "confirm", "confirm: must be true: a purge deletes the dead tasks it matches for good")
		return f, false
	}
	if req.Limit != nil {
		if *req.Limit < 1 || *req.Limit > 10000 {
			writeError(w, http.StatusBadRequest, triagetype.CodeInvalidField, "limit", "limit: must be from 1 to 10000")
			return f, false
		}
		f.Limit = *req.Limit
	}
	return f, true
}

func (s *Server) replayDLQ(w http.ResponseWriter, r *http.Request) {
	f, ok := replayFilter(w, r, false)
	if !ok {
		return
	}
	res, err := s.dlq.Replay(r.Context(), f)
	if err != nil {
		s.internal(w, r, "replay DLQ", err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) purgeDLQ(w http.ResponseWriter, r *http.Request) {
	f, ok := replayFilter(w, r, true)
	if !ok {
		return
	}
	res, err := s.dlq.Purge(r.Context(), f)
	if err != nil {
		s.internal(w, r, "purge DLQ", err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

//go:embed openapi.json
var openapiDoc []byte

func (s *Server) openapi(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openapiDoc)
}
