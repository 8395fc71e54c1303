// Package api is triage's HTTP API under /api/v1.
//
// It is one net/http handler: `triage dev` serves it on a local listener
// and functions/api serves the same handler to API Gateway through
// aws-lambda-go-api-proxy. Every error has one JSON shape,
// {"error": {"code", "message", "field"}}, and a fitting status.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/triagehq/triage/internal/auth"
	"github.com/triagehq/triage/internal/enqueue"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
)

// Store is the part of the task store the API uses.
type Store interface {
	Get(ctx context.Context, id string) (*task.Task, error)
	Now() time.Time
}

// Enqueuer creates tasks and sends their messages.
type Enqueuer interface {
	Submit(ctx context.Context, t *task.Task) (*task.Task, bool, error)
}

// Options tunes the API.
type Options struct {
	// DirectWindow: a task whose run_at is further away than this starts
	// scheduled and is released by the promoter; nearer ones are sent at
	// once with a delay (15 min, SQS's longest delay).
	DirectWindow time.Duration
	Logger       *slog.Logger
}

// Server serves the API.
type Server struct {
	store  Store
	enq    Enqueuer
	tokens *auth.Tokens
	opt    Options
	log    *slog.Logger
	mux    *http.ServeMux
}

// New returns the API handler.
func New(s Store, e Enqueuer, tokens *auth.Tokens, opt Options) *Server {
	if opt.DirectWindow <= 0 {
		opt.DirectWindow = 15 * time.Minute
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	srv := &Server{store: s, enq: e, tokens: tokens, opt: opt, log: opt.Logger, mux: http.NewServeMux()}
	srv.routes()
	return srv
}

func (s *Server) routes() {
	s.handle("POST /api/v1/tasks", auth.Submit, s.submit)
	s.handle("GET /api/v1/tasks/{id}", auth.Read, s.get)
	s.mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "", fmt.Sprintf("no route %s %s", r.Method, r.URL.Path))
	})
}

// handle registers an authenticated route.
func (s *Server) handle(pattern string, scope auth.Scope, h func(http.ResponseWriter, *http.Request)) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if err := s.tokens.Check(r.Header.Get("Authorization"), scope); err != nil {
			if errors.Is(err, auth.ErrForbidden) {
				writeError(w, http.StatusForbidden, "forbidden", "", err.Error())
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="triage"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", "", "missing or invalid bearer token")
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
			writeError(w, http.StatusInternalServerError, "internal", "", "internal error")
		}
	}()
	s.mux.ServeHTTP(w, r)
}

// maxBody bounds a request body: the payload limit plus room for the other fields.
const maxBody = task.MaxPayloadBytes + 64<<10

func (s *Server) submit(w http.ResponseWriter, r *http.Request) {
	var req task.Request
	if !decode(w, r, &req) {
		return
	}
	if !validate(w, &req) {
		return
	}
	t := req.NewTask(s.store.Now().UTC(), s.opt.DirectWindow)
	saved, created, err := s.enq.Submit(r.Context(), t)
	if err != nil {
		s.internal(w, r, "submit task", err)
		return
	}
	status := http.StatusCreated
	if !created {
		status = http.StatusOK
	}
	writeJSON(w, status, saved)
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	t, err := s.store.Get(r.Context(), r.PathValue("id"))
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, "not_found", "id", fmt.Sprintf("no task with id %q", r.PathValue("id")))
		return
	}
	if err != nil {
		s.internal(w, r, "get task", err)
		return
	}
	writeJSON(w, http.StatusOK, t)
}

// decode reads a JSON body into v, rejecting unknown fields, trailing data
// and bodies over maxBody, and writes the error response itself.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", "payload", fmt.Sprintf("request body is over %d bytes; a payload may be at most %d bytes", maxBody, task.MaxPayloadBytes))
		return false
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", "", "could not read the request body: "+err.Error())
		return false
	}
	if err := DecodeStrict(body, v); err != nil {
		var fe *task.FieldError
		if errors.As(err, &fe) {
			writeError(w, http.StatusBadRequest, "invalid_field", fe.Field, fe.Error())
		} else {
			writeError(w, http.StatusBadRequest, "invalid_json", "", err.Error())
		}
		return false
	}
	return true
}

// DecodeStrict decodes one JSON value into v, rejecting unknown fields and
// trailing data. Type errors come back as *task.FieldError naming the field.
func DecodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) && ute.Field != "" {
			return &task.FieldError{Field: ute.Field, Message: fmt.Sprintf("must be a JSON %s, not %s", jsonKind(ute.Type.Kind().String()), ute.Value)}
		}
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return &task.FieldError{Field: strings.Trim(f, `"`), Message: "is not a known field"}
		}
		if errors.Is(err, io.EOF) {
			return errors.New("request body is empty; expected a JSON object")
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

func validate(w http.ResponseWriter, req *task.Request) bool {
	err := req.Validate()
	if err == nil {
		return true
	}
	var fe *task.FieldError
	if errors.As(err, &fe) {
		if fe.TooLarge {
			writeError(w, http.StatusRequestEntityTooLarge, "too_large", fe.Field, fe.Error())
		} else {
			writeError(w, http.StatusBadRequest, "invalid_field", fe.Field, fe.Error())
		}
		return false
	}
	writeError(w, http.StatusBadRequest, "bad_request", "", err.Error())
	return false
}

func (s *Server) internal(w http.ResponseWriter, r *http.Request, what string, err error) {
	s.log.Error(what+" failed", "method", r.Method, "path", r.URL.Path, "error", err)
	if errors.Is(err, enqueue.ErrNotSent) {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "unavailable", "", "the queue did not accept the task; nothing was recorded, try again")
		return
	}
	writeError(w, http.StatusInternalServerError, "internal", "", what+" failed")
}

// ErrorBody is the JSON shape of every error response.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail says what went wrong, and which field when one is to blame.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

func writeError(w http.ResponseWriter, status int, code, field, msg string) {
	writeJSON(w, status, ErrorBody{Error: ErrorDetail{Code: code, Message: msg, Field: field}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
