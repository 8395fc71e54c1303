// Package api is triage's HTTP API under /api/v1.
//
// It is one net/http handler: `triage dev` serves it on a local listener
// and functions/api serves the same handler to API Gateway through
// aws-lambda-go-api-proxy. A handler decodes its request, calls the
// operation in internal/service (which the direct transport calls too)
// and writes the answer; every error has one JSON shape,
// {"error": {"code", "message", "field"}} (triagetype.ErrorBody), and the
// status of its kind (fault.Status).
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/triagehq/triage/internal/auth"
	"github.com/triagehq/triage/internal/fault"
	"github.com/triagehq/triage/internal/schedule"
	"github.com/triagehq/triage/internal/service"
	"github.com/triagehq/triage/internal/stats"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/submit"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/internal/tracing"
	"github.com/triagehq/triage/triagetype"
)

// Store is the part of the task store the API uses: the operations'
// (service.Store) and the progress reports of external handlers.
type Store interface {
	service.Store
	// Report writes an external handler's progress report made with its
	// attempt's token, at most once per interval per task.
	Report(ctx context.Context, id string, r store.Report, interval time.Duration) (*task.Task, error)
}

// Authorizer checks the token a request carries (auth.TokenHeader, else
// the Authorization header's bearer token) for scope need: nil, or an
// error matching auth.ErrUnauthenticated (401) or auth.ErrForbidden
// (403). *auth.Tokens is one; the API function's keeps the table's
// tokens fresh too (apiapp).
type Authorizer interface {
	CheckRequest(r *http.Request, need auth.Scope) error
}

// Deps are the parts the API serves from.
type Deps struct {
	Store    Store
	Enqueuer submit.Enqueuer
	Queues   stats.Queues
	Controls service.Controls
	DLQ      service.DLQ
	Counters stats.Counters
	// Tokens checks every authenticated route's token.
	Tokens Authorizer
	// Workers is the worker registry behind GET /workers and the workers
	// section of /stats (nil: an empty list, no section).
	Workers stats.Workers
	// Schedules keeps the schedules behind /schedules (nil: those routes
	// answer 501).
	Schedules *schedule.Store
	// Flow serves workflows and batches (nil: those routes answer 501).
	Flow service.Flow
}

// Options tunes the API.
type Options struct {
	// DirectWindow: a task whose run_at is further away than this starts
	// scheduled and is released by the promoter; nearer ones are sent at
	// once with a delay (queue.MaxDelay, SQS's longest delay: 15 min).
	DirectWindow time.Duration
	// Tracing starts the submit spans, under a request's traceparent
	// header (tracing.Global()).
	Tracing *tracing.Provider
	// MaxDepth is the queue depth over which submits get 429 (0: no limit).
	// MaxDepthHigh is the same for high-priority submits, which may keep a
	// higher limit so urgent work still gets in.
	MaxDepth     int
	MaxDepthHigh int
	// KnownTypes, when not empty, are the only task types a submit may name:
	// another type is refused with 400 (naming type) rather than accepted
	// and dead-lettered for want of a handler (TRIAGE_TYPES).
	KnownTypes []string
	// Dashboard, if set, is served at / (and its assets).
	Dashboard http.Handler
	Logger    *slog.Logger
	// Events, if set, serves GET /api/v1/events (Server-Sent Events): a
	// long-lived server whose stream consumer feeds it. Unset (the
	// Lambda-hosted API), the route answers 501 naming the alternatives.
	Events EventSource
	// Metrics, if set, counts submitted tasks (submit.Options.Metrics).
	Metrics submit.Metrics
	// ProgressInterval is the least time between two accepted progress
	// reports of one task (task.ProgressInterval).
	ProgressInterval time.Duration
	// Aging is the promoter's schedule, served by GET /aging so the
	// dashboard can say how far the oldest waiting tasks are from their
	// next promotion and from the starvation bound (zero: 501).
	Aging Aging
}

// Aging is the promoter's schedule: a low task moves to medium after
// LowAfter, a medium one to high after MediumAfter, each during the first
// promoter run (every Interval) past its threshold.
type Aging struct {
	LowAfter, MediumAfter, Interval time.Duration
}

// Server serves the API.
type Server struct {
	store    Store
	counters stats.Counters
	tokens   Authorizer
	opt      Options
	log      *slog.Logger
	mux      *http.ServeMux
	routes   []string
	// svc runs the operations, as it does for the direct transport.
	svc *service.Service
}

