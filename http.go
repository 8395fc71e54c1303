package triage

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// HTTPTransport is the transport over triage's HTTP API; it links no AWS
// SDK. Make one with HTTP.
type HTTPTransport struct {
	base        string
	token       string
	tokenHeader bool
	http        *http.Client
}

// HTTPOption configures HTTP.
type HTTPOption func(*HTTPTransport)

// WithHTTPClient sends requests with h instead of a client with a 60 s
// timeout: to sign requests, to proxy them, or to change the timeout.
func WithHTTPClient(h *http.Client) HTTPOption {
	return func(t *HTTPTransport) { t.http = h }
}

// WithTokenHeader sends the token in the TokenHeader header instead of
// Authorization. Use it for an API deployed with IAM authorization, with
// an HTTP client (WithHTTPClient) whose transport signs each request with
// SigV4, which needs the Authorization header for itself.
func WithTokenHeader() HTTPOption {
	return func(t *HTTPTransport) { t.tokenHeader = true }
}

// HTTP returns the transport for the API at baseURL (the server's root,
// such as http://127.0.0.1:8080; the /api/v1 prefix is added), sending
// token as a bearer token. An empty token sends none.
func HTTP(baseURL, token string, opts ...HTTPOption) *HTTPTransport {
	t := &HTTPTransport{
		base:  strings.TrimRight(baseURL, "/") + "/api/v1",
		token: token,
		http:  &http.Client{Timeout: 60 * time.Second},
	}
	for _, o := range opts {
		o(t)
	}
	return t
}

// Submit implements Transport: POST /tasks, where 201 is created and 200
// an existing task.
func (h *HTTPTransport) Submit(ctx context.Context, r SubmitRequest) (*Task, bool, error) {
	var t Task
	status, err := h.do(ctx, http.MethodPost, "/tasks", nil, r, &t)
	if err != nil {
		return nil, false, err
	}
	return &t, status == http.StatusCreated, nil
}

// SubmitBatch implements Transport: POST /tasks/batch.
func (h *HTTPTransport) SubmitBatch(ctx context.Context, rs []SubmitRequest) ([]triagetype.BatchResult, error) {
	var out triagetype.BatchResponse
	if _, err := h.do(ctx, http.MethodPost, "/tasks/batch", nil, triagetype.BatchRequest{Tasks: rs}, &out); err != nil {
		return nil, err
	}
	return out.Results, nil
}

// Get implements Transport: GET /tasks/{id}.
func (h *HTTPTransport) Get(ctx context.Context, id string) (*Task, error) {
	return h.task(ctx, http.MethodGet, id, "")
}

