// Package client is the old Go client of triage's HTTP API.
//
// Deprecated: use package triage (github.com/triagehq/triage), whose
// Client has the same methods over HTTP or, with package direct, over
// DynamoDB and SQS: triage.NewClient(triage.HTTP(url, token)). This
// package is a thin wrapper kept for compatibility: its types are aliases
// of triage's and its Client calls a triage.Client.
package client

import (
	"context"
	"net/http"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/triagetype"
)

// Aliases of the types package triage defines.
type (
	Task            = triage.Task
	TaskError       = triage.TaskError
	Attempt         = triage.Attempt
	SubmitRequest   = triage.SubmitRequest
	BatchRequest    = triagetype.BatchRequest
	BatchResponse   = triagetype.BatchResponse
	BatchResult     = triage.BatchResult
	ListOptions     = triage.ListParams
	TaskList        = triage.TaskPage
	Stats           = triage.Stats
	QueueStats      = triage.QueueStats
	Throughput      = triage.Throughput
	ControlSettings = triage.ControlSettings
	LimitsRequest   = triage.LimitsRequest
	DLQMessage      = triage.DLQMessage
	ReplayRequest   = triage.ReplayRequest
	ReplayResult    = triage.ReplayResult
	Error           = triage.Error
	ErrorDetail     = triage.ErrorDetail
)

// Sentinel errors: the same values as triage's, so errors.Is matches
// either name.
var (
	ErrBadRequest   = triage.ErrBadRequest
	ErrUnauthorized = triage.ErrUnauthorized
	ErrForbidden    = triage.ErrForbidden
	ErrNotFound     = triage.ErrNotFound
	ErrConflict     = triage.ErrConflict
	ErrTooLarge     = triage.ErrTooLarge
	ErrTooMany      = triage.ErrTooMany
	ErrUnavailable  = triage.ErrUnavailable
	ErrInternal     = triage.ErrInternal
	ErrStop         = triage.ErrStop
)

// MaxBatch is triage.MaxBatch.
const MaxBatch = triage.MaxBatch

// TokenHeader is triage.TokenHeader.
const TokenHeader = triage.TokenHeader

// Client talks to one triage API through a triage.Client, whose methods
// it has.
//
// Deprecated: use triage.NewClient(triage.HTTP(baseURL, token)).
type Client struct {
	*triage.Client
	base, token string
	opts        []triage.HTTPOption
	http        *triage.HTTPTransport
}

// New returns a client for the API at baseURL (e.g. http://127.0.0.1:8080).
//
// Deprecated: use triage.NewClient(triage.HTTP(baseURL, token)).
func New(baseURL, token string) *Client {
	c := &Client{base: baseURL, token: token}
	c.build()
	return c
}

func (c *Client) build() {
	c.http = triage.HTTP(c.base, c.token, c.opts...)
	c.Client = triage.NewClient(c.http)
}

// WithHTTPClient replaces the HTTP client.
//
// Deprecated: use triage.HTTP with triage.WithHTTPClient.
func (c *Client) WithHTTPClient(h *http.Client) *Client {
	c.opts = append(c.opts, triage.WithHTTPClient(h))
	c.build()
	return c
}

// WithTokenHeader sends the token in the X-Triage-Token header.
//
// Deprecated: use triage.HTTP with triage.WithTokenHeader.
func (c *Client) WithTokenHeader() *Client {
	c.opts = append(c.opts, triage.WithTokenHeader())
	c.build()
	return c
}

// Submit creates the task r describes; created is false when its
// idempotency key was seen within 24 h.
//
// Deprecated: use triage.Client.Submit, with SubmitOptions.
func (c *Client) Submit(ctx context.Context, r SubmitRequest) (t *Task, created bool, err error) {
	return c.http.Submit(ctx, r)
}

// DLQ reads up to limit messages from priority's DLQ, or from all three
// when priority is empty.
//
// Deprecated: use triage.Client.DLQ.
func (c *Client) DLQ(ctx context.Context, priority string, limit int) ([]DLQMessage, error) {
	return c.Client.DLQ(ctx, triage.Priority(priority), limit)
}

// OpenAPI returns the API's OpenAPI 3.1 document.
//
// Deprecated: use triage.HTTPTransport.OpenAPI.
func (c *Client) OpenAPI(ctx context.Context) ([]byte, error) { return c.http.OpenAPI(ctx) }
