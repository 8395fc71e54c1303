package triage

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
)

// ScheduleTransport is the part of a Transport that manages schedules.
// Both of triage's transports implement it; a Transport of one's own need
// not, and the Client's schedule methods then return ErrNoSchedules.
type ScheduleTransport interface {
	// PutSchedule creates (created true) or replaces the schedule s names.
	PutSchedule(ctx context.Context, s Schedule) (sc *Schedule, created bool, err error)
	GetSchedule(ctx context.Context, name string) (*Schedule, error)
	// ListSchedules returns up to limit (1 to 100; 0: 100) schedules by
	// name after cursor ("" from the start).
	ListSchedules(ctx context.Context, limit int, cursor string) (*SchedulePage, error)
	DeleteSchedule(ctx context.Context, name string) error
	SetSchedulePaused(ctx context.Context, name string, paused bool) (*Schedule, error)
}

// ErrNoSchedules is returned by the Client's schedule methods when its
// Transport does not implement ScheduleTransport.
var ErrNoSchedules = errors.New("this transport does not manage schedules")

func (c *Client) schedules() (ScheduleTransport, error) {
	st, ok := c.t.(ScheduleTransport)
	if !ok {
		return nil, fmt.Errorf("%T: %w", c.t, ErrNoSchedules)
	}
	return st, nil
}

// PutSchedule creates or replaces a schedule; created says which. Bad
// input is an *Error with status 400 naming the field (cron, timezone,
// task.type, ...).
func (c *Client) PutSchedule(ctx context.Context, s Schedule) (*Schedule, bool, error) {
	st, err := c.schedules()
	if err != nil {
		return nil, false, err
	}
	return st.PutSchedule(ctx, s)
}

// GetSchedule reads one schedule (ErrNotFound if there is none).
func (c *Client) GetSchedule(ctx context.Context, name string) (*Schedule, error) {
	st, err := c.schedules()
	if err != nil {
		return nil, err
	}
	return st.GetSchedule(ctx, name)
}

// ListSchedules returns one page of schedules by name.
func (c *Client) ListSchedules(ctx context.Context, limit int, cursor string) (*SchedulePage, error) {
	st, err := c.schedules()
	if err != nil {
		return nil, err
	}
	return st.ListSchedules(ctx, limit, cursor)
}

// DeleteSchedule removes a schedule; the tasks it made stay.
func (c *Client) DeleteSchedule(ctx context.Context, name string) error {
	st, err := c.schedules()
	if err != nil {
		return err
	}
	return st.DeleteSchedule(ctx, name)
}

// PauseSchedule stops a schedule's ticks until ResumeSchedule.
func (c *Client) PauseSchedule(ctx context.Context, name string) (*Schedule, error) {
	st, err := c.schedules()
	if err != nil {
		return nil, err
	}
	return st.SetSchedulePaused(ctx, name, true)
}

// ResumeSchedule restarts a paused schedule at its next tick after now.
func (c *Client) ResumeSchedule(ctx context.Context, name string) (*Schedule, error) {
	st, err := c.schedules()
	if err != nil {
		return nil, err
	}
	return st.SetSchedulePaused(ctx, name, false)
}

var _ ScheduleTransport = (*HTTPTransport)(nil)

// PutSchedule implements ScheduleTransport: POST /schedules.
func (h *HTTPTransport) PutSchedule(ctx context.Context, s Schedule) (*Schedule, bool, error) {
	var out Schedule
	status, err := h.do(ctx, http.MethodPost, "/schedules", nil, s, &out)
	if err != nil {
		return nil, false, err
	}
	return &out, status == http.StatusCreated, nil
}

// GetSchedule implements ScheduleTransport: GET /schedules/{name}.
func (h *HTTPTransport) GetSchedule(ctx context.Context, name string) (*Schedule, error) {
	return h.schedule(ctx, http.MethodGet, name, "")
}

// ListSchedules implements ScheduleTransport: GET /schedules.
func (h *HTTPTransport) ListSchedules(ctx context.Context, limit int, cursor string) (*SchedulePage, error) {
	q := url.Values{}
	if limit != 0 {
		q.Set("limit", fmt.Sprint(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	var p SchedulePage
	if _, err := h.do(ctx, http.MethodGet, "/schedules", q, nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// DeleteSchedule implements ScheduleTransport: DELETE /schedules/{name}.
func (h *HTTPTransport) DeleteSchedule(ctx context.Context, name string) error {
	if name == "" {
		return invalid("name", "is required")
	}
	_, err := h.do(ctx, http.MethodDelete, "/schedules/"+url.PathEscape(name), nil, nil, nil)
	return err
}

// SetSchedulePaused implements ScheduleTransport: POST
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
