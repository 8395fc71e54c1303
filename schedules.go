package triage

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/triagehq/triage/triagetype"
)

// PutSchedule creates or replaces a schedule; created says which. Bad
// input is an *Error with status 400 naming the field (cron, timezone,
// task.type, ...).
func (c *Client) PutSchedule(ctx context.Context, s Schedule) (*Schedule, bool, error) {
	return c.t.PutSchedule(ctx, s)
}

// GetSchedule reads one schedule (ErrNotFound if there is none).
func (c *Client) GetSchedule(ctx context.Context, name string) (*Schedule, error) {
	return c.t.GetSchedule(ctx, name)
}

// ListSchedules returns one page of schedules by name.
func (c *Client) ListSchedules(ctx context.Context, limit int, cursor string) (*triagetype.SchedulePage, error) {
	return c.t.ListSchedules(ctx, limit, cursor)
}

// DeleteSchedule removes a schedule; the tasks it made stay.
func (c *Client) DeleteSchedule(ctx context.Context, name string) error {
	return c.t.DeleteSchedule(ctx, name)
}

// PauseSchedule stops a schedule's ticks until ResumeSchedule.
func (c *Client) PauseSchedule(ctx context.Context, name string) (*Schedule, error) {
	return c.t.SetSchedulePaused(ctx, name, true)
}

// ResumeSchedule restarts a paused schedule at its next tick after now.
func (c *Client) ResumeSchedule(ctx context.Context, name string) (*Schedule, error) {
	return c.t.SetSchedulePaused(ctx, name, false)
}

// PutSchedule implements Transport: POST /schedules.
func (h *HTTPTransport) PutSchedule(ctx context.Context, s Schedule) (*Schedule, bool, error) {
	var out Schedule
	status, err := h.do(ctx, http.MethodPost, "/schedules", nil, s, &out)
	if err != nil {
		return nil, false, err
	}
	return &out, status == http.StatusCreated, nil
}

// GetSchedule implements Transport: GET /schedules/{name}.
func (h *HTTPTransport) GetSchedule(ctx context.Context, name string) (*Schedule, error) {
	return h.schedule(ctx, http.MethodGet, name, "")
}

// ListSchedules implements Transport: GET /schedules.
func (h *HTTPTransport) ListSchedules(ctx context.Context, limit int, cursor string) (*triagetype.SchedulePage, error) {
	q := url.Values{}
	if limit != 0 {
		q.Set("limit", fmt.Sprint(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	var p triagetype.SchedulePage
	if _, err := h.do(ctx, http.MethodGet, "/schedules", q, nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// DeleteSchedule implements Transport: DELETE /schedules/{name}.
func (h *HTTPTransport) DeleteSchedule(ctx context.Context, name string) error {
	if name == "" {
		return invalid("name", "is required")
	}
	_, err := h.do(ctx, http.MethodDelete, "/schedules/"+url.PathEscape(name), nil, nil, nil)
	return err
}

// SetSchedulePaused implements Transport: POST
// /schedules/{name}/pause or /resume.
func (h *HTTPTransport) SetSchedulePaused(ctx context.Context, name string, paused bool) (*Schedule, error) {
	if paused {
		return h.schedule(ctx, http.MethodPost, name, "/pause")
	}
	return h.schedule(ctx, http.MethodPost, name, "/resume")
}

func (h *HTTPTransport) schedule(ctx context.Context, method, name, suffix string) (*Schedule, error) {
	if name == "" {
		return nil, invalid("name", "is required") // sent, an empty one would change the route
	}
	var s Schedule
	if _, err := h.do(ctx, method, "/schedules/"+url.PathEscape(name)+suffix, nil, nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}
