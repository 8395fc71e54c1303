package triage

import (
	"github.com/triagehq/triage/internal/auth"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// The names a caller of the client types, re-exported from triagetype,
// where they and every other wire type are defined (see the package doc
// for why these nine). The answers a caller only receives (TaskPage,
// Stats, Workflow, Batch, ...) are triagetype's and are used under that
// name.
type (
	// Task is a task as the API returns it.
	Task = triagetype.Task
	// SubmitRequest is a new task, as NewRequest builds it; it is the body
	// of a submit and one item of a batch.
	SubmitRequest = triagetype.SubmitRequest
	// Priority is a task's scheduling class: High, Medium or Low.
	Priority = triagetype.Priority
	// Status is a task's place in its lifecycle.
	Status = triagetype.Status
	// Error is a failed request; see the sentinels below.
	Error = triagetype.Error
	// WorkflowRequest is a workflow to submit; WorkflowNode one node of it.
	WorkflowRequest = triagetype.WorkflowRequest
	WorkflowNode    = triagetype.WorkflowNode
	// BatchCreate creates a batch with a completion callback, or adds
	// members to one.
	BatchCreate = triagetype.BatchCreate
	// Schedule is a periodic task: a 5-field cron expression in an IANA time
	// zone and the task each tick enqueues (exactly once per tick).
	Schedule = triagetype.Schedule
)

// The priorities, highest first.
const (
	High   Priority = triagetype.High
	Medium Priority = triagetype.Medium
	Low    Priority = triagetype.Low
)

// The statuses.
const (
	Scheduled  Status = triagetype.Scheduled
	Queued     Status = triagetype.Queued
	Executing  Status = triagetype.Executing
	Retrying   Status = triagetype.Retrying
	Completed  Status = triagetype.Completed
	Cancelled  Status = triagetype.Cancelled
	DeadLetter Status = triagetype.DeadLetter
	// Waiting: its parents (after) have not all finished.
	Waiting Status = triagetype.Waiting
)

// Sentinel errors. An *Error matches the one its Status maps to:
// errors.Is(err, triage.ErrNotFound).
var (
	ErrBadRequest   = triagetype.ErrBadRequest   // 400: bad input; Error.Field names it
	ErrUnauthorized = triagetype.ErrUnauthorized // 401: no valid token
	ErrForbidden    = triagetype.ErrForbidden    // 403: the token lacks the scope
	ErrNotFound     = triagetype.ErrNotFound     // 404
	ErrConflict     = triagetype.ErrConflict     // 409: the task's status does not allow it
	ErrTooLarge     = triagetype.ErrTooLarge     // 413: a payload or body over its limit
	ErrTooMany      = triagetype.ErrTooMany      // 429: the queue is over its depth limit
	ErrUnavailable  = triagetype.ErrUnavailable  // 503: not accepted; retry, with the same idempotency key too
	ErrInternal     = triagetype.ErrInternal     // 500
	// ErrNotImplemented (501): the deployment, or the Transport, does not
	// offer the call (a server without schedules or workflows).
	ErrNotImplemented = triagetype.ErrNotImplemented
)

// Limits and defaults of the API, for callers that check before sending.
const (
	MaxBatch              = triagetype.MaxBatch
	MaxListLimit          = triagetype.MaxListLimit
	MaxPayloadBytes       = task.MaxPayloadBytes
	DefaultMaxAttempts    = task.DefaultMaxAttempts
	DefaultTimeoutSeconds = task.DefaultTimeoutSeconds
	// DefaultKey is the fairness key of a task submitted without WithKey.
	DefaultKey = triagetype.DefaultKey
)

// TokenHeader is the header WithTokenHeader sends the token in.
const TokenHeader = auth.TokenHeader