// New returns the API handler.
func New(d Deps, opt Options) *Server {
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.ProgressInterval <= 0 {
		opt.ProgressInterval = task.ProgressInterval
	}
	srv := &Server{
		store: d.Store, counters: d.Counters, tokens: d.Tokens, opt: opt, log: opt.Logger, mux: http.NewServeMux(),
		svc: service.New(service.Deps{
			Store: d.Store, Enqueuer: d.Enqueuer, Queues: d.Queues, Controls: d.Controls, DLQ: d.DLQ,
			Counters: d.Counters, Workers: d.Workers, Flow: d.Flow, Schedules: d.Schedules,
		}, service.Options{
			KnownTypes: opt.KnownTypes, DirectWindow: opt.DirectWindow, MaxDepth: opt.MaxDepth, MaxDepthHigh: opt.MaxDepthHigh,
			Tracing: opt.Tracing, Metrics: opt.Metrics, Logger: opt.Logger,
		}),
	}
	srv.register()
	return srv
}

func (s *Server) register() {
	s.handle("POST /api/v1/tasks", auth.Submit, s.submit)
	s.handle("POST /api/v1/tasks/batch", auth.Submit, s.submitBatch)
	s.handle("GET /api/v1/tasks", auth.Read, s.list)
	s.handle("GET /api/v1/tasks/{id}", auth.Read, s.get)
	s.handle("POST /api/v1/tasks/{id}/cancel", auth.Admin, s.cancel)
	s.handle("POST /api/v1/tasks/{id}/retry", auth.Admin, s.retry)
	s.handle("DELETE /api/v1/tasks/{id}", auth.Admin, s.delete)
	s.handle("POST /api/v1/tasks/{id}/signals/{name}", auth.Submit, s.signal)
	// Authorized by the attempt's own progress token, not an API token.
	s.public("POST /api/v1/tasks/{id}/progress", s.reportProgress)
	s.handle("DELETE /api/v1/tasks", auth.Admin, s.cleanup)
	s.handle("GET /api/v1/cleanups/{id}", auth.Read, s.getCleanup)
	s.handle("GET /api/v1/stats", auth.Read, s.stats)
	s.handle("GET /api/v1/stats/history", auth.Read, s.statsHistory)
	s.handle("GET /api/v1/aging", auth.Read, s.aging)
	s.handle("POST /api/v1/control/pause", auth.Admin, s.pause(true))
	s.handle("POST /api/v1/control/resume", auth.Admin, s.pause(false))
	s.handle("PUT /api/v1/control/types/{type}", auth.Admin, s.setLimits)
	s.handle("PUT /api/v1/control/keys/{key}", auth.Admin, s.setKeyControls)
	s.handle("GET /api/v1/control", auth.Read, s.listControls)
	s.handle("GET /api/v1/dlq", auth.Read, s.listDLQ)
	s.handle("POST /api/v1/dlq/replay", auth.Admin, s.replayDLQ)
	s.handle("POST /api/v1/dlq/purge", auth.Admin, s.purgeDLQ)
	s.handle("GET /api/v1/events", auth.Read, s.streamEvents)
	s.handle("GET /api/v1/workers", auth.Read, s.listWorkers)
	s.scheduleRoutes()
	s.handle("POST /api/v1/workflows", auth.Submit, s.submitWorkflow)
	s.handle("GET /api/v1/workflows/{id}", auth.Read, s.getWorkflow)
	s.handle("POST /api/v1/batches", auth.Submit, s.createBatch)
	s.handle("POST /api/v1/batches/{id}/tasks", auth.Submit, s.addToBatch)
	s.handle("POST /api/v1/batches/{id}/seal", auth.Submit, s.sealBatch)
	s.handle("GET /api/v1/batches/{id}", auth.Read, s.getBatch)
	s.public("GET /api/v1/openapi.json", s.openapi)
	if s.opt.Dashboard != nil {
		for _, p := range []string{"GET /{$}", "GET /dashboard.js", "GET /dashboard.css"} {
			s.public(p, s.opt.Dashboard.ServeHTTP)
		}
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, triagetype.CodeNotFound, "", fmt.Sprintf("no route %s %s", r.Method, r.URL.Path))
	})
}

// Routes lists the registered route patterns ("METHOD /path").
func (s *Server) Routes() []string { return append([]string(nil), s.routes...) }