// List implements Transport: GET /tasks.
func (h *HTTPTransport) List(ctx context.Context, p ListParams) (*triagetype.TaskPage, error) {
	q := url.Values{}
	for k, v := range map[string]string{"type": p.Type, "status": string(p.Status), "priority": string(p.Priority), "suspended": p.Suspended, "cursor": p.Cursor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	var out triagetype.TaskPage
	if _, err := h.do(ctx, http.MethodGet, "/tasks", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Cancel implements Transport: POST /tasks/{id}/cancel.
func (h *HTTPTransport) Cancel(ctx context.Context, id string) (*Task, error) {
	return h.task(ctx, http.MethodPost, id, "/cancel")
}

// Retry implements Transport: POST /tasks/{id}/retry.
func (h *HTTPTransport) Retry(ctx context.Context, id string) (*Task, error) {
	return h.task(ctx, http.MethodPost, id, "/retry")
}

// task sends a request about task id (to /tasks/{id}, then suffix).
func (h *HTTPTransport) task(ctx context.Context, method, id, suffix string) (*Task, error) {
	if id == "" {
		return nil, task.CheckID(id).APIError("")
	}
	var t Task
	if _, err := h.do(ctx, method, "/tasks/"+url.PathEscape(id)+suffix, nil, nil, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// Delete implements Transport: DELETE /tasks/{id}.
func (h *HTTPTransport) Delete(ctx context.Context, id string) error {
	if id == "" {
		return task.CheckID(id).APIError("")
	}
	_, err := h.do(ctx, http.MethodDelete, "/tasks/"+url.PathEscape(id), nil, nil, nil)
	return err
}

// StartCleanup implements Transport: DELETE /tasks?older_than= (202).
func (h *HTTPTransport) StartCleanup(ctx context.Context, olderThan time.Time) (*triagetype.Cleanup, error) {
	var out triagetype.Cleanup
	q := url.Values{"older_than": {olderThan.UTC().Format(time.RFC3339)}}
	if _, err := h.do(ctx, http.MethodDelete, "/tasks", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetCleanup implements Transport: GET /cleanups/{id}.
func (h *HTTPTransport) GetCleanup(ctx context.Context, id string) (*triagetype.Cleanup, error) {
	if id == "" {
		return nil, task.CheckID(id).APIError("")
	}
	var out triagetype.Cleanup
	if _, err := h.do(ctx, http.MethodGet, "/cleanups/"+url.PathEscape(id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetStats implements Transport: GET /stats.
func (h *HTTPTransport) GetStats(ctx context.Context) (*triagetype.Stats, error) {
	var s triagetype.Stats
	if _, err := h.do(ctx, http.MethodGet, "/stats", nil, nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// ListWorkers implements Transport: GET /workers.
func (h *HTTPTransport) ListWorkers(ctx context.Context) (*triagetype.WorkerList, error) {
	var l triagetype.WorkerList
	if _, err := h.do(ctx, http.MethodGet, "/workers", nil, nil, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// SetPaused implements Transport: POST /control/pause or /control/resume.
func (h *HTTPTransport) SetPaused(ctx context.Context, typ string, paused bool) (*triagetype.ControlSettings, error) {
	path := "/control/resume"
	if paused {
		path = "/control/pause"
	}
	var q url.Values
	if typ != "" {
		q = url.Values{"type": {typ}}
	}
	var s triagetype.ControlSettings
	if _, err := h.do(ctx, http.MethodPost, path, q, nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// SetLimits implements Transport: PUT /control/types/{type}.
func (h *HTTPTransport) SetLimits(ctx context.Context, typ string, l triagetype.LimitsRequest) (*triagetype.ControlSettings, error) {
	if typ == "" {
		// Limits are per type; sent, an empty one would change the route.
		return nil, invalid("type", "is required")
	}
	var s triagetype.ControlSettings
	if _, err := h.do(ctx, http.MethodPut, "/control/types/"+url.PathEscape(typ), nil, l, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// ListControls implements Transport: GET /control.
func (h *HTTPTransport) ListControls(ctx context.Context) ([]triagetype.ControlSettings, error) {
	var out struct {
		Controls []triagetype.ControlSettings `json:"controls"`
	}
	if _, err := h.do(ctx, http.MethodGet, "/control", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Controls, nil
}

// ListDLQ implements Transport: GET /dlq.
func (h *HTTPTransport) ListDLQ(ctx context.Context, priority Priority, limit int) ([]triagetype.DLQMessage, error) {
	q := url.Values{}
	if priority != "" {
		q.Set("priority", string(priority))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out struct {
		Messages []triagetype.DLQMessage `json:"messages"`
	}
	if _, err := h.do(ctx, http.MethodGet, "/dlq", q, nil, &out); err != nil {
		return nil, err
	}
	return out.Messages, nil
}

// ReplayDLQ implements Transport: POST /dlq/replay.
func (h *HTTPTransport) ReplayDLQ(ctx context.Context, r triagetype.ReplayRequest) (*triagetype.ReplayResult, error) {
	var out triagetype.ReplayResult
	if _, err := h.do(ctx, http.MethodPost, "/dlq/replay", nil, r, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// OpenAPI returns the API's OpenAPI 3.1 document as the server serves it.
// Only the HTTP transport has it: it describes the HTTP API.
func (h *HTTPTransport) OpenAPI(ctx context.Context) ([]byte, error) {
	_, data, err := h.send(ctx, http.MethodGet, "/openapi.json", nil, nil)
	return data, err
}

// invalid is the answer to a bad parameter, as the server gives it.
func invalid(field, msg string) *Error {
	return (&task.FieldError{Field: field, Message: msg}).APIError("")
}

// do sends a request and decodes a 2xx JSON response into out.
func (h *HTTPTransport) do(ctx context.Context, method, path string, query url.Values, body, out any) (int, error) {
	status, data, err := h.send(ctx, method, path, query, body)
	if err != nil {
		return status, err
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return status, fmt.Errorf("%s %s: decode response: %w", method, path, err)
		}
	}
	return status, nil
}

// send sends a request and returns a 2xx response's status and body, or
// an *Error for any other status.
func (h *HTTPTransport) send(ctx context.Context, method, path string, query url.Values, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, fmt.Errorf("encode %s %s request: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	u := h.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	switch {
	case h.token == "":
	case h.tokenHeader:
		req.Header.Set(TokenHeader, h.token)
	default:
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	req.Header.Set("Accept", "application/json")
	if tp := traceparentOf(ctx); tp != "" {
		req.Header.Set(traceHeader, tp) // the API starts the submit span under it
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.http.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("%s %s: read response: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, nil, responseError(resp, data)
	}
	return resp.StatusCode, data, nil
}

// responseError builds the *Error of a non-2xx response. A body that is
// not the API's error shape (a proxy's HTML page, say) becomes the message.
func responseError(resp *http.Response, data []byte) *Error {
	e := &Error{Status: resp.StatusCode}
	var eb struct {
		Error *triagetype.ErrorDetail `json:"error"`
	}
	if json.Unmarshal(data, &eb) == nil && eb.Error != nil {
		e.Code, e.Message, e.Field = eb.Error.Code, eb.Error.Message, eb.Error.Field
	} else {
		e.Message = strings.TrimSpace(string(data))
		if e.Message == "" {
			e.Message = http.StatusText(resp.StatusCode)
		}
	}
	e.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	return e
}

// parseRetryAfter reads a Retry-After header, which RFC 9110 allows as
// whole seconds or as an HTTP date; anything else (or a date in the past)
// is zero.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

var _ Transport = (*HTTPTransport)(nil)
