package task

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"

	"github.com/triagehq/triage/triagetype"
)

// Limits and defaults of a submitted task. They are the API's documented
// input limits (the OpenAPI document states the same numbers, checked by a
// test), and they hold for direct SQS sends too.
const (
	DefaultMaxAttempts    = 3
	MaxMaxAttempts        = 100
	DefaultTimeoutSeconds = 300
	MaxTimeoutSeconds     = 12 * 60 * 60
	// MaxPayloadBytes bounds a payload, and MaxResultBytes a handler's
	// result. Neither is bounded by DynamoDB's 400 KB item: above
	// store.InlineMax they are kept as S3 objects. 1 MiB is SQS's message
	// limit, which a direct send's payload travels in, and keeps a task with
	// both within a Lambda response (6 MB).
	MaxPayloadBytes = 1 << 20
	MaxResultBytes  = MaxPayloadBytes
	// MaxPayloadDepth bounds how deeply a payload nests arrays and objects:
	// Go's JSON decoder refuses documents nested over 10,000 levels, so a
	// deeper payload would break every reader of the task, list pages too.
	MaxPayloadDepth   = 64
	MaxTypeLength     = 128
	MaxIdempotencyKey = 256
	MaxTraceID        = 128 // printable ASCII; a W3C trace id is 32 hex digits
	MaxDelaySeconds   = 365 * 24 * 60 * 60
	// MaxRunAtFraction bounds the fractional-second digits of run_at: a
	// task's times are kept to the nanosecond.
	MaxRunAtFraction = 9
)

// Request is a task submission: the body of POST /api/v1/tasks, and the
// body of a message a producer sends straight to SQS. It is a defined type
// over the public triagetype.SubmitRequest, so the fields and their JSON
// names are written once and a client's request converts to it with a Go
// conversion; the validation and defaults are this package's.
type Request triagetype.SubmitRequest

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
	if err := ValidateType(r.Type); err != nil {
		return &FieldError{Field: "type", Message: err.Error()}
	}
	if err := ValidateKey(r.Key); err != nil {
		return &FieldError{Field: "key", Message: err.Error()}
	}
	if r.Priority != "" {
		if err := r.Priority.Validate(); err != nil {
			return &FieldError{Field: "priority", Message: err.Error()}
		}
	}
	if len(r.Payload) > MaxPayloadBytes {
		return &FieldError{Field: "payload", Message: fmt.Sprintf("is %d bytes; the limit is %d bytes", len(r.Payload), MaxPayloadBytes), TooLarge: true}
	}
	if len(r.Payload) > 0 && !json.Valid(r.Payload) {
		return &FieldError{Field: "payload", Message: "is not valid JSON"}
	}
	if d := jsonDepth(r.Payload); d > MaxPayloadDepth {
		return &FieldError{Field: "payload", Message: fmt.Sprintf("nests %d levels deep; the limit is %d", d, MaxPayloadDepth)}
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
	if !utf8.ValidString(r.IdempotencyKey) || strings.ContainsRune(r.IdempotencyKey, utf8.RuneError) {
		return &FieldError{Field: "idempotency_key", Message: "is not valid UTF-8"}
	}
	if len(r.TraceID) > MaxTraceID {
		return &FieldError{Field: "trace_id", Message: fmt.Sprintf("is longer than %d characters", MaxTraceID)}
	}
	for _, c := range []byte(r.TraceID) {
		if c < 0x21 || c > 0x7e {
			return &FieldError{Field: "trace_id", Message: "must be printable ASCII without spaces"}
		}
	}
	return r.validateAfter()
}

// validateAfter checks the dependency fields: at most MaxParents distinct
// task ids, and a known policy (only with parents).
func (r *Request) validateAfter() error {
	if len(r.After) > triagetype.MaxParents {
		return &FieldError{Field: "after", Message: fmt.Sprintf("names %d parents; the limit is %d", len(r.After), triagetype.MaxParents)}
	}
	seen := make(map[string]bool, len(r.After))
	for i, id := range r.After {
		field := fmt.Sprintf("after[%d]", i)
		if !ValidID(id) {
			return &FieldError{Field: field, Message: "is not a task id"}
		}
		if seen[id] {
			return &FieldError{Field: field, Message: fmt.Sprintf("names %s twice", id)}
		}
		seen[id] = true
	}
	if _, err := triagetype.ParseParentPolicy(r.OnParentFailure); err != nil {
		return &FieldError{Field: "on_parent_failure", Message: err.Error()}
	}
	if r.OnParentFailure != "" && len(r.After) == 0 {
		return &FieldError{Field: "on_parent_failure", Message: "needs after"}
	}
	if r.BatchID != "" && !ValidID(r.BatchID) {
		return &FieldError{Field: "batch_id", Message: "is not a batch id"}
	}
	return nil
}

