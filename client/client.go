// Package client is the Go client of triage's HTTP API.
//
// Every method takes a context first and returns typed errors, so callers
// can write errors.Is(err, client.ErrNotFound); an *Error carries the API's
// code, message, field and Retry-After.
//
// Code running inside AWS next to the dispatcher can use direct.Producer
// (package github.com/triagehq/triage/client/direct) instead:
// it writes the task record and sends the SQS message itself, through the
// same code the API runs, so the two paths cannot drift apart.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Sentinel errors matching the API's status codes.
var (
	ErrBadRequest   = errors.New("bad request")
	ErrUnauthorized = errors.New("unauthorized")
	ErrForbidden    = errors.New("forbidden")
	ErrNotFound     = errors.New("not found")
	ErrConflict     = errors.New("conflict")
	ErrTooLarge     = errors.New("payload too large")
	ErrTooMany      = errors.New("too many requests")
	ErrUnavailable  = errors.New("service unavailable")
	ErrInternal     = errors.New("internal server error")
)

// Error is an API error response.
type Error struct {
	Status     int
	Code       string
	Message    string
	Field      string
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("triage: %d %s: %s (field %s)", e.Status, e.Code, e.Message, e.Field)
	}
	return fmt.Sprintf("triage: %d %s: %s", e.Status, e.Code, e.Message)
}

// Unwrap maps the status to a sentinel error.
func (e *Error) Unwrap() error {
	switch e.Status {
	case http.StatusBadRequest:
		return ErrBadRequest
	case http.StatusUnauthorized:
		return ErrUnauthorized
	case http.StatusForbidden:
		return ErrForbidden
	case http.StatusNotFound:
		return ErrNotFound
	case http.StatusConflict:
		return ErrConflict
	case http.StatusRequestEntityTooLarge:
		return ErrTooLarge
	case http.StatusTooManyRequests:
		return ErrTooMany
	case http.StatusServiceUnavailable:
		return ErrUnavailable
	case http.StatusInternalServerError:
		return ErrInternal
	}
	return nil
}

// ErrorDetail is the body of an API error, {"code", "message", "field"}:
// the shape of every error response and of a failed batch item.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// Client talks to one triage API.
type Client struct {
	base        string
	token       string
	tokenHeader bool
	http        *http.Client
}

// New returns a client for the API at baseURL (e.g. http://127.0.0.1:8080).
func New(baseURL, token string) *Client {
	return &Client{base: strings.TrimRight(baseURL, "/") + "/api/v1", token: token, http: &http.Client{Timeout: 60 * time.Second}}
}

// WithHTTPClient replaces the HTTP client.
func (c *Client) WithHTTPClient(h *http.Client) *Client { c.http = h; return c }

// TokenHeader is the header WithTokenHeader sends the token in.
const TokenHeader = "X-Triage-Token"

// WithTokenHeader sends the token in the X-Triage-Token header instead of
// Authorization. Use it for an API deployed with IAM authorization, with an
// HTTP client (see WithHTTPClient) whose transport signs each request with
// SigV4, which needs the Authorization header for itself.
func (c *Client) WithTokenHeader() *Client { c.tokenHeader = true; return c }

// Task is a task as the API returns it.
type Task struct {
	ID                string          `json:"id"`
	Type              string          `json:"type"`
	Payload           json.RawMessage `json:"payload"`
	Priority          string          `json:"priority"`
	EffectivePriority string          `json:"effective_priority"`
	Status            string          `json:"status"`
	Attempts          int             `json:"attempts"`
	MaxAttempts       int             `json:"max_attempts"`
	TimeoutSeconds    int             `json:"timeout_seconds"`
	RunAt             *time.Time      `json:"run_at,omitempty"`
	CreatedAt         time.Time       `json:"created_at"`
	EnqueuedAt        *time.Time      `json:"enqueued_at,omitempty"`
	StartedAt         *time.Time      `json:"started_at,omitempty"`
	CompletedAt       *time.Time      `json:"completed_at,omitempty"`
	Result            json.RawMessage `json:"result,omitempty"`
	Error             *TaskError      `json:"error,omitempty"`
	IdempotencyKey    string          `json:"idempotency_key,omitempty"`
	TraceID           string          `json:"trace_id,omitempty"`
	RetryAt           *time.Time      `json:"retry_at,omitempty"`
	CancelRequested   bool            `json:"cancel_requested,omitempty"`
	History           []Attempt       `json:"history,omitempty"`
}

// TaskError is a task's recorded failure.
type TaskError struct {
	Message   string `json:"message"`
	Retriable bool   `json:"retriable"`
}

// Attempt is one entry of a task's attempt history.
type Attempt struct {
	Attempt    int       `json:"attempt"`
	WorkerID   string    `json:"worker_id"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	Error      string    `json:"error,omitempty"`
}

// Terminal reports whether the task will not change by itself any more.
func (t *Task) Terminal() bool {
	return t.Status == "completed" || t.Status == "cancelled" || t.Status == "dead_letter"
}

// SubmitRequest is a new task.
type SubmitRequest struct {
	Type           string          `json:"type"`
	Payload        json.RawMessage `json:"payload,omitempty"`
	Priority       string          `json:"priority,omitempty"`
	MaxAttempts    *int            `json:"max_attempts,omitempty"`
	TimeoutSeconds *int            `json:"timeout_seconds,omitempty"`
	RunAt          *time.Time      `json:"run_at,omitempty"`
	DelaySeconds   *int            `json:"delay_seconds,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	// TraceID ties the task to the caller's trace in triage's logs; it
	// defaults to the task's id.
	TraceID string `json:"trace_id,omitempty"`
}

// Submit creates a task. created is false when the idempotency key was
// seen within 24 h and the existing task came back.
func (c *Client) Submit(ctx context.Context, r SubmitRequest) (t *Task, created bool, err error) {
	status, err := c.do(ctx, http.MethodPost, "/tasks", nil, r, &t)
	return t, status == http.StatusCreated, err
}

// Get reads one task.
func (c *Client) Get(ctx context.Context, id string) (*Task, error) {
	var t Task
	_, err := c.do(ctx, http.MethodGet, "/tasks/"+url.PathEscape(id), nil, nil, &t)
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// Wait polls a task every interval until it is terminal or ctx ends.
func (c *Client) Wait(ctx context.Context, id string, interval time.Duration) (*Task, error) {
	for {
		t, err := c.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		if t.Terminal() {
			return t, nil
		}
		select {
		case <-ctx.Done():
			return t, ctx.Err()
		case <-time.After(interval):
		}
	}
}

// do sends a request and decodes a 2xx JSON response into out.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, body, out any) (int, error) {
	status, data, err := c.send(ctx, method, path, query, body)
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

// send sends a request and returns a 2xx response's status and body, or an
// *Error for any other status.
func (c *Client) send(ctx context.Context, method, path string, query url.Values, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, fmt.Errorf("encode %s %s request: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	switch {
	case c.token == "":
	case c.tokenHeader:
		req.Header.Set(TokenHeader, c.token)
	default:
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("%s %s: read response: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, nil, apiError(resp, data)
	}
	return resp.StatusCode, data, nil
}

// apiError builds the *Error of a non-2xx response. A body that is not the
// API's error shape (a proxy's HTML page, say) becomes the message.
func apiError(resp *http.Response, data []byte) *Error {
	e := &Error{Status: resp.StatusCode}
	var eb struct {
		Error *ErrorDetail `json:"error"`
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
