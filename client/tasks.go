package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// MaxBatch is the most tasks one SubmitBatch call may carry; the API
// refuses larger (and empty) batches with 400 naming the field "tasks".
const MaxBatch = 100

// BatchRequest is the body of POST /tasks/batch.
type BatchRequest struct {
	Tasks []SubmitRequest `json:"tasks"`
}

// BatchResponse is the answer to POST /tasks/batch: one result per
// submitted task, in request order.
type BatchResponse struct {
	Results []BatchResult `json:"results"`
}

// BatchResult is the outcome of one task of a batch. Status is what a
// single submit would have answered: 201 created, 200 existing (idempotency
// key seen), or an error status with Error set.
type BatchResult struct {
	Index  int          `json:"index"`
	Status int          `json:"status"`
	Task   *Task        `json:"task,omitempty"`
	Error  *ErrorDetail `json:"error,omitempty"`
}

// Created reports whether this item made a new task.
func (r *BatchResult) Created() bool { return r.Status == http.StatusCreated }

// Err is the item's failure as an *Error (so errors.Is(err, ErrTooMany)
// works per item), or nil when the task was accepted.
func (r *BatchResult) Err() error {
	if r.Status >= 200 && r.Status < 300 && r.Error == nil {
		return nil
	}
	e := &Error{Status: r.Status}
	if r.Error != nil {
		e.Code, e.Message, e.Field = r.Error.Code, r.Error.Message, r.Error.Field
	}
	return e
}

// SubmitBatch submits up to MaxBatch tasks in one request. The call fails
// as a whole only when the request does (auth, a malformed batch, the
// network); each task's own outcome is in its BatchResult, so a batch can
// partly succeed.
func (c *Client) SubmitBatch(ctx context.Context, tasks []SubmitRequest) ([]BatchResult, error) {
	var out BatchResponse
	if _, err := c.do(ctx, http.MethodPost, "/tasks/batch", nil, BatchRequest{Tasks: tasks}, &out); err != nil {
		return nil, err
	}
	if len(out.Results) != len(tasks) {
		return out.Results, fmt.Errorf("POST /tasks/batch: %d results for %d tasks", len(out.Results), len(tasks))
	}
	return out.Results, nil
}

// ListOptions filters and pages GET /tasks. Zero values mean "no filter"
// and the server's default page size (100).
type ListOptions struct {
	Type   string
	Status string
	// Priority filters on the effective priority, the queue a task is on now.
	Priority string
	// Limit is the page size, 1..1000.
	Limit  int
	Cursor string
}

func (o ListOptions) query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"type": o.Type, "status": o.Status, "priority": o.Priority, "cursor": o.Cursor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	return q
}

// TaskList is one page of tasks. NextCursor is empty on the last page.
type TaskList struct {
	Tasks      []Task `json:"tasks"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// List reads one page of tasks; pass the page's NextCursor as
// opts.Cursor to read the next one, or use ListAll.
func (c *Client) List(ctx context.Context, opts ListOptions) (*TaskList, error) {
	var out TaskList
	if _, err := c.do(ctx, http.MethodGet, "/tasks", opts.query(), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ErrStop, returned by a ListAll callback, ends the walk early without an
// error.
var ErrStop = errors.New("stop listing")

// ListAll calls fn for every task matching opts, following next_cursor from
// page to page (starting at opts.Cursor). It stops at the first error from
// the API or from fn; ErrStop from fn stops it with a nil error. A server
// that hands back a cursor it already gave is an error rather than an
// endless loop.
func (c *Client) ListAll(ctx context.Context, opts ListOptions, fn func(*Task) error) error {
	seen := map[string]bool{}
	for {
		page, err := c.List(ctx, opts)
		if err != nil {
			return err
		}
		for i := range page.Tasks {
			if err := fn(&page.Tasks[i]); err != nil {
				if errors.Is(err, ErrStop) {
					return nil
				}
				return err
			}
		}
		if page.NextCursor == "" {
			return nil
		}
		if seen[page.NextCursor] {
			return fmt.Errorf("list tasks: the server repeated cursor %q", page.NextCursor)
		}
		seen[page.NextCursor] = true
		opts.Cursor = page.NextCursor
	}
}

// Cancel cancels a task that is not terminal. A queued, scheduled or
// retrying task comes back cancelled; an executing one comes back with
// CancelRequested set, and its handler's context is cancelled at the next
// heartbeat. A terminal task is ErrConflict.
func (c *Client) Cancel(ctx context.Context, id string) (*Task, error) {
	return c.taskOp(ctx, http.MethodPost, "/tasks/"+url.PathEscape(id)+"/cancel")
}

// Retry puts a dead_letter task back on its queue with its attempts reset
// and its error cleared. Any other status (cancelled too) is ErrConflict.
func (c *Client) Retry(ctx context.Context, id string) (*Task, error) {
	return c.taskOp(ctx, http.MethodPost, "/tasks/"+url.PathEscape(id)+"/retry")
}

func (c *Client) taskOp(ctx context.Context, method, path string) (*Task, error) {
	var t Task
	if _, err := c.do(ctx, method, path, nil, nil, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// Delete removes a terminal task. A task that is not terminal is
// ErrConflict: cancel it first.
func (c *Client) Delete(ctx context.Context, id string) error {
	_, err := c.do(ctx, http.MethodDelete, "/tasks/"+url.PathEscape(id), nil, nil, nil)
	return err
}

// Cleanup deletes every terminal task that finished before olderThan and
// returns how many it deleted.
func (c *Client) Cleanup(ctx context.Context, olderThan time.Time) (int, error) {
	var out struct {
		Deleted int `json:"deleted"`
	}
	q := url.Values{"older_than": {olderThan.UTC().Format(time.RFC3339)}}
	if _, err := c.do(ctx, http.MethodDelete, "/tasks", q, nil, &out); err != nil {
		return 0, err
	}
	return out.Deleted, nil
}
