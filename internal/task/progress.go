package task

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/triagehq/triage/triagetype"
)

// Progress is a handler's last progress report (the public type, whose
// dynamodbav names are the item's).
type Progress = triagetype.Progress

// Bounds on what a handler may report while it runs. Every report lands on
// the task's own item, and every later write of that item (heartbeats, the
// outcome) is billed on the item's size, so a checkpoint is kept as small
// as an inline payload: a handler with more state saves it elsewhere and
// checkpoints a reference to it.
const (
	// MaxCheckpointBytes bounds a checkpoint (JSON), as store.InlineMax
	// bounds an inline payload.
	MaxCheckpointBytes = 3 << 10
	// MaxProgressMessageBytes bounds a progress message.
	MaxProgressMessageBytes = 256
	// ProgressInterval is the least time between two writes of one task's
	// progress: reports in between are kept in memory (latest wins) and
	// written with the next heartbeat or once the interval has passed, and
	// the API refuses an external handler's report sent sooner (429). It is
	// what keeps a handler reporting in a tight loop from multiplying the
	// writes of its task.
	ProgressInterval = 5 * time.Second
)

// CheckProgress validates a progress report: a percentage from 0 to 100
// and a short UTF-8 message.
func CheckProgress(percent int, message string) *FieldError {
	if percent < 0 || percent > 100 {
		return &FieldError{Field: "percent", Message: fmt.Sprintf("must be from 0 to 100, not %d", percent)}
	}
	if len(message) > MaxProgressMessageBytes {
		return &FieldError{Field: "message", Message: fmt.Sprintf("is %d bytes; the limit is %d", len(message), MaxProgressMessageBytes)}
	}
	if !utf8.ValidString(message) {
		return &FieldError{Field: "message", Message: "is not valid UTF-8"}
	}
	return nil
}

// CheckCheckpoint validates a checkpoint: JSON of at most MaxCheckpointBytes.
func CheckCheckpoint(data json.RawMessage) *FieldError {
	if len(data) > MaxCheckpointBytes {
		return &FieldError{Field: "checkpoint", Message: fmt.Sprintf("is %d bytes; the limit is %d", len(data), MaxCheckpointBytes), TooLarge: true}
	}
	if len(data) == 0 || !json.Valid(data) {
		return &FieldError{Field: "checkpoint", Message: "must be a JSON value"}
	}
	return nil
}

// NewProgressToken returns a fresh attempt token: 256 random bits, so it
// cannot be guessed, URL-safe so it travels in a header or a query.
func NewProgressToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}
