package task

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Limits and defaults of a submitted task.
const (
	DefaultMaxAttempts    = 3
	MaxMaxAttempts        = 100
	DefaultTimeoutSeconds = 300
	MaxTimeoutSeconds     = 12 * 60 * 60
	MaxPayloadBytes       = 256 << 10 // a DynamoDB item is at most 400 KB; leave room for the rest
	MaxTypeLength         = 128
	MaxIdempotencyKey     = 256
	MaxDelaySeconds       = 365 * 24 * 60 * 60
)

// Request is a task submission: the body of POST /api/v1/tasks, and the
// body of a message a producer sends straight to SQS.
type Request struct {
	Type           string          `json:"type"`
	Payload        json.RawMessage `json:"payload,omitempty"`
	Priority       string          `json:"priority,omitempty"`
	MaxAttempts    *int            `json:"max_attempts,omitempty"`
	TimeoutSeconds *int            `json:"timeout_seconds,omitempty"`
	RunAt          *time.Time      `json:"run_at,omitempty"`
	DelaySeconds   *int            `json:"delay_seconds,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	TraceID        string          `json:"trace_id,omitempty"`
}

// FieldError is a validation failure of one request field.
type FieldError struct {
	Field   string
	Message string
	// TooLarge marks a payload over MaxPayloadBytes (HTTP 413, not 400).
	TooLarge bool
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

// Validate checks every field and returns the first problem as a *FieldError.
func (r *Request) Validate() error {
	switch {
	case strings.TrimSpace(r.Type) == "":
		return &FieldError{Field: "type", Message: "is required"}
	case len(r.Type) > MaxTypeLength:
		return &FieldError{Field: "type", Message: fmt.Sprintf("is longer than %d characters", MaxTypeLength)}
	case strings.ContainsAny(r.Type, "#\x00\n"):
		return &FieldError{Field: "type", Message: "must not contain '#', NUL or newlines"}
	}
	if r.Priority != "" {
		if _, err := ParsePriority(r.Priority); err != nil {
			return &FieldError{Field: "priority", Message: err.Error()}
		}
	}
	if len(r.Payload) > MaxPayloadBytes {
		return &FieldError{Field: "payload", Message: fmt.Sprintf("is %d bytes; the limit is %d bytes", len(r.Payload), MaxPayloadBytes), TooLarge: true}
	}
	if len(r.Payload) > 0 && !json.Valid(r.Payload) {
		return &FieldError{Field: "payload", Message: "is not valid JSON"}
	}
	if r.MaxAttempts != nil && (*r.MaxAttempts < 1 || *r.MaxAttempts > MaxMaxAttempts) {
		return &FieldError{Field: "max_attempts", Message: fmt.Sprintf("must be between 1 and %d", MaxMaxAttempts)}
	}
	if r.TimeoutSeconds != nil && (*r.TimeoutSeconds < 1 || *r.TimeoutSeconds > MaxTimeoutSeconds) {
		return &FieldError{Field: "timeout_seconds", Message: fmt.Sprintf("must be between 1 and %d", MaxTimeoutSeconds)}
	}
	if r.RunAt != nil && r.DelaySeconds != nil {
		return &FieldError{Field: "run_at", Message: "give run_at or delay_seconds, not both"}
	}
	if r.DelaySeconds != nil && (*r.DelaySeconds < 0 || *r.DelaySeconds > MaxDelaySeconds) {
		return &FieldError{Field: "delay_seconds", Message: fmt.Sprintf("must be between 0 and %d", MaxDelaySeconds)}
	}
	if len(r.IdempotencyKey) > MaxIdempotencyKey {
		return &FieldError{Field: "idempotency_key", Message: fmt.Sprintf("is longer than %d characters", MaxIdempotencyKey)}
	}
	return nil
}

// NewTask builds the task a valid request describes, created at now. The
// task starts queued (dispatch version 1) unless it runs more than
// directWindow from now: then it starts scheduled, with no message.
func (r *Request) NewTask(now time.Time, directWindow time.Duration) *Task {
	p := Medium
	if r.Priority != "" {
		p = Priority(r.Priority)
	}
	t := &Task{
		ID: NewID(now), Type: r.Type, Payload: compact(r.Payload),
		Priority: p, EffectivePriority: p, Status: Queued,
		MaxAttempts: DefaultMaxAttempts, TimeoutSeconds: DefaultTimeoutSeconds,
		CreatedAt: now, WaitingSince: now, Version: 1, DispatchVersion: 1,
		IdempotencyKey: r.IdempotencyKey, TraceID: r.TraceID,
	}
	if r.MaxAttempts != nil {
		t.MaxAttempts = *r.MaxAttempts
	}
	if r.TimeoutSeconds != nil {
		t.TimeoutSeconds = *r.TimeoutSeconds
	}
	switch {
	case r.RunAt != nil:
		at := r.RunAt.UTC()
		t.RunAt = &at
	case r.DelaySeconds != nil && *r.DelaySeconds > 0:
		at := now.Add(time.Duration(*r.DelaySeconds) * time.Second).UTC()
		t.RunAt = &at
	}
	if t.RunAt != nil && t.RunAt.Sub(now) > directWindow {
		t.Status, t.DispatchVersion = Scheduled, NoMessage
	} else {
		t.EnqueuedAt = &now
	}
	if t.TraceID == "" {
		t.TraceID = t.ID
	}
	return t
}

func compact(p json.RawMessage) json.RawMessage {
	if len(p) == 0 {
		return nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, p); err != nil {
		return p
	}
	return b.Bytes()
}
