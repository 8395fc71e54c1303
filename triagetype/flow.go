package triagetype

import (
	"encoding/json"
	"fmt"
	"time"
)

// Dependencies, workflows and batches: the public shapes (internal/flow
// keeps them).

// MaxParents bounds the tasks one task may wait for (SubmitRequest.After).
const MaxParents = 100

// ParentPolicy says what happens to a waiting task when one of its parents
// ends badly (dead-lettered or cancelled).
type ParentPolicy string

// The parent policies.
const (
	// OnParentCancel cancels the child (the default).
	OnParentCancel ParentPolicy = "cancel"
	// OnParentRun runs the child anyway once every parent has finished.
	OnParentRun ParentPolicy = "run"
	// OnParentDeadLetter dead-letters the child with the parent's reason.
	OnParentDeadLetter ParentPolicy = "dead_letter"
)

// ParseParentPolicy returns the policy named s ("" is OnParentCancel).
func ParseParentPolicy(s string) (ParentPolicy, error) {
	switch p := ParentPolicy(s); p {
	case "":
		return OnParentCancel, nil
	case OnParentCancel, OnParentRun, OnParentDeadLetter:
		return p, nil
	}
	return "", fmt.Errorf("unknown policy %q (want cancel, run or dead_letter)", s)
}

// Parent is one parent of a task as its handler sees it: the Go job, and
// the webhook and Lambda request ("parents").
type Parent struct {
	ID string `json:"id"`
	// Node is the parent's name in its workflow, if it has one.
	Node   string          `json:"node,omitempty"`
	Status Status          `json:"status"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *TaskError      `json:"error,omitempty"`
}

// Workflow limits: a workflow is validated whole before anything of it is
// written, and refused with 400 naming the nodes at fault.
const (
	MaxWorkflowNodes = 1000
	// MaxWorkflowDepth bounds the longest chain of nodes (a root alone is 1).
	MaxWorkflowDepth = 100
	MaxNodeName      = 128
)

// WorkflowNode is one node of a WorkflowRequest: a task, named, waiting for
// the nodes it names in After.
type WorkflowNode struct {
	Name string `json:"name"`
	// After names other nodes of the same workflow (not task ids).
	After []string `json:"after,omitempty"`
	SubmitRequest
}

// WorkflowRequest is the body of POST /api/v1/workflows.
type WorkflowRequest struct {
	Name string `json:"name,omitempty"`
	// IdempotencyKey: a repeated submit within 24 h returns the first
	// workflow, and completes it if a crash left it half-written.
	IdempotencyKey string         `json:"idempotency_key,omitempty"`
	Nodes          []WorkflowNode `json:"nodes"`
}

// Workflow states.
const (
	WorkflowPending   = "pending"   // being written; nothing of it runs
	WorkflowRunning   = "running"   // committed: its roots were released
	WorkflowCompleted = "completed" // every node is terminal
	// WorkflowAbandoned: a crash stopped its submit before the commit and
	// no retry with its idempotency key came within the abandonment grace
	// (flow.Options.AbandonAfter, 1 hour): its nodes were cancelled, and it
	// never runs. A retry after that gets it back as it is.
	WorkflowAbandoned = "abandoned"
)

// WorkflowNodeStatus is one node of a Workflow.
type WorkflowNodeStatus struct {
	Name   string   `json:"name"`
	TaskID string   `json:"task_id"`
	Type   string   `json:"type,omitempty"`
	After  []string `json:"after,omitempty"`
	Status Status   `json:"status,omitempty"`
	// Unwritten: the workflow's submit never wrote this node's task (a
	// crash stopped it before the commit), so TaskID names no task yet.
	// Its Status is then Waiting while the workflow is pending (a retry
	// with the idempotency key writes it) and Cancelled once the workflow
	// is abandoned (it never runs; the progress counts it cancelled).
	// Status is empty only for a node of a committed workflow whose task,
	// finished, was deleted by retention.
	Unwritten bool `json:"unwritten,omitempty"`
}

// Workflow is a workflow as GET /api/v1/workflows/{id} returns it.
type Workflow struct {
	ID        string               `json:"id"`
	Name      string               `json:"name,omitempty"`
	State     string               `json:"state"`
	CreatedAt time.Time            `json:"created_at"`
	Progress  BatchProgress        `json:"progress"`
	Nodes     []WorkflowNodeStatus `json:"nodes"`
}

// BatchProgress is how far a batch (or a workflow) is: O(1) to read.
type BatchProgress struct {
	Total        int `json:"total"`
	Done         int `json:"done"`
	Completed    int `json:"completed"`
	DeadLettered int `json:"dead_lettered"`
	Cancelled    int `json:"cancelled"`
}

// Batch states.
const (
	BatchOpen      = "open"      // members may be added
	BatchSealed    = "sealed"    // no more members; completes when all finish
	BatchCompleted = "completed" // every member finished; the callback was enqueued
)

// BatchCreate is the body of POST /api/v1/batches (a new batch) and of
// POST /api/v1/batches/{id}/tasks (members added later; OnComplete is
// then not allowed).
type BatchCreate struct {
	Tasks []SubmitRequest `json:"tasks,omitempty"`
	// OnComplete is enqueued exactly once when every member has finished;
	// its payload is a BatchCallback.
	OnComplete *SubmitRequest `json:"on_complete,omitempty"`
	// Open keeps the batch open for more members (seal it with POST
	// /api/v1/batches/{id}/seal); by default it is sealed at once.
	Open bool `json:"open,omitempty"`
}

// Batch is a batch as the API returns it.
type Batch struct {
	ID          string        `json:"id"`
	State       string        `json:"state"`
	CreatedAt   time.Time     `json:"created_at"`
	Progress    BatchProgress `json:"progress"`
	CallbackID  string        `json:"callback_id,omitempty"`
	CompletedAt *time.Time    `json:"completed_at,omitempty"`
	// Results are the outcomes of the members this request added (create
	// and add only), in request order, as a batch submit's.
	Results []BatchResult `json:"results,omitempty"`
}

// BatchCallback is the payload of a batch's on_complete task.
type BatchCallback struct {
	BatchID string        `json:"batch_id"`
	Counts  BatchProgress `json:"counts"`
	// Payload is the on_complete request's own payload.
	Payload json.RawMessage `json:"payload,omitempty"`
}
