// Package task defines a triage task and its state machine.
//
// It holds the domain rules every other package shares (the priorities,
// statuses and wire types are triagetype's, used here as they are): the store persists a
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

// NewError returns the failure record for msg, cut to MaxErrorBytes.
func NewError(msg string, retriable bool) *triagetype.TaskError {
	return &triagetype.TaskError{Message: Truncate(msg, MaxErrorBytes), Retriable: retriable}
}

// MaxHistory caps the attempt history kept on a task.
const MaxHistory = 10

// Task is one unit of work. Its JSON form is the API's task object; its
// dynamodbav names are the DynamoDB item's, except for the four fields
// whose types are triagetype's (Error, History, Progress, Promotions),
// which internal/store encodes (store.MarshalTask; the store adds the
// keys too).
type Task struct {
	ID                string                `json:"id" dynamodbav:"id"`
	Type              string                `json:"type" dynamodbav:"type"`
	Key               string                `json:"key,omitempty" dynamodbav:"key,omitempty"`
	Payload           json.RawMessage       `json:"payload" dynamodbav:"payload,omitempty"`
	Priority          triagetype.Priority   `json:"priority" dynamodbav:"priority"`
	EffectivePriority triagetype.Priority   `json:"effective_priority" dynamodbav:"effective_priority"`
	Status            triagetype.Status     `json:"status" dynamodbav:"status"`
	Attempts          int                   `json:"attempts" dynamodbav:"attempts"`
	MaxAttempts       int                   `json:"max_attempts" dynamodbav:"max_attempts"`
	TimeoutSeconds    int                   `json:"timeout_seconds" dynamodbav:"timeout_seconds"`
	RunAt             *time.Time            `json:"run_at,omitempty" dynamodbav:"run_at,omitempty"`
	CreatedAt         time.Time             `json:"created_at" dynamodbav:"created_at"`
	EnqueuedAt        *time.Time            `json:"enqueued_at,omitempty" dynamodbav:"enqueued_at,omitempty"`
	StartedAt         *time.Time            `json:"started_at,omitempty" dynamodbav:"started_at,omitempty"`
	CompletedAt       *time.Time            `json:"completed_at,omitempty" dynamodbav:"completed_at,omitempty"`
	Result            json.RawMessage       `json:"result,omitempty" dynamodbav:"result,omitempty"`
	Error             *triagetype.TaskError `json:"error,omitempty" dynamodbav:"-"`
	IdempotencyKey    string                `json:"idempotency_key,omitempty" dynamodbav:"idempotency_key,omitempty"`
	TraceID           string                `json:"trace_id,omitempty" dynamodbav:"trace_id,omitempty"`
	// Traceparent is the W3C traceparent of the task's submit span: every
	// attempt's span is its child, so a task is one trace (internal/tracing).
	Traceparent     string               `json:"-" dynamodbav:"traceparent,omitempty"`
	History         []triagetype.Attempt `json:"history,omitempty" dynamodbav:"-"`
	CancelRequested bool                 `json:"cancel_requested,omitempty" dynamodbav:"cancel_requested,omitempty"`
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
	Progress   *Progress       `json:"progress,omitempty" dynamodbav:"-"`
	Checkpoint json.RawMessage `json:"checkpoint,omitempty" dynamodbav:"checkpoint,omitempty"`
	// Steps and Signals are the task's durable execution records (see
	// durable.go): never written by a transition (dynamodbav "-"), read
	// from their own attributes by the store. Suspend says why a task
	// that slept or waits for a signal waits.
	Steps   []Step   `json:"steps,omitempty" dynamodbav:"-"`
	Signals []Signal `json:"signals,omitempty" dynamodbav:"-"`
	Suspend *Suspend `json:"suspended,omitempty" dynamodbav:"-"`
	// Promotions are the aging steps the promoter made (promotion.go),
	// written in the same update as the promotion itself.
	Promotions []triagetype.Promotion `json:"promotions,omitempty" dynamodbav:"-"`
	// Schedule names the schedule whose tick made the task (package
	// schedule); the tick's time is the time of the task's id.
	Schedule string `json:"schedule,omitempty" dynamodbav:"schedule,omitempty"`

	// Dependencies (internal/flow). After never changes; WaitingOn is the
	// string set of parents not finished yet, which internal/flow shrinks
	// with one conditional DELETE per parent (outside the version rule:
	// no transition writes it, so a stale snapshot never puts it back).
	After           []string                `json:"after,omitempty" dynamodbav:"after,omitempty"`
	OnParentFailure triagetype.ParentPolicy `json:"on_parent_failure,omitempty" dynamodbav:"on_parent_failure,omitempty"`
	WaitingOn       []string                `json:"waiting_on,omitempty" dynamodbav:"waiting_on,stringset,omitempty"`
	WorkflowID      string                  `json:"workflow_id,omitempty" dynamodbav:"workflow_id,omitempty"`
	Node            string                  `json:"node,omitempty" dynamodbav:"node,omitempty"`
	BatchID         string                  `json:"batch_id,omitempty" dynamodbav:"batch_id,omitempty"`

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
	// RateWindow is a released task's reservation in its rate-limited
	// scope ("<scope>@<window opening, Unix ns>"): its start was counted
	// in that window when it was released, so arrivals cannot spend it
	// (control.Reserve).
	RateWindow string `json:"-" dynamodbav:"rate_window,omitempty"`
	// FairAt is the task's place among its key's tasks in weighted fair
	// order (control.Controls.Route): its submit time, pushed later by
	// 1/(FairWindow × weight) s for each earlier task its key submitted
	// through the same process while past that pace. Held sets release in
	// this order (HeldOrder), so after a pause or limit keys start by
	// weight, each key still in its own submit order. Unset: CreatedAt.
	FairAt *time.Time `json:"-" dynamodbav:"fair_at,omitempty"`
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
	// HasChildren marks a task some other task waits for: when it finishes,
	// internal/flow walks its edges. Set outside the version rule, like
	// WaitingOn.
	HasChildren bool `json:"-" dynamodbav:"has_children,omitempty"`
	// EdgeParent is the parent whose walk finds this task through the
	// task's own by-due entry (waiting#<shard of the parent>, sorted by
	// the parent's id): its first unfinished parent at its submit, which
	// then needs no edge item (internal/flow). The entry stays while the
	// task waits and, once it is released, until its claim; the store
	// drops EdgeParent (and so the entry) on any other move.
	EdgeParent string `json:"-" dynamodbav:"edge_parent,omitempty"`
	// BatchCounted marks a batch member whose first finish was written
	// (set by that same write): the stream consumer counts the member on
	// its shard from the record in which it appears, and a member retried
	// from dead_letter that finishes again keeps it, so it is not counted
	// twice.
	BatchCounted bool `json:"-" dynamodbav:"batch_counted,omitempty"`
	// BatchShard is the batch counter shard the member is counted on,
	// fixed when it joins.
	BatchShard int `json:"-" dynamodbav:"batch_shard,omitempty"`
	// MemberAdd, on a batch member counted on its shard before its
	// record is written (store.MemberAdd: a request's members added
	// together), is that add's id, and MemberWriteBy the time its record
	// must be written by; the record is then one plain put. Never stored.
	MemberAdd     string    `json:"-" dynamodbav:"-"`
	MemberWriteBy time.Time `json:"-" dynamodbav:"-"`
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
	c.History = append([]triagetype.Attempt(nil), t.History...)
	c.Promotions = append([]triagetype.Promotion(nil), t.Promotions...)
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
	c.After = append([]string(nil), t.After...)
	c.Steps = append([]Step(nil), t.Steps...)
	c.Signals = append([]Signal(nil), t.Signals...)
	if t.Suspend != nil {
		sp := *t.Suspend
		c.Suspend = &sp
	}
	c.WaitingOn = append([]string(nil), t.WaitingOn...)
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
	case t.Status == triagetype.Scheduled && t.RunAt != nil:
		return *t.RunAt
	case t.Status == triagetype.Retrying && t.RetryAt != nil:
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
func (t *Task) AddAttempt(a triagetype.Attempt) {
	a.Error = Truncate(a.Error, MaxAttemptErrorBytes)
	t.History = append(t.History, a)
	if n := len(t.History); n > MaxHistory {
		t.History = append([]triagetype.Attempt(nil), t.History[n-MaxHistory:]...)
	}
}

// StepAt returns the step recorded at seq, if any.
func (t *Task) StepAt(seq int) (Step, bool) {
	for _, s := range t.Steps {
		if s.Seq == seq {
			return s, true
		}
	}
	return Step{}, false
}

// SignalNamed returns the signal named name delivered to t, if any.
func (t *Task) SignalNamed(name string) (Signal, bool) {
	for _, s := range t.Signals {
		if s.Name == name {
			return s, true
		}
	}
	return Signal{}, false
}

// Message is the small SQS body of a task dispatched by triage: the payload
// and state stay in DynamoDB. Type, Key and TimeoutSeconds are copies of
// the task's own, which never change after creation: they let a consumer
// look up the handler, ask the controls and compute the lease before it
// writes, so it claims with one conditional write and no read first (the
// write's condition checks the copies against the item). A message
// without them (an older producer's) is claimed after a read.
type Message struct {
	ID             string              `json:"id"`
	Version        int64               `json:"v"`
	Priority       triagetype.Priority `json:"p"`
	Type           string              `json:"t,omitempty"`
	Key            string              `json:"k,omitempty"`
	TimeoutSeconds int                 `json:"s,omitempty"`
	// RateWindow is a released task's reservation (Task.RateWindow), so
	// a claim that decides on the message's copy does not count the
	// task's start a second time.
	RateWindow string `json:"w,omitempty"`
	// ReleasedBy is set on a waiting task's message sent when its last
	// parent completed (internal/flow): the message stands in for the
	// release write, and the claim moves the task from waiting itself,
	// once it has checked that this parent completed and is the only one
	// the task still waits on.
	ReleasedBy string `json:"r,omitempty"`
}

// MessageFor is the message of t at dispatch version v.
func MessageFor(t *Task, v int64) Message {
	return Message{ID: t.ID, Version: v, Priority: t.EffectivePriority, Type: t.Type, Key: t.Key, TimeoutSeconds: t.TimeoutSeconds, RateWindow: t.RateWindow}
}

// Claimable reports whether m carries what a claim without a read needs.
func (m Message) Claimable() bool { return m.Type != "" && m.TimeoutSeconds > 0 }

// Task is the part of m's task a claim decides on before it writes: id,
// type, key, priorities and timeout, as the message states them.
func (m Message) Task() *Task {
	return &Task{ID: m.ID, Type: m.Type, Key: m.Key, Priority: m.Priority, EffectivePriority: m.Priority, TimeoutSeconds: m.TimeoutSeconds, DispatchVersion: m.Version, RateWindow: m.RateWindow}
}

// EnqueuedAtOr returns EnqueuedAt, or def when the task was never queued.
func (t *Task) EnqueuedAtOr(def time.Time) time.Time {
	if t.EnqueuedAt != nil {
		return *t.EnqueuedAt
	}
	return def
}

// HeldOrder is when t sorts in a held set: FairAt, or CreatedAt without it.
func (t *Task) HeldOrder() time.Time {
	if t.FairAt != nil {
		return *t.FairAt
	}
	return t.CreatedAt
}
