package task

import (
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/triagehq/triage/triagetype"
)

// Durable execution (package internal/durable) keeps two kinds of record
// on the task's own item, each as a top-level attribute of its own:
//
//   - a Step per step the handler met, "st#<seq>" (StepAttr), in the order
//     met: written once when the step's function returns (or a sleep or
//     signal wait starts, then rewritten when the wait is consumed),
//     conditional on the attempt's claim, so a stale attempt cannot record;
//   - a Signal per signal delivered, "sg#<name>" (SignalAttr), written once
//     (a second signal of the same name is refused).
//
// Neither is part of the task's ordinary writes (store.Transition): no
// transition sets or removes them, so a stale snapshot never drops one,
// and every read of the item (the claim's ALL_NEW answer included) brings
// them, so an attempt gets its recorded steps with no read of its own.
const (
	StepAttrPrefix   = "st#"
	SignalAttrPrefix = "sg#"
)

// StepAttr is the item attribute of the step at seq (0-based), fixed-width
// so attributes sort in the order met.
func StepAttr(seq int) string { return fmt.Sprintf("%s%04d", StepAttrPrefix, seq) }

// SignalAttr is the item attribute of the signal named name.
func SignalAttr(name string) string { return SignalAttrPrefix + name }

// The kinds of step record (triagetype's).
const (
	StepRun    = triagetype.StepRun
	StepSleep  = triagetype.StepSleep
	StepWait   = triagetype.StepWait
	StepSignal = triagetype.StepSignal
)

// Bounds on the steps of one task. A record is ~150 bytes plus its inline
// result. A result is kept on the item when it is at most MaxStepInline
// (3 KiB, store.InlineMax: where S3's flat request price and DynamoDB's
// per-KB write price cross) and the task's inline step results stay
// within MaxStepsInline (96 KiB); otherwise it goes to the blob store
// (S3), as a payload over store.InlineMax does. So MaxSteps records take
// at most 96 KiB + 200 × 150 B ≈ 126 KiB of the 400 KB item, beside an
// inline payload, result, checkpoint and history of ≈ 15 KiB.
const (
	MaxSteps       = 200
	MaxStepInline  = 3 << 10
	MaxStepsInline = 96 << 10
)

// Step, Signal and Suspend are the public types (triagetype's); the
// store keeps them in its own storage shapes (internal/store/item.go).
type (
	Step    = triagetype.Step
	Signal  = triagetype.Signal
	Suspend = triagetype.Suspend
)

// Limits of a signal.
const (
	MaxSignalBytes = 3 << 10
	MaxNameBytes   = 64
)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]*$`)

// CheckStepName validates a step's or signal's name (field names the
// request field): 1 to 64 letters, digits, '_', '.', ':' or '-', starting
// with a letter or digit.
func CheckStepName(field, name string) *FieldError {
	if len(name) == 0 || len(name) > MaxNameBytes || !nameRE.MatchString(name) {
		return &FieldError{Field: field, Message: fmt.Sprintf("%q must be 1 to %d letters, digits, '_', '.', ':' or '-', starting with a letter or digit", Shorten(name, 80), MaxNameBytes)}
	}
	return nil
}

// CheckSignalPayload validates a signal's payload: a JSON value of at most
// MaxSignalBytes (it is kept on the task's item).
func CheckSignalPayload(data json.RawMessage) *FieldError {
	if len(data) > MaxSignalBytes {
		return &FieldError{Field: "payload", Message: fmt.Sprintf("is %d bytes; the limit is %d", len(data), MaxSignalBytes)}
	}
	if len(data) == 0 || !json.Valid(data) {
		return &FieldError{Field: "payload", Message: "must be a JSON value"}
	}
	return nil
}