func (s *Server) public(pattern string, h func(http.ResponseWriter, *http.Request)) {
	s.routes = append(s.routes, pattern)
	s.mux.HandleFunc(pattern, h)
}

// handle registers an authenticated route.
func (s *Server) handle(pattern string, scope auth.Scope, h func(http.ResponseWriter, *http.Request)) {
	s.routes = append(s.routes, pattern)
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if err := s.tokens.CheckRequest(r, scope); err != nil {
			if errors.Is(err, auth.ErrForbidden) {
				writeError(w, http.StatusForbidden, triagetype.CodeForbidden, "", err.Error())
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="triage"`)
			writeError(w, http.StatusUnauthorized, triagetype.CodeUnauthorized, "", "missing or invalid bearer token (Authorization: Bearer <token>, or "+auth.TokenHeader+": <token>)")
			return
		}
		h(w, r)
	})
}

// ServeHTTP recovers from panics so a bad request can never crash the function.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("panic serving request", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(p))
			writeError(w, http.StatusInternalServerError, triagetype.CodeInternal, "", "internal error")
		}
	}()
	s.mux.ServeHTTP(w, r)
}

// Request body limits, per endpoint. A single submit carries at most one
// payload (MaxPayloadBytes) and a few small fields; a batch carries up to
// MaxBatch of them, bounded as a whole well inside what API Gateway (10 MB)
// and a synchronous Lambda invocation (6 MB) accept.
const (
	MaxBody      = task.MaxPayloadBytes + 64<<10
	MaxBatchBody = 5 << 20
)

func (s *Server) submit(w http.ResponseWriter, r *http.Request) {
	var req task.Request
	if !decode(w, r, &req, MaxBody) {
		return
	}
	o := s.svc.Submit(tracing.WithParent(r.Context(), r.Header.Get(tracing.Header)), req)
	if o.Err != nil {
		s.refuse(w, r, o.Err)
		return
	}
	writeJSON(w, o.Status(), o.Task)
}

// refuse answers with a refusal of the submit service: its status, its
// Retry-After when it has one, its code, message and field.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, e *fault.Error) {
	status := fault.Status(e.Kind)
	s.logRefusal(r, e, status)
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(max(e.RetryAfter.Seconds(), 1))))
	}
	writeError(w, status, e.Code, e.Field, e.Message)
}

// logRefusal logs the cause of a refusal the server is to blame for
// (5xx): the answer itself never shows it.
func (s *Server) logRefusal(r *http.Request, e *fault.Error, status int) {
	if status >= 500 {
		s.log.Error("submit failed", "method", r.Method, "path", r.URL.Path, "status", status, "error", e.Cause)
	}
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	id, ok := taskID(w, r)
	if !ok {
		return
	}
	// bodies=omit leaves a payload or result kept off the record (over
	// 3 KiB) out, with its size: the dashboard polls a task this way and
	// fetches a large body only when the operator opens it.
	var omit bool
	switch v := r.URL.Query().Get("bodies"); v {
	case "", "include":
	case "omit":
		omit = true
	default:
		writeError(w, http.StatusBadRequest, triagetype.CodeInvalidField, "bodies", "bodies: must be include (the default) or omit")
		return
	}
	t, err := s.svc.Get(r.Context(), id, omit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, t)
}

// taskID reads the {id} path value; a malformed one gets 400 naming id
// (it could never name a task, and as a key it could be over DynamoDB's
// key size).
func taskID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if err := service.CheckID(id); err != nil {
		writeFault(w, err)
		return "", false
	}
	return id, true
}

// decode reads a JSON body of at most limit bytes into v, rejecting
// unknown fields, trailing data and text that is not UTF-8 (JSON must be;
// Go's decoder would quietly replace bad bytes), and writes the error
// response itself.
func decode(w http.ResponseWriter, r *http.Request, v any, limit int64) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		writeError(w, http.StatusRequestEntityTooLarge, triagetype.CodeTooLarge, "", fmt.Sprintf("the request body is over the %d-byte limit of %s %s (one payload may be at most %d bytes)", limit, r.Method, r.URL.Path, task.MaxPayloadBytes))
		return false
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, triagetype.CodeBadRequest, "", "could not read the request body: "+err.Error())
		return false
	}
	if !utf8.Valid(body) {
		at := 0
		for at < len(body) {
			rn, size := utf8.DecodeRune(body[at:])
			if rn == utf8.RuneError && size <= 1 {
				break
			}
			at += size
		}
		writeError(w, http.StatusBadRequest, triagetype.CodeInvalidJSON, "", fmt.Sprintf("the request body is not valid UTF-8 (at byte %d)", at))
		return false
	}
	if err := DecodeStrict(body, v); err != nil {
		var fe *task.FieldError
		if errors.As(err, &fe) {
			writeError(w, http.StatusBadRequest, triagetype.CodeInvalidField, fe.Field, fe.Error())
		} else {
			writeError(w, http.StatusBadRequest, triagetype.CodeInvalidJSON, "", err.Error())
		}
		return false
	}
	return true
}

// DecodeStrict decodes one JSON value into v, rejecting unknown fields and
// trailing data. Type errors come back as *task.FieldError naming the field.
// A submit (*task.Request) is also held to what its text shows and its
// decoded value does not (task.ValidateRunAtText).
func DecodeStrict(body []byte, v any) error {
	if err := decodeStrict(body, v); err != nil {
		return err
	}
	if _, ok := v.(*task.Request); ok {
		var text struct {
			RunAt json.RawMessage `json:"run_at"` // matched as the decode above matched it
		}
		if err := json.Unmarshal(body, &text); err != nil {
			return fmt.Errorf("request body is not valid JSON: %v", err)
		}
		return task.ValidateRunAtText(text.RunAt)
	}
	return nil
}

func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) && ute.Field != "" {
			return &task.FieldError{Field: ute.Field, Message: fmt.Sprintf("must be a JSON %s, not %s", jsonKind(ute.Type.Kind().String()), ute.Value)}
		}
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			if name := strings.Trim(f, `"`); name != "" {
				return &task.FieldError{Field: name, Message: "is not a known field"}
			}
			return errors.New("request body has a field with an empty name")
		}
		if errors.Is(err, io.EOF) {
			return errors.New("request body is empty; expected a JSON object")
		}
		// The only times in request bodies are run_at; encoding/json passes
		// time.Time's own errors through without naming the field.
		var pe *time.ParseError
		if errors.As(err, &pe) || strings.Contains(err.Error(), "Time.UnmarshalJSON") {
			return &task.FieldError{Field: "run_at", Message: "must be an RFC 3339 time such as 2026-01-02T15:04:05Z"}
		}
		return fmt.Errorf("request body is not valid JSON: %v", err)
	}
	if dec.More() {
		return errors.New("request body has data after the JSON object")
	}
	return nil
}

