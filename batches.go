package triage

import (
	"context"
	"net/http"
	"net/url"

	"github.com/triagehq/triage/triagetype"
)

// CreateBatch creates a batch: r.Tasks are its first members (at most
// MaxBatch), r.OnComplete the task enqueued exactly once when every member
// has finished (its payload is a triagetype.BatchCallback with the counts). The batch
// is sealed at once unless r.Open: then add members with AddToBatch (or
// WithBatch on any submit) and close it with SealBatch. A refused
// on_complete or member count is an *Error matching ErrBadRequest naming
// the field; each member's own outcome is in Batch.Results, as in
// SubmitBatch.
func (c *Client) CreateBatch(ctx context.Context, r BatchCreate) (*triagetype.Batch, error) {
	return c.t.CreateBatch(ctx, r)
}

// AddToBatch adds members (1 to MaxBatch) to open batch id. A member of a
// sealed or unknown batch is refused in its Batch.Results item (field
// tasks[i].batch_id); nothing of it is sent.
func (c *Client) AddToBatch(ctx context.Context, id string, rs []SubmitRequest) (*triagetype.Batch, error) {
	return c.t.AddToBatch(ctx, id, rs)
}

// SealBatch closes batch id to new members. It completes (and its
// callback is enqueued) when every member has finished, at once if they
// all have. Sealing a sealed or completed batch changes nothing.
func (c *Client) SealBatch(ctx context.Context, id string) (*triagetype.Batch, error) {
	return c.t.SealBatch(ctx, id)
}

// GetBatch reads batch id: its state and progress (done of total, by
// outcome), an O(1) read, and once completed its callback's task id.
func (c *Client) GetBatch(ctx context.Context, id string) (*triagetype.Batch, error) {
	return c.t.GetBatch(ctx, id)
}

// WithBatch makes the task a member of open batch id.
func WithBatch(id string) SubmitOption {
	return func(r *SubmitRequest) { r.BatchID = id }
}

// CreateBatch implements Transport: POST /batches.
func (h *HTTPTransport) CreateBatch(ctx context.Context, r BatchCreate) (*triagetype.Batch, error) {
	return h.batchCall(ctx, http.MethodPost, "/batches", r)
}

// AddToBatch implements Transport: POST /batches/{id}/tasks.
func (h *HTTPTransport) AddToBatch(ctx context.Context, id string, rs []SubmitRequest) (*triagetype.Batch, error) {
	return h.batchCall(ctx, http.MethodPost, "/batches/"+url.PathEscape(id)+"/tasks", BatchCreate{Tasks: rs})
}

// SealBatch implements Transport: POST /batches/{id}/seal.
func (h *HTTPTransport) SealBatch(ctx context.Context, id string) (*triagetype.Batch, error) {
	return h.batchCall(ctx, http.MethodPost, "/batches/"+url.PathEscape(id)+"/seal", nil)
}

// GetBatch implements Transport: GET /batches/{id}.
func (h *HTTPTransport) GetBatch(ctx context.Context, id string) (*triagetype.Batch, error) {
	return h.batchCall(ctx, http.MethodGet, "/batches/"+url.PathEscape(id), nil)
}

func (h *HTTPTransport) batchCall(ctx context.Context, method, path string, body any) (*triagetype.Batch, error) {
	var b triagetype.Batch
	if _, err := h.do(ctx, method, path, nil, body, &b); err != nil {
		return nil, err
	}
	return &b, nil
}
