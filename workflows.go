package triage

import (
	"context"
	"net/http"
	"net/url"

	"github.com/triagehq/triage/triagetype"
)

// SubmitWorkflow submits a workflow: named nodes that wait for each other
// (WorkflowNode.After names nodes). It is validated whole before anything
// is written (a cycle, a missing or duplicate name, more than
// triagetype.MaxWorkflowNodes nodes or a chain deeper than
// triagetype.MaxWorkflowDepth is an
// *Error matching ErrBadRequest that names the nodes), and recorded whole
// before any node can run. created is false when r's idempotency key named
// an earlier workflow: that one comes back, completed if a crash had left
// it half-written.
func (c *Client) SubmitWorkflow(ctx context.Context, r WorkflowRequest) (w *triagetype.Workflow, created bool, err error) {
	return c.t.SubmitWorkflow(ctx, r)
}

// GetWorkflow reads a workflow with its progress and every node's status.
func (c *Client) GetWorkflow(ctx context.Context, id string) (*triagetype.Workflow, error) {
	return c.t.GetWorkflow(ctx, id)
}

// WithAfter makes the task wait for the tasks ids (at most
// triagetype.MaxParents): it
// is recorded waiting and enters its queue when every one has completed.
func WithAfter(ids ...string) SubmitOption {
	return func(r *SubmitRequest) { r.After = append(r.After, ids...) }
}

// WithOnParentFailure says what the task does when a parent is
// dead-lettered or cancelled (triagetype.OnParentCancel, the default;
// triagetype.OnParentRun; triagetype.OnParentDeadLetter).
func WithOnParentFailure(p triagetype.ParentPolicy) SubmitOption {
	return func(r *SubmitRequest) { r.OnParentFailure = string(p) }
}

// SubmitWorkflow implements Transport: POST /workflows, where 201
// is created and 200 an existing workflow.
func (h *HTTPTransport) SubmitWorkflow(ctx context.Context, r WorkflowRequest) (*triagetype.Workflow, bool, error) {
	var w triagetype.Workflow
	status, err := h.do(ctx, http.MethodPost, "/workflows", nil, r, &w)
	if err != nil {
		return nil, false, err
	}
	return &w, status == http.StatusCreated, nil
}

// GetWorkflow implements Transport: GET /workflows/{id}.
func (h *HTTPTransport) GetWorkflow(ctx context.Context, id string) (*triagetype.Workflow, error) {
	var w triagetype.Workflow
	if _, err := h.do(ctx, http.MethodGet, "/workflows/"+url.PathEscape(id), nil, nil, &w); err != nil {
		return nil, err
	}
	return &w, nil
}
