package task

import "github.com/triagehq/triage/triagetype"

// Public returns the task as the API shows it: every field but the
// bookkeeping (versions, lease, index marks), copied so that the caller
// owns the result. Its JSON is the same as t's (TestPublicMatchesJSON
// checks), which is what lets the direct transport answer exactly as the
// HTTP API does without encoding anything.
func (t *Task) Public() *triagetype.Task {
	c := t.Clone()
	return &triagetype.Task{
		ID:                c.ID,
		Type:              c.Type,
		Key:               c.Key,
		Payload:           c.Payload,
		Priority:          c.Priority,
		EffectivePriority: c.EffectivePriority,
		Status:            c.Status,
		Attempts:          c.Attempts,
		MaxAttempts:       c.MaxAttempts,
		TimeoutSeconds:    c.TimeoutSeconds,
		RunAt:             c.RunAt,
		CreatedAt:         c.CreatedAt,
		EnqueuedAt:        c.EnqueuedAt,
		StartedAt:         c.StartedAt,
		CompletedAt:       c.CompletedAt,
		Result:            c.Result,
		Error:             c.Error,
		IdempotencyKey:    c.IdempotencyKey,
		TraceID:           c.TraceID,
		History:           c.History,
		CancelRequested:   c.CancelRequested,
		PayloadSize:       c.PayloadSize,
		ResultSize:        c.ResultSize,
		RetryAt:           c.RetryAt,
		Held:              c.Held,
		Progress:          c.Progress,
		Checkpoint:        c.Checkpoint,
		Promotions:        c.Promotions,
		Steps:             c.Steps,
		Signals:           c.Signals,
		Suspend:           c.Suspend,
		Schedule:          c.Schedule,
		After:             c.After,
		OnParentFailure:   c.OnParentFailure,
		WaitingOn:         c.WaitingOn,
		WorkflowID:        c.WorkflowID,
		Node:              c.Node,
		BatchID:           c.BatchID,
	}
}
