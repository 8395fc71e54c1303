package triage

import (
	"github.com/triagehq/triage/internal/auth"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// The vocabulary, defined in package triagetype and re-exported here,
// once, so a caller of the client needs one import (see the package doc).
// Nothing else in the module restates it: triage's own packages use
// triagetype's names directly.
type (
	// Task is a task as the API returns it.
	Task = triagetype.Task
	// TaskError is a task's recorded failure.
	TaskError = triagetype.TaskError
	// Attempt is one entry of a task's attempt history.
	Attempt = triagetype.Attempt
	// Priority is a task's scheduling class: High, Medium or Low.
	Priority = triagetype.Priority
	// Status is a task's place in its lifecycle.
	Status = triagetype.Status
	// SubmitRequest is a new task, as NewRequest builds it; it is the body
	// of a submit and one item of a batch.
	SubmitRequest = triagetype.SubmitRequest
	// BatchResult is the outcome of one task of a batch submit.
	BatchResult = triagetype.BatchResult
	// TaskPage is one page of a task listing.
	TaskPage = triagetype.TaskPage
	// Stats are the dispatcher's queue depths, counts and throughput.
	Stats = triagetype.Stats
	// QueueStats are one priority's queue figures.
	QueueStats = triagetype.QueueStats
	// Throughput counts finished tasks over the last minute.
	Throughput = triagetype.Throughput
	// ControlSettings are the pause and limit settings of one scope.
	ControlSettings = triagetype.ControlSettings
	// LimitsRequest is a task type's rate and concurrency limits.
	LimitsRequest = triagetype.LimitsRequest
	// KeyControlsRequest changes one fairness key's controls (SetKeyControls).
	KeyControlsRequest = triagetype.KeyControlsRequest
	// DLQMessage is a message in a dead-letter queue.
	DLQMessage = triagetype.DLQMessage
	// ReplayRequest filters a DLQ replay.
	ReplayRequest = triagetype.ReplayRequest
	// ReplayResult counts what a DLQ replay did.
	ReplayResult = triagetype.ReplayResult
	// Error is a failed request; see the sentinels below.
	Error = triagetype.Error
	// ErrorDetail is the body of an API error, and of a failed batch item.
	ErrorDetail = triagetype.ErrorDetail
	// WorkerInfo is one consumer instance: its kind, state, heartbeat and slots.
	WorkerInfo = triagetype.WorkerInfo
	// Worker is the former name of WorkerInfo.
	//
	// Deprecated: use WorkerInfo; the name Worker is the runtime's
	// (worker.Worker). Kept only until direct switches.
	Worker = triagetype.WorkerInfo
	// WorkerList is every registered consumer instance.
	WorkerList = triagetype.WorkerList
	// WorkerState is active, draining or dead.
	WorkerState = triagetype.WorkerState
	// WorkerStats sums the workers: the workers section of Stats.
	WorkerStats = triagetype.WorkerStats
	// KeyStats is the keys section of Stats: the keys running the most,
	// and the keyed limits with their use; KeyRunning, KeyLimitUse and
	// RateUse its parts.
	KeyStats    = triagetype.KeyStats
	KeyRunning  = triagetype.KeyRunning
	KeyLimitUse = triagetype.KeyLimitUse
	RateUse     = triagetype.RateUse

	// Dependencies, workflows and batches (README "Dependencies, workflows
	// and batches").
	// Parent is one parent of a task as its handler sees it.
	Parent = triagetype.Parent
	// ParentPolicy says what a waiting task does when a parent ends badly.
	ParentPolicy = triagetype.ParentPolicy
	// WorkflowRequest is a workflow to submit; WorkflowNode one node of it.
	WorkflowRequest = triagetype.WorkflowRequest
	WorkflowNode    = triagetype.WorkflowNode
	// Workflow is a submitted workflow with every node's status.
	Workflow = triagetype.Workflow
	// WorkflowNodeStatus is one node of a Workflow.
	WorkflowNodeStatus = triagetype.WorkflowNodeStatus
	// BatchCreate creates a batch with a completion callback, or adds
	// members to one.
	BatchCreate = triagetype.BatchCreate
	// Batch is a batch and its progress.
	Batch = triagetype.Batch
	// BatchProgress counts a batch's (or a workflow's) finished members.
	BatchProgress = triagetype.BatchProgress
	// BatchCallback is the payload of a batch's on_complete task.
	BatchCallback = triagetype.BatchCallback

	// Periodic tasks (README "Periodic tasks").
	// Schedule is a periodic task: a 5-field cron expression in an IANA time
	// zone and the task each tick enqueues (exactly once per tick).
	Schedule = triagetype.Schedule
	// SchedulePage is one page of a schedule listing.
	SchedulePage = triagetype.SchedulePage
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

// The worker states.
const (
	WorkerActive   WorkerState = triagetype.WorkerActive
	WorkerDraining WorkerState = triagetype.WorkerDraining
	WorkerDead     WorkerState = triagetype.WorkerDead
)

// DeadAfterBeats is how many heartbeat intervals without a heartbeat make
// a worker dead.
const DeadAfterBeats = triagetype.DeadAfterBeats

// SummarizeWorkers sums ws as the workers section of Stats does.
func SummarizeWorkers(ws []WorkerInfo) WorkerStats { return triagetype.SummarizeWorkers(ws) }

// Priorities lists every priority, highest first.
func Priorities() []Priority { return triagetype.Priorities() }

// Statuses lists every status, in lifecycle order.
func Statuses() []Status { return triagetype.Statuses() }

// ParsePriority returns the priority named s.
func ParsePriority(s string) (Priority, error) { return triagetype.ParsePriority(s) }

// ParseStatus returns the status named s.
func ParseStatus(s string) (Status, error) { return triagetype.ParseStatus(s) }

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

// The parent policies (SubmitRequest.OnParentFailure).
const (
	OnParentCancel     ParentPolicy = triagetype.OnParentCancel
	OnParentRun        ParentPolicy = triagetype.OnParentRun
	OnParentDeadLetter ParentPolicy = triagetype.OnParentDeadLetter
)

// Limits of dependencies and workflows.
const (
	MaxParents       = triagetype.MaxParents
	MaxWorkflowNodes = triagetype.MaxWorkflowNodes
	MaxWorkflowDepth = triagetype.MaxWorkflowDepth
)

// Workflow states.
const (
	WorkflowPending   = triagetype.WorkflowPending
	WorkflowRunning   = triagetype.WorkflowRunning
	WorkflowCompleted = triagetype.WorkflowCompleted
	WorkflowAbandoned = triagetype.WorkflowAbandoned
)

// Batch states.
const (
	BatchOpen      = triagetype.BatchOpen
	BatchSealed    = triagetype.BatchSealed
	BatchCompleted = triagetype.BatchCompleted
)
