package triagetype

import "time"

// Limits of the API's collection endpoints.
const (
	// MaxBatch is the most tasks one batch submit may carry; an empty or
	// larger batch is refused with ErrBadRequest naming the field "tasks".
	MaxBatch = 100
	// DefaultListLimit is the page size of a list (of tasks or DLQ
	// messages) that names none; MaxListLimit is the largest allowed.
	DefaultListLimit = 100
	MaxListLimit     = 1000
	// MaxReplayLimit is the most tasks one DLQ replay may name; a replay
	// that names none replays up to MaxListLimit.
	MaxReplayLimit = 10000
	// MaxRateLimitPerSecond and MaxConcurrencyLimit bound a task type's
	// limits (0 is no limit).
	MaxRateLimitPerSecond = 100000
	MaxConcurrencyLimit   = 10000
)

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
// single submit would have answered: 201 created, 200 existing (its
// idempotency key was seen), or an error status with Error set.
type BatchResult struct {
	Index  int          `json:"index"`
	Status int          `json:"status"`
	Task   *Task        `json:"task,omitempty"`
	Error  *ErrorDetail `json:"error,omitempty"`
}

// Created reports whether this item made a new task.
func (r *BatchResult) Created() bool { return r.Status == statusCreated }

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

// TaskPage is one page of tasks, the answer of GET /tasks. NextCursor is
// empty on the last page.
type TaskPage struct {
	Tasks      []Task `json:"tasks"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// Stats is the answer of GET /stats: queue depths, task counts and
// throughput at GeneratedAt.
type Stats struct {
	Queues   map[Priority]QueueStats `json:"queues"`
	Statuses map[Status]int          `json:"statuses"`
	// Types counts tasks per type and status (only non-zero statuses).
	Types map[string]map[Status]int `json:"types"`
	// TypesTruncated says Types holds only the first types by name.
	TypesTruncated bool       `json:"types_truncated,omitempty"`
	Throughput     Throughput `json:"throughput"`
	// Workers sums the registered consumer instances (GET /workers);
	// absent where no worker registry is wired.
	Workers *WorkerStats `json:"workers,omitempty"`
	// Keys is which fairness keys run the most now and how their keyed
	// limits are used; absent where no worker registry is wired.
	Keys        *KeyStats `json:"keys,omitempty"`
	GeneratedAt time.Time `json:"generated_at"`
}

// StatsKeys is how many keys, and how many keyed scopes with controls,
// the keys section of GET /stats names; the rest are summed. A worker's
// heartbeat names at most as many keys (and (type, key) pairs) too, so
// neither the registry item nor the answer grows with the number of keys.
const StatsKeys = 10

// KeyStats is the keys section of GET /stats. Its figures come from the
// consumers' heartbeats (running tasks per key, as of each live worker's
// last heartbeat: at most its interval old) and, for the scopes in Limits,
// from their controls and current rate window. Each worker names the
// StatsKeys keys it runs most, so a key that is small on every worker may
// be counted under OtherRunning.
type KeyStats struct {
	// Top are the keys with the most running tasks (then the most starts
	// a second), most first (at most StatsKeys).
	Top []KeyRunning `json:"top"`
	// OtherRunning sums the running tasks of the keys not in Top.
	OtherRunning int `json:"other_running"`
	// Limits are the keyed scopes with controls (PUT /control/keys/{key})
	// that run the most tasks now, most first (at most StatsKeys), each
	// with its settings and current use.
	Limits []KeyLimitUse `json:"limits"`
	// OtherLimits counts the keyed scopes with controls not in Limits;
	// OtherLimitsRunning sums their running tasks.
	OtherLimits        int `json:"other_limits"`
	OtherLimitsRunning int `json:"other_limits_running"`
}

// KeyRunning is one key's running tasks across the live workers.
type KeyRunning struct {
	Key     string `json:"key"`
	Running int    `json:"running"`
	// StartsPerSecond and FinishesPerSecond are its attempts begun and
	// ended per second over the workers' last heartbeat intervals (each
	// worker's count over its interval, summed).
	StartsPerSecond   float64 `json:"starts_per_second"`
	FinishesPerSecond float64 `json:"finishes_per_second"`
}

// KeyLimitUse is one keyed scope's controls and their current use: its
// running tasks (for a concurrency limit, the slots it holds), and for a
// rate limit the starts counted in the current window.
type KeyLimitUse struct {
	Controls ControlSettings `json:"controls"`
	Running  int             `json:"running"`
	RateUse  *RateUse        `json:"rate_use,omitempty"`
}

// RateUse is how much of a rate limit its current window used: Starts of
// Limit, in a window of WindowSeconds (1, or longer for a limit below one
// a second).
type RateUse struct {
	Starts        int     `json:"starts"`
	Limit         int     `json:"limit"`
	WindowSeconds float64 `json:"window_seconds"`
}

// QueueStats describes one priority's queue and its DLQ. The counts are
// SQS's approximate attributes.
type QueueStats struct {
	Depth    int `json:"depth"`
	InFlight int `json:"in_flight"`
	Delayed  int `json:"delayed"`
	DLQDepth int `json:"dlq_depth"`
	// OldestAgeSeconds is how long the longest-waiting queued task has
	// waited at this priority (since it was queued or promoted into it): an
	// upper bound, within 60 s of the true age (the counters keep the
	// minute each wait began); 0 when none is queued.
	OldestAgeSeconds float64 `json:"oldest_age_seconds"`
	// Waits counts the tasks submitted at this priority that started in
	// the last 5 minutes (the current minute and the 4 before it: 4 to 5
	// minutes); WaitP50Seconds and WaitP99Seconds are the median
	// and 99th percentile of how long they waited to start (from queued,
	// or from run_at or retry_at if later). Each percentile is an upper
	// bound within a factor of 2 (the counters keep log-scale buckets of
	// 1 ms, 2 ms, 4 ms, ... 70 min). All three are absent when none started.
	Waits          int     `json:"waits,omitempty"`
	WaitP50Seconds float64 `json:"wait_p50_seconds,omitempty"`
	WaitP99Seconds float64 `json:"wait_p99_seconds,omitempty"`
}

// Throughput counts finished tasks over the last minute.
type Throughput struct {
	CompletedLastMinute int `json:"completed_last_minute"`
	FailedLastMinute    int `json:"failed_last_minute"`
}

// ControlSettings are the controls of one scope: global when Type is
// empty, else one task type. A zero limit means no limit.
type ControlSettings struct {
	Type string `json:"type,omitempty"`
	// Key, when set, makes these the controls of one fairness key (of
	// every type, or of Type's tasks only).
	Key                string  `json:"key,omitempty"`
	Paused             bool    `json:"paused"`
	RateLimitPerSecond float64 `json:"rate_limit_per_second,omitempty"`
	MaxConcurrency     int     `json:"max_concurrency,omitempty"`
	// Held says the scope has tasks set aside (paused, at a limit): they
	// wait in the table without a message and are released in submit
	// order, and its new tasks join the back of them.
	Held bool `json:"held,omitempty"`
	// HeldSince is when Held was last raised (absent while it is down).
	HeldSince *time.Time `json:"held_since,omitempty"`
	// WaitUntil is when a handler's Retry-After for the scope ends: until
	// then its tasks are set aside and none starts.
	WaitUntil *time.Time `json:"wait_until,omitempty"`
	// Weight is a key's share of each priority's starts against the other
	// keys with work waiting there (absent: 1).
	Weight int `json:"weight,omitempty"`
}

// KeyControlsRequest is the body of PUT /control/keys/{key}: the controls
// of one fairness key, of every type or (with Type) of one type's tasks.
// An absent field keeps its setting; a zero limit removes it.
type KeyControlsRequest struct {
	Type               string   `json:"type,omitempty"`
	Paused             *bool    `json:"paused,omitempty"`
	RateLimitPerSecond *float64 `json:"rate_limit_per_second,omitempty"`
	MaxConcurrency     *int     `json:"max_concurrency,omitempty"`
	// Weight is the key's share of each priority's starts (1 to 1000; 0
	// resets it to 1). Keyed by the key alone: with Type it is refused.
	Weight *int `json:"weight,omitempty"`
}

// LimitsRequest is the body of PUT /control/types/{type}. Both limits are
// always sent, so one request states the type's whole limit configuration.
type LimitsRequest struct {
	RateLimitPerSecond float64 `json:"rate_limit_per_second"`
	MaxConcurrency     int     `json:"max_concurrency"`
}

// DLQMessage is a message in a dead-letter queue.
type DLQMessage struct {
	Priority  Priority `json:"priority"`
	MessageID string   `json:"message_id"`
	// TaskID and Type are set when the body names a task triage knows.
	TaskID string `json:"task_id,omitempty"`
	Type   string `json:"type,omitempty"`
	// Reason says why the message is there: the task's last error, a
	// poison body, or SQS's redrive after too many receives.
	Reason string    `json:"reason"`
	Body   string    `json:"body"`
	SentAt time.Time `json:"sent_at"`
	// ReceiveCount is SQS's count, which every listing raises by one.
	ReceiveCount int `json:"receive_count"`
}

// ReplayRequest, the body of POST /dlq/replay, filters a DLQ replay; empty
// fields match everything, and Limit 0 is the server's default
// (MaxListLimit).
type ReplayRequest struct {
	Priority Priority `json:"priority,omitempty"`
	Type     string   `json:"type,omitempty"`
	Limit    int      `json:"limit,omitempty"`
}

// ReplayResult counts what a replay did: tasks put back on their queue,
// and messages left alone or deleted with no task to replay.
type ReplayResult struct {
	Replayed int `json:"replayed"`
	Skipped  int `json:"skipped"`
}
