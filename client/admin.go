package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Stats is the answer of GET /stats: queue depths, task counts and
// throughput at GeneratedAt.
type Stats struct {
	// Queues is keyed by priority: high, medium, low.
	Queues map[string]QueueStats `json:"queues"`
	// Statuses counts tasks per status (every status is present).
	Statuses map[string]int `json:"statuses"`
	// Types counts tasks per type and status (only non-zero statuses).
	Types       map[string]map[string]int `json:"types"`
	Throughput  Throughput                `json:"throughput"`
	GeneratedAt time.Time                 `json:"generated_at"`
}

// QueueStats describes one priority's queue and its DLQ. The counts are
// SQS's approximate attributes.
type QueueStats struct {
	Depth            int     `json:"depth"`
	InFlight         int     `json:"in_flight"`
	Delayed          int     `json:"delayed"`
	DLQDepth         int     `json:"dlq_depth"`
	OldestAgeSeconds float64 `json:"oldest_age_seconds"`
}

// Throughput counts finished tasks over the last minute.
type Throughput struct {
	CompletedLastMinute int `json:"completed_last_minute"`
	FailedLastMinute    int `json:"failed_last_minute"`
}

// Stats reads the dispatcher's statistics.
func (c *Client) Stats(ctx context.Context) (*Stats, error) {
	var s Stats
	if _, err := c.do(ctx, http.MethodGet, "/stats", nil, nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// ControlSettings are the controls of one scope: global when Type is
// empty, else one task type. A zero limit means no limit.
type ControlSettings struct {
	Type               string  `json:"type,omitempty"`
	Paused             bool    `json:"paused"`
	RateLimitPerSecond float64 `json:"rate_limit_per_second,omitempty"`
	MaxConcurrency     int     `json:"max_concurrency,omitempty"`
}

// Pause stops consumers from starting tasks of type typ, or of every type
// when typ is empty. Running tasks finish; queued ones wait.
func (c *Client) Pause(ctx context.Context, typ string) (*ControlSettings, error) {
	return c.setPaused(ctx, "/control/pause", typ)
}

// Resume undoes Pause for typ (or globally when typ is empty).
func (c *Client) Resume(ctx context.Context, typ string) (*ControlSettings, error) {
	return c.setPaused(ctx, "/control/resume", typ)
}

func (c *Client) setPaused(ctx context.Context, path, typ string) (*ControlSettings, error) {
	var q url.Values
	if typ != "" {
		q = url.Values{"type": {typ}}
	}
	var s ControlSettings
	if _, err := c.do(ctx, http.MethodPost, path, q, nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// LimitsRequest is the body of PUT /control/types/{type}.
type LimitsRequest struct {
	RateLimitPerSecond float64 `json:"rate_limit_per_second"`
	MaxConcurrency     int     `json:"max_concurrency"`
}

// SetLimits sets task type typ's rate limit (task starts per second across
// every consumer) and concurrency limit. Both are always sent, and 0 means
// no limit, so one call states the type's whole limit configuration.
func (c *Client) SetLimits(ctx context.Context, typ string, ratePerSecond float64, maxConcurrency int) (*ControlSettings, error) {
	var s ControlSettings
	body := LimitsRequest{RateLimitPerSecond: ratePerSecond, MaxConcurrency: maxConcurrency}
	if _, err := c.do(ctx, http.MethodPut, "/control/types/"+url.PathEscape(typ), nil, body, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Controls lists the control settings: the global ones first, then those of
// every type that has any.
func (c *Client) Controls(ctx context.Context) ([]ControlSettings, error) {
	var out struct {
		Controls []ControlSettings `json:"controls"`
	}
	if _, err := c.do(ctx, http.MethodGet, "/control", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Controls, nil
}

// DLQMessage is a message in a dead-letter queue.
type DLQMessage struct {
	Priority  string `json:"priority"`
	MessageID string `json:"message_id"`
	// TaskID and Type are set when the body names a task triage knows.
	TaskID string `json:"task_id,omitempty"`
	Type   string `json:"type,omitempty"`
	// Reason says why the message is there: the task's last error, a
	// poison body, or SQS's redrive after too many receives.
	Reason       string    `json:"reason"`
	Body         string    `json:"body"`
	SentAt       time.Time `json:"sent_at"`
	ReceiveCount int       `json:"receive_count"`
}

// DLQ reads up to limit messages from priority's DLQ, or from all three
// when priority is empty. limit 0 is the server's default (100).
func (c *Client) DLQ(ctx context.Context, priority string, limit int) ([]DLQMessage, error) {
	q := url.Values{}
	if priority != "" {
		q.Set("priority", priority)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out struct {
		Messages []DLQMessage `json:"messages"`
	}
	if _, err := c.do(ctx, http.MethodGet, "/dlq", q, nil, &out); err != nil {
		return nil, err
	}
	return out.Messages, nil
}

// ReplayRequest filters a DLQ replay; empty fields match everything.
type ReplayRequest struct {
	Priority string `json:"priority,omitempty"`
	Type     string `json:"type,omitempty"`
	Limit    int    `json:"limit,omitempty"`
}

// ReplayResult counts what a replay did: tasks put back on their queue, and
// messages left alone (no dead_letter task behind them).
type ReplayResult struct {
	Replayed int `json:"replayed"`
	Skipped  int `json:"skipped"`
}

// ReplayDLQ sends dead_letter tasks whose DLQ message matches filter back
// to queued, with their attempts reset, and deletes those DLQ messages.
func (c *Client) ReplayDLQ(ctx context.Context, filter ReplayRequest) (*ReplayResult, error) {
	var out ReplayResult
	if _, err := c.do(ctx, http.MethodPost, "/dlq/replay", nil, filter, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// OpenAPI returns the API's OpenAPI 3.1 document as the server serves it.
func (c *Client) OpenAPI(ctx context.Context) ([]byte, error) {
	_, data, err := c.send(ctx, http.MethodGet, "/openapi.json", nil, nil)
	return data, err
}
