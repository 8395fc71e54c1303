package triagetype

import (
	"encoding/json"
	"time"
)

// Task is a task as the API returns it.
//
// It is the API's view of the task record internal/task keeps (which adds
// bookkeeping the API never shows); internal/task's Public converts one to
// the other field by field, and a test checks that both encode to the same
// JSON.
type Task struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	// Key is the task's fairness key (a tenant, say), as submitted; empty
	// for a task submitted without one, which shares DefaultKey.
	Key               string          `json:"key,omitempty"`
	Payload           json.RawMessage `json:"payload"`
	Priority          Priority        `json:"priority"`
	EffectivePriority Priority        `json:"effective_priority"`
	Status            Status          `json:"status"`
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
	// History holds the last attempts, oldest first.
	History         []Attempt `json:"history,omitempty"`
	CancelRequested bool      `json:"cancel_requested,omitempty"`
	// PayloadSize and ResultSize are set when the payload or result is over
	// 3 KiB and kept off the task's record: only a GET of the one task
	// carries it then (list pages and other answers leave it out).
	PayloadSize int `json:"payload_size,omitempty"`
	ResultSize  int `json:"result_size,omitempty"`
	// Progress is the handler's last progress report, if it made one.
	Progress *Progress `json:"progress,omitempty"`
	// Checkpoint is the last checkpoint a handler saved (at most 3 KiB of
	// JSON): the next attempt starts from it.
	Checkpoint json.RawMessage `json:"checkpoint,omitempty"`
	// Steps are the durable steps the task recorded, in the order met;
	// Signals the signals delivered to it; Suspend, while it sleeps or
	// waits for a signal, until when and for what (status retrying).
	Steps   []Step   `json:"steps,omitempty"`
	Signals []Signal `json:"signals,omitempty"`
	Suspend *Suspend `json:"suspended,omitempty"`
	// Promotions are the task's aging steps, oldest first (the last 4).
	Promotions []Promotion `json:"promotions,omitempty"`
	// Schedule names the schedule whose tick made the task, if one did.
	Schedule string `json:"schedule,omitempty"`
	// After are the parents the task waits for, OnParentFailure what
	// happens when one ends badly, WaitingOn the parents not finished yet
	// (a waiting task's).
	After           []string     `json:"after,omitempty"`
	OnParentFailure ParentPolicy `json:"on_parent_failure,omitempty"`
	WaitingOn       []string     `json:"waiting_on,omitempty"`
	// WorkflowID and Node place a workflow's task; BatchID a batch member.
	WorkflowID string `json:"workflow_id,omitempty"`
	Node       string `json:"node,omitempty"`
	BatchID    string `json:"batch_id,omitempty"`
	// RetryAt is when a retrying task runs again.
	RetryAt *time.Time `json:"retry_at,omitempty"`
	// Held names the scope a queued task is set aside in until it can run
	// ("type#<type>", "key#<key>", "tk#<type>#<key>"): paused, at a limit
	// or waiting for a Retry-After. It has no SQS message meanwhile and is
	// released in submit order.
	Held string `json:"held,omitempty"`
}

// Terminal reports whether the task will not change by itself any more.
func (t *Task) Terminal() bool { return t.Status.Terminal() }

// TaskError is the failure recorded on a task.
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
	// Outcome says how the attempt ended (one of the Attempt* constants),
	// so a reader tells a failure from a durable sleep or a snooze without
	// parsing Error. Empty in attempts recorded before it existed.
	Outcome string `json:"outcome,omitempty"`
}

// The outcomes of an attempt (Attempt.Outcome). Only AttemptFailed and
// AttemptLeaseExpired spend an attempt that max_attempts counts.
const (
	AttemptCompleted    = "completed"     // the handler succeeded
	AttemptFailed       = "failed"        // an error: retried, or dead-lettered when permanent or the last
	AttemptSnoozed      = "snoozed"       // the handler asked to run again later
	AttemptSuspended    = "suspended"     // a durable sleep or signal wait (worker.Sleep, worker.WaitSignal)
	AttemptSetAside     = "set_aside"     // the handler's RetryAfter held its type or key
	AttemptCancelled    = "cancelled"     // cancelled on request
	AttemptInterrupted  = "interrupted"   // the consumer shut down and handed the task back
	AttemptLeaseExpired = "lease_expired" // the worker stopped renewing its lease (a crash)
)

// DefaultKey is the fairness key of every task submitted without one: such
// tasks share one key's weight, limits and waits.
const DefaultKey = "default"

// SubmitRequest is a new task: the body of POST /api/v1/tasks, one item of
// a batch, and the body of a message a producer sends straight to SQS.
// Absent fields take the server's defaults; the server validates every
// field and names the one at fault.
type SubmitRequest struct {
	Type string `json:"type"`
	// Key is the fairness key (a tenant id, say): keys share each priority
	// by weight, and limits and Retry-After waits can name one. Its rules
	// are the type's (1 to 128 bytes of UTF-8, no '#', NUL or newlines);
	// empty means DefaultKey.
	Key     string          `json:"key,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
	// Priority is high, medium or low; empty is medium.
	Priority       Priority   `json:"priority,omitempty"`
	MaxAttempts    *int       `json:"max_attempts,omitempty"`
	TimeoutSeconds *int       `json:"timeout_seconds,omitempty"`
	RunAt          *time.Time `json:"run_at,omitempty"`
	DelaySeconds   *int       `json:"delay_seconds,omitempty"`
	// IdempotencyKey makes a repeated submit within 24 h return the first
	// task instead of making another.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// TraceID ties the task to the caller's trace in triage's logs; it
	// defaults to the task's id.
	TraceID string `json:"trace_id,omitempty"`
	// After names up to MaxParents task ids: the task waits (status
	// waiting) until every one has finished, and OnParentFailure says what
	// happens when one ends badly (cancel, the default; run; dead_letter).
	After           []string `json:"after,omitempty"`
	OnParentFailure string   `json:"on_parent_failure,omitempty"`
	// BatchID adds the task to an open batch (POST /batches): the batch's
	// on_complete task runs once every member has finished.
	BatchID string `json:"batch_id,omitempty"`
}

// Progress is what a running task's handler last reported: how far it got
// and what it is doing. It stays on the task after the attempt ends (a
// finished task shows its last report), and Attempt says which attempt
// made it.
type Progress struct {
	Percent   int       `json:"percent"`
	Message   string    `json:"message,omitempty"`
	Attempt   int       `json:"attempt"`
	UpdatedAt time.Time `json:"updated_at"`
}

// ProgressReport is the body of POST /api/v1/tasks/{id}/progress, which an
// external (webhook or Lambda) handler sends with its attempt's
// progress_token. Percent (0 to 100) or Checkpoint must be given; Message
// needs Percent.
type ProgressReport struct {
	Percent    *int            `json:"percent,omitempty"`
	Message    string          `json:"message,omitempty"`
	Checkpoint json.RawMessage `json:"checkpoint,omitempty"`
}
