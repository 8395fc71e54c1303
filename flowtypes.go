package triage

import "github.com/triagehq/triage/triagetype"

// Dependencies, workflows and batches (see README "Dependencies,
// workflows and batches").
type (
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
)

// Waiting is the status of a task whose parents have not all finished.
const Waiting = triagetype.Waiting

// The parent policies (SubmitRequest.OnParentFailure).
const (
	OnParentCancel     = triagetype.OnParentCancel
	OnParentRun        = triagetype.OnParentRun
	OnParentDeadLetter = triagetype.OnParentDeadLetter
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
)
