// Package triagetype holds the types triage's API speaks: a task, its
// priority and status, a submit, the answers of the other endpoints, and
// the API's errors and their codes. Each is defined here once, with the
// JSON names the API uses and no storage mapping (the store keeps its own,
// in internal/store).
//
// Package triage re-exports the few of these a caller writes out by name
// (Task, SubmitRequest, Priority, Status, Error and the bodies a caller
// builds; its package doc lists them); everything else is used as
// triagetype.X. triage's internal packages use the same definitions
// (internal/task's Priority, Status, Error and Attempt are aliases of the
// types here, its Request is a defined type over SubmitRequest), so a
// value crosses from the internals to a caller by a Go conversion, never
// by encoding it and decoding it again.
//
// Invariant: this package imports only the standard library, so that
// anything may import it.
package triagetype

import "fmt"

// Priority is a task's scheduling class. Each priority has its own queue.
type Priority string

// The three priorities, highest first.
const (
	High   Priority = "high"
	Medium Priority = "medium"
	Low    Priority = "low"
)

// Priorities lists every priority, highest first.
func Priorities() []Priority { return []Priority{High, Medium, Low} }

// ParsePriority returns the priority named s, or an error naming the
// allowed values.
func ParsePriority(s string) (Priority, error) {
	if err := Priority(s).Validate(); err != nil {
		return "", err
	}
	return Priority(s), nil
}

// Validate returns nil for High, Medium and Low, and an error naming the
// allowed values for anything else (the empty priority too).
func (p Priority) Validate() error {
	switch p {
	case High, Medium, Low:
		return nil
	}
	return fmt.Errorf("unknown priority %q: want high, medium or low", string(p))
}

// Rank orders priorities: high is 0, medium 1, low 2.
func (p Priority) Rank() int {
	switch p {
	case High:
		return 0
	case Medium:
		return 1
	default:
		return 2
	}
}

// Next returns the priority one step higher, where the promoter moves a
// task that waited too long at p, and false if p is already high.
func (p Priority) Next() (Priority, bool) {
	switch p {
	case Low:
		return Medium, true
	case Medium:
		return High, true
	}
	return p, false
}

// Status is a task's place in its lifecycle.
type Status string

// The task statuses. A task starts scheduled (its run_at is far off) or
// queued, runs as executing, waits between attempts as retrying, and ends
// completed, cancelled or dead_letter.
const (
	Scheduled  Status = "scheduled"
	Queued     Status = "queued"
	Executing  Status = "executing"
	Retrying   Status = "retrying"
	Completed  Status = "completed"
	Cancelled  Status = "cancelled"
	DeadLetter Status = "dead_letter"
	// Waiting: the task names parents (after) that have not all finished;
	// it has no message and enters its queue when the last one completes.
	Waiting Status = "waiting"
)

// Statuses lists every status.
func Statuses() []Status {
	return []Status{Scheduled, Queued, Executing, Retrying, Completed, Cancelled, DeadLetter, Waiting}
}

// ParseStatus returns the status named s.
func ParseStatus(s string) (Status, error) {
	for _, st := range Statuses() {
		if string(st) == s {
			return st, nil
		}
	}
	return "", fmt.Errorf("unknown status %q", s)
}

// Terminal reports whether no automatic transition leaves s: the task
// will not change by itself any more.
func (s Status) Terminal() bool {
	return s == Completed || s == Cancelled || s == DeadLetter
}

// Claimable reports whether a consumer may start a task in s.
func (s Status) Claimable() bool { return s == Queued || s == Retrying }
