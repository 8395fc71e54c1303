package task

import (
	"errors"
	"fmt"

	"github.com/triagehq/triage/triagetype"
)

// ErrInvalidTransition is returned for a transition the state machine forbids.
var ErrInvalidTransition = errors.New("invalid transition")

// TransitionError names the forbidden move.
type TransitionError struct {
	From, To triagetype.Status
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("invalid transition %s -> %s", e.From, e.To)
}

// Unwrap lets errors.Is match ErrInvalidTransition.
func (e *TransitionError) Unwrap() error { return ErrInvalidTransition }

// CanTransition reports whether the state machine allows from -> to.
//
// The task states (triagetype's Status values). A task is in exactly one
// of them:
//
//   - scheduled: its run_at is further away than SQS can delay a message
//     (15 minutes); it has no message until the promoter releases it to
//     queued.
//   - queued: its message waits on a priority queue (hidden until run_at,
//     if it has one) for a consumer.
//   - executing: a consumer claimed it, counted the attempt and holds its
//     lease.
//   - retrying: an attempt failed and attempts are left; it waits until
//     retry_at (its message hidden or delayed, or sent by the promoter when
//     due).
//   - waiting: it names parents (after) not all finished; it has no
//     message until internal/flow releases it: when its last parent
//     completes, a message naming that parent (Message.ReleasedBy) is
//     sent with no write, and the claim moves it from waiting to
//     executing; otherwise (and when that message is not claimed in
//     time) a write moves it to queued. Or flow cancels or dead-letters
//     it by its parent policy.
//   - completed, cancelled, dead_letter: finished (see Terminal). Only
//     dead_letter is ever left, and only by hand (an operator's retry or
//     DLQ replay puts it back in queued).
//
// The invariant: a task moves only as CanTransition allows, and every move
// (see store.Transition) is one conditional write on the task's status and
// version, so of two writers that read the same state only one can move it.
//
// A queued task may also move to queued: that is a promotion or a re-dispatch.
// A queued or retrying task moves to dead_letter when SQS redrove its
// message to the DLQ (it crashed every consumer that received it).
func CanTransition(from, to triagetype.Status) bool {
	switch from {
	case triagetype.Scheduled:
		return to == triagetype.Queued || to == triagetype.Cancelled
	case triagetype.Queued:
		return to == triagetype.Executing || to == triagetype.Cancelled || to == triagetype.Queued || to == triagetype.DeadLetter
	case triagetype.Executing:
		return to == triagetype.Completed || to == triagetype.Retrying || to == triagetype.DeadLetter || to == triagetype.Queued || to == triagetype.Cancelled
	case triagetype.Retrying:
		return to == triagetype.Executing || to == triagetype.Cancelled || to == triagetype.Queued || to == triagetype.DeadLetter
	case triagetype.DeadLetter:
		return to == triagetype.Queued
	case triagetype.Waiting:
		return to == triagetype.Queued || to == triagetype.Scheduled || to == triagetype.Cancelled || to == triagetype.DeadLetter || to == triagetype.Executing
	}
	return false
}

// CheckTransition returns a *TransitionError when from -> to is not allowed.
func CheckTransition(from, to triagetype.Status) error {
	if !CanTransition(from, to) {
		return &TransitionError{From: from, To: to}
	}
	return nil
}