// ValidateType checks a task type name, wherever one arrives (a submit, a
// direct send, a control endpoint's path or query): 1 to MaxTypeLength
// bytes of valid UTF-8, without '#' (it separates index key parts), NUL,
// newlines or U+FFFD (what a JSON decoder makes of invalid UTF-8).
func ValidateType(typ string) error {
	if strings.TrimSpace(typ) == "" {
		return fmt.Errorf("is required")
	}
	return validateName(typ)
}

// ValidateKey checks a fairness key, wherever one arrives (a submit, a
// direct send, a control endpoint): empty (DefaultKey) or a name by the
// type's rules, since a key is a part of index and control item keys just
// as a type is. A key of blanks only is refused as a type of blanks is.
func ValidateKey(key string) error {
	if key == "" {
		return nil
	}
	if strings.TrimSpace(key) == "" {
		return fmt.Errorf("must not be blank (leave it out for the default key)")
	}
	return validateName(key)
}

// validateName holds the rules a type and a key share.
func validateName(typ string) error {
	switch {
	case len(typ) > MaxTypeLength:
		return fmt.Errorf("is %d bytes; the limit is %d", len(typ), MaxTypeLength)
	case !utf8.ValidString(typ) || strings.ContainsRune(typ, utf8.RuneError):
		return fmt.Errorf("is not valid UTF-8")
	case strings.ContainsAny(typ, "#\x00\n\r"):
		return fmt.Errorf("must not contain '#', NUL or newlines")
	}
	return nil
}

// ValidateRunAtText checks the JSON text of a submit's run_at (nil when
// absent) for what its decoded time.Time cannot show: Go's RFC 3339 parser
// takes a fraction of any length and keeps nanoseconds, so a fraction over
// MaxRunAtFraction digits would be cut without a word (and a long one costs
// parsing). The time itself is checked by decoding it.
func ValidateRunAtText(raw json.RawMessage) error {
	_, frac, ok := bytes.Cut(raw, []byte("."))
	if !ok {
		return nil
	}
	digits := 0
	for digits < len(frac) && frac[digits] >= '0' && frac[digits] <= '9' {
		digits++
	}
	if digits > MaxRunAtFraction {
		return &FieldError{Field: "run_at", Message: fmt.Sprintf("has %d fractional-second digits; the limit is %d (nanoseconds)", digits, MaxRunAtFraction)}
	}
	return nil
}

// ValidID reports whether id is a task id: a ULID (26 Crockford base32
// characters), as NewID makes them.
func ValidID(id string) bool {
	_, err := ulid.ParseStrict(id)
	return err == nil
}

// jsonDepth is the deepest nesting of arrays and objects in a JSON text
// (valid or not), counted without decoding it: brackets inside strings,
// escaped quotes included, do not count.
func jsonDepth(b []byte) int {
	depth, deepest, inString, escaped := 0, 0, false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			deepest = max(deepest, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return deepest
}

// NewTask builds the task a valid request describes, created at now. The
// task starts queued (dispatch version 1) unless it runs more than
// directWindow from now: then it starts scheduled, with no message.
func (r *Request) NewTask(now time.Time, directWindow time.Duration) *Task {
	p := r.Priority // Validate checked it
	if p == "" {
		p = triagetype.Medium
	}
	t := &Task{
		ID: NewID(now), Type: r.Type, Key: r.Key, Payload: compact(r.Payload),
		Priority: p, EffectivePriority: p, Status: triagetype.Queued,
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
		t.Status, t.DispatchVersion = triagetype.Scheduled, NoMessage
	} else {
		t.EnqueuedAt = &now
	}
	if t.TraceID == "" {
		t.TraceID = t.ID
	}
	t.BatchID = r.BatchID // its counter shard is fixed when it is recorded
	if len(r.After) > 0 {
		// It waits for its parents with no message; internal/flow releases it.
		t.Status, t.DispatchVersion, t.EnqueuedAt = triagetype.Waiting, NoMessage, nil
		t.After = append([]string(nil), r.After...)
		t.WaitingOn = append([]string(nil), r.After...)
		t.OnParentFailure, _ = triagetype.ParseParentPolicy(r.OnParentFailure)
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