func jsonKind(goKind string) string {
	switch goKind {
	case "int", "int64", "int32", "float64":
		return "number"
	case "string":
		return "string"
	case "bool":
		return "boolean"
	case "slice":
		return "array"
	case "ptr":
		return "value of the right type"
	}
	return "object"
}

// fail answers with err, an operation's *fault.Error: its kind's status
// and its code, field and message, with a Retry-After when it has one. A
// failure on the server's side (5xx) is logged with its cause, which the
// answer never shows; when the client went away (a closed dashboard tab)
// nothing failed on this side, and nobody reads the answer (499).
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var e *fault.Error
	if !errors.As(err, &e) {
		e = fault.Internal("request", err)
	}
	if fault.Status(e.Kind) >= 500 {
		if r.Context().Err() != nil && (errors.Is(e.Cause, context.Canceled) || errors.Is(e.Cause, context.DeadlineExceeded)) {
			what := strings.TrimSuffix(e.Message, " failed")
			s.log.Debug(what+" abandoned: the client disconnected", "method", r.Method, "path", r.URL.Path)
			writeError(w, 499, triagetype.CodeClientClosed, "", what+": the client disconnected")
			return
		}
		s.log.Error(e.Message, "method", r.Method, "path", r.URL.Path, "error", e.Cause)
	}
	writeFault(w, e)
}

// writeFault writes e (a *fault.Error) as its status and error body.
func writeFault(w http.ResponseWriter, err error) {
	var e *fault.Error
	if !errors.As(err, &e) {
		e = fault.Internal("request", err)
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(max(e.RetryAfter.Seconds(), 1))))
	}
	writeError(w, fault.Status(e.Kind), e.Code, e.Field, e.Message)
}

func writeError(w http.ResponseWriter, status int, code, field, msg string) {
	writeJSON(w, status, triagetype.ErrorBody{Error: triagetype.ErrorDetail{Code: code, Message: msg, Field: field}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
