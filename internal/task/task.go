// Package task defines a triage task, its priorities and its state machine.
//
// It is the vocabulary every other package shares: the store persists a
// Task, the queue carries a Message that points at one, the dispatcher moves
// it through the states defined here, and the API renders it. Nothing in this
// package talks to AWS.
package task

import (
	"crypto/rand"
	"encoding/json"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/triagehq/triage/triagetype"
)

// Priority is a task's scheduling class. Each priority has its own SQS
// queue. It is the public type, so a task's priority needs no conversion
// on its way to a client.
type Priority = triagetype.Priority

// The three priorities, highest first.
const (
	High   = triagetype.High
	Medium = triagetype.Medium
	Low    = triagetype.Low
)

// Priorities lists every priority, highest first.
func Priorities() []Priority { return triagetype.Priorities() }

// ParsePriority returns the priority named s, or an error naming the allowed values.
func ParsePriority(s string) (Priority, error) { return triagetype.ParsePriority(s) }

// Error is the failure recorded on a task (the public type, whose
// dynamodbav names are the item's). Build it with NewError so the message
// stays within MaxErrorBytes.
type Error = triagetype.TaskError

// NewError returns the failure record for msg, cut to MaxErrorBytes.
func NewError(msg string, retriable bool) *Error {
	return &Error{Message: Truncate(msg, MaxErrorBytes), Retriable: retriable}
}

// Attempt is one entry of a task's capped attempt history (the public
// type, whose dynamodbav names are the item's).
type Attempt = triagetype.Attempt

// MaxHistory caps the attempt history kept on a task.
const MaxHistory = 10

// Task is one unit of work. Its JSON form is the API's task object; its
// dynamodbav form is the DynamoDB item (the store adds the keys).
type Task struct {
	ID                string          `json:"id" dynamodbav:"id"`
	Type              string          `json:"type" dynamodbav:"type"`
	Key               string          `json:"key,omitempty" dynamodbav:"key,omitempty"`
	Payload           json.RawMessage `json:"payload" dynamodbav:"payload,omitempty"`
	Priority          Priority        `json:"priority" dynamodbav:"priority"`
	EffectivePriority Priority        `json:"effective_priority" dynamodbav:"effective_priority"`
	Status            Status          `json:"status" dynamodbav:"status"`
	Attempts          int             `json:"attempts" dynamodbav:"attempts"`
	MaxAttempts       int             `json:"max_attempts" dynamodbav:"max_attempts"`
	TimeoutSeconds    int             `json:"timeout_seconds" dynamodbav:"timeout_seconds"`
	RunAt             *time.Time      `json:"run_at,omitempty" dynamodbav:"run_at,omitempty"`
	CreatedAt         time.Time       `json:"created_at" dynamodbav:"created_at"`
	EnqueuedAt        *time.Time      `json:"enqueued_at,omitempty" dynamodbav:"enqueued_at,omitempty"`
	StartedAt         *time.Time      `json:"started_at,omitempty" dynamodbav:"started_at,omitempty"`
	CompletedAt       *time.Time      `json:"completed_at,omitempty" dynamodbav:"completed_at,omitempty"`
	Result            json.RawMessage `json:"result,omitempty" dynamodbav:"result,omitempty"`
	Error             *Error          `json:"error,omitempty" dynamodbav:"error,omitempty"`
	IdempotencyKey    string          `json:"idempotency_key,omitempty" dynamodbav:"idempotency_key,omitempty"`
	TraceID           string          `json:"trace_id,omitempty" dynamodbav:"trace_id,omitempty"`
	// Traceparent is the W3C traceparent of the task's submit span: every
	// attempt's span is its child, so a task is one trace (internal/tracing).
	Traceparent     string    `json:"-" dynamodbav:"traceparent,omitempty"`
	History         []Attempt `json:"history,omitempty" dynamodbav:"history,omitempty"`
	CancelRequested bool      `json:"cancel_requested,omitempty" dynamodbav:"cancel_requested,omitempty"`
	// PayloadSize and ResultSize are set when the payload or result is too
	// large to live on the task's record (over store.InlineMax): it is kept
	// as an object of its own (PayloadRef, ResultRef), and Payload or Result
	// is empty until a reader loads it (store.Store.LoadBodies). A list page
	// does not load them; GET of one task does.
	PayloadSize int    `json:"payload_size,omitempty" dynamodbav:"payload_size,omitempty"`
	ResultSize  int    `json:"result_size,omitempty" dynamodbav:"result_size,omitempty"`
	PayloadRef  string `json:"-" dynamodbav:"payload_ref,omitempty"`
	ResultRef   string `json:"-" dynamodbav:"result_ref,omitempty"`
	// Progress is the handler's last report (see progress.go); Checkpoint
	// its last saved state, at most MaxCheckpointBytes, which the next
	// attempt is given.
	Progress   *Progress       `json:"progress,omitempty" dynamodbav:"progress,omitempty"`
	Checkpoint json.RawMessage `json:"checkpoint,omitempty" dynamodbav:"checkpoint,omitempty"`

	// Internal bookkeeping, not part of the API object.

	// Version goes up by one on every transition; every write is conditional on it.
	Version int64 `json:"-" dynamodbav:"version"`
	// DispatchVersion is the version carried by the task's live SQS message.
	// A message whose version differs is stale and is dropped on receive.
	// Adopted direct sends use 0 (their producer's message carries no
	// version); NoMessage means the task has no live message at all.
	DispatchVersion int64 `json:"-" dynamodbav:"dispatch_version"`
	// WaitingSince is when the task entered its current status and effective
	// priority; aging thresholds are measured from it.
	WaitingSince time.Time  `json:"-" dynamodbav:"waiting_since"`
	LeaseUntil   *time.Time `json:"-" dynamodbav:"lease_until,omitempty"`
	WorkerID     string     `json:"-" dynamodbav:"worker_id,omitempty"`
	RetryAt      *time.Time `json:"retry_at,omitempty" dynamodbav:"retry_at,omitempty"`
	// Held names the scope a queued task was set aside in because it
	// could not start (its type or key paused, at a limit, waiting for a
	// Retry-After): it has no message (DispatchVersion is NoMessage) until
	// its scope can run and it is released, in submit order (package hold).
	Held string `json:"held,omitempty" dynamodbav:"held,omitempty"`
	// Released marks a task released from a hold whose message has not
	// been claimed yet: it may start although its scope still holds later
	// tasks (new arrivals of such a scope join the back of the held set).
	Released bool `json:"-" dynamodbav:"released,omitempty"`
	// Tracked marks a queued task whose wait began after its creation
	// (promoted, re-queued, released): the promoter finds it through its own
	// by-due index entry rather than by its creation time.
	Tracked bool `json:"-" dynamodbav:"tracked,omitempty"`
	// ProgressToken authorizes progress reports through the API for the
	// current attempt only: minted at each claim, removed by the store
	// whenever the task leaves executing. Never shown by the API.
	ProgressToken string `json:"-" dynamodbav:"progress_token,omitempty"`
	// ReportedAt is when the API last wrote a report made with the
	// token: the endpoint's per-task rate limit is measured from it.
	ReportedAt *time.Time `json:"-" dynamodbav:"reported_at,omitempty"`
	ExpiresAt  int64      `json:"-" dynamodbav:"expires_at,omitempty"`
}

// DefaultKey is the fairness key of a task submitted without one.
const DefaultKey = triagetype.DefaultKey

// FairKey is t's fairness key: its own, or DefaultKey when it has none.
// Every scope that names a key (limits, weights, waits, SQS message
// groups) uses this, so keyless tasks share one key.
func (t *Task) FairKey() string {
	if t.Key == "" {
		return DefaultKey
	}
	return t.Key
}

// NoMessage is the DispatchVersion of a task with no live message: a
// scheduled task, or a retry whose wait is longer than SQS can hide a message.
const NoMessage int64 = -1

// NewID returns a new ULID: unique, and sortable by creation time.
func NewID(now time.Time) string {
	return ulid.MustNew(ulid.Timestamp(now), rand.Reader).String()
}

// Clone returns a deep copy of t, so a caller can build the next state
// without touching the snapshot it read.
func (t *Task) Clone() *Task {
	c := *t
	c.Payload = append(json.RawMessage(nil), t.Payload...)
	c.Result = append(json.RawMessage(nil), t.Result...)
	if t.Error != nil {
		e := *t.Error
		c.Error = &e
	}
	c.History = append([]Attempt(nil), t.History...)
	c.RunAt = cloneTime(t.RunAt)
	c.EnqueuedAt = cloneTime(t.EnqueuedAt)
	c.StartedAt = cloneTime(t.StartedAt)
	c.CompletedAt = cloneTime(t.CompletedAt)
	c.LeaseUntil = cloneTime(t.LeaseUntil)
	c.RetryAt = cloneTime(t.RetryAt)
	c.ReportedAt = cloneTime(t.ReportedAt)
	if t.Progress != nil {
		p := *t.Progress
		c.Progress = &p
	}
	if t.Checkpoint != nil {
		c.Checkpoint = append(json.RawMessage(nil), t.Checkpoint...)
	}
	return &c
}

func cloneTime(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := *t
	return &v
}

// DueAt is the time the by-status-priority index sorts a task by: when a
// scheduled task should run, when a parked retry is due, and otherwise when
// the task entered its current status and effective priority.
func (t *Task) DueAt() time.Time {
	switch {
	case t.Status == Scheduled && t.RunAt != nil:
		return *t.RunAt
	case t.Status == Retrying && t.RetryAt != nil:
		return *t.RetryAt
	}
	return t.WaitingSince
}

// AgingFrom is when t's current wait at its effective priority began for
// aging: when it entered its status and priority, or its run_at if that is
// later (a delayed task starts aging when it becomes runnable).
func (t *Task) AgingFrom() time.Time {
	if t.RunAt != nil && t.RunAt.After(t.WaitingSince) {
		return *t.RunAt
	}
	return t.WaitingSince
}

// AddAttempt appends an attempt to the history, keeping the newest
// MaxHistory, each error cut to MaxAttemptErrorBytes.
func (t *Task) AddAttempt(a Attempt) {
	a.Error = Truncate(a.Error, MaxAttemptErrorBytes)
	t.History = append(t.History, a)
	if n := len(t.History); n > MaxHistory {
		t.History = append([]Attempt(nil), t.History[n-MaxHistory:]...)
	}
}

// Message is the small SQS body of a task dispatched by triage: the payload
// and state stay in DynamoDB.
type Message struct {
	ID       string   `json:"id"`
	Version  int64    `json:"v"`
	Priority Priority `json:"p"`
}

// EnqueuedAtOr returns EnqueuedAt, or def when the task was never queued.
func (t *Task) EnqueuedAtOr(def time.Time) time.Time {
	if t.EnqueuedAt != nil {
		return *t.EnqueuedAt
	}
	return def
}
