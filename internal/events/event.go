// Package events turns the task table's state changes into lifecycle
// events (task.submitted, task.started, ...) and delivers them: to
// Server-Sent Events subscribers of a long-lived API server (Broker), to
// signed webhooks (Webhooks) and to an EventBridge bus (EventBridge).
//
// Events are derived from the table's DynamoDB stream, the authoritative
// record of every transition, never from the request paths: a transition
// is an event exactly when its conditional write succeeded. The stream
// consumer that keeps the /stats counters (internal/counters) hands each
// applied batch to a Fanout, in stream order. DynamoDB streams keep the
// records of one item in order, so the events of one task arrive in the
// order its transitions happened. Delivery is at least once: a batch
// whose delivery failed is delivered again, whole, so a consumer
// de-duplicates by Event.ID, which is the same every time the same stream
// record is turned into an event.
package events

import (
	"fmt"
	"slices"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/triagehq/triage/internal/counters"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Type names what happened to a task.
type Type string

// The event types. Only transitions that a user acts on are events: a
// scheduled task's release, a parked retry's re-send, heartbeats and
// cancel requests change the record but are not events.
const (
	// Submitted: the task was created (API, batch, or an adopted direct send).
	Submitted Type = "task.submitted"
	// Started: a consumer claimed the task and runs attempt Attempt.
	Started Type = "task.started"
	// Retrying: an attempt ended and the task will run again by itself:
	// a retriable failure or a snooze (status retrying, RetryAt set), or a
	// run interrupted by a hand-back or an expired lease (status queued).
	Retrying Type = "task.retrying"
	// Completed: the handler succeeded.
	Completed Type = "task.completed"
	// DeadLettered: out of attempts, a permanent error, or a poison message.
	DeadLettered Type = "task.dead_lettered"
	// Cancelled: cancelled before or while it ran.
	Cancelled Type = "task.cancelled"
	// Promoted: the task's effective priority was raised while it waited.
	Promoted Type = "task.promoted"
	// Requeued: an operator put a dead-lettered task back on its queue
	// (POST /tasks/{id}/retry or a DLQ replay).
	Requeued Type = "task.requeued"
	// ScheduleTicked: a schedule's tick made its task (package schedule).
	// It comes with that task's task.submitted, once per tick: the tick's
	// task is created once, whichever promoter made it.
	ScheduleTicked Type = "schedule.ticked"
	// Waiting: the task was created waiting for its parents (after, or a
	// workflow node); it is a submit too, and has no task.submitted.
	Waiting Type = "task.waiting"
	// Sleeping: an attempt ended durably (worker.Sleep or WaitSignal): the
	// task waits without spending the attempt until RetryAt, or until
	// Signal arrives when it names one.
	Sleeping Type = "task.sleeping"
	// Signalled: signal Signal was delivered to the task (it is kept until
	// the task's wait consumes it).
	Signalled Type = "task.signalled"
	// WorkflowCompleted: every node of a workflow is terminal (BatchID is
	// the workflow's id, Counts how its nodes ended).
	WorkflowCompleted Type = "workflow.completed"
	// SetAside: the queued task was set aside in a held set (Scope: its
	// type or key paused, at a limit, waiting out a Retry-After, or its
	// key past its fair window), with no message, until its scope can run.
	// A task set aside at submit has task.submitted with Scope instead.
	SetAside Type = "task.set_aside"
	// Released: a set-aside task was released from Scope to its queue.
	Released Type = "task.released"
	// BatchCompleted: every member of a sealed batch finished and its
	// on_complete task (TaskID) was enqueued.
	BatchCompleted Type = "batch.completed"
)

// Types lists every event type.
func Types() []Type {
	return []Type{Submitted, Started, Retrying, Completed, DeadLettered, Cancelled, Promoted, Requeued, ScheduleTicked, Waiting, Sleeping, Signalled, WorkflowCompleted, BatchCompleted, SetAside, Released}
}

// ParseType returns the event type named s.
func ParseType(s string) (Type, error) {
	if t := Type(s); slices.Contains(Types(), t) {
		return t, nil
	}
	return "", fmt.Errorf("unknown event type %q: want one of %v", s, Types())
}

// Event is one lifecycle event. Its JSON form is the wire shape of every
// delivery (an SSE data line, a webhook body, an EventBridge detail).
type Event struct {
	// ID is "<task_id>-<version>": every write of a task bumps its version
	// by one, so the ID names exactly one state of one task and is the same
	// however often the stream record is delivered (the de-duplication key).
	ID   string    `json:"id"`
	Type Type      `json:"type"`
	Time time.Time `json:"time"` // when the transition was written

	// The task fields are always set on task.* events; a batch or
	// workflow event has only TaskID (its callback, if any).
	TaskID   string `json:"task_id,omitempty"`
	TaskType string `json:"task_type,omitempty"`
	// Key is the task's fairness key (absent: the default key).
	Key               string              `json:"key,omitempty"`
	Status            triagetype.Status   `json:"status,omitempty"` // the task's status after the transition
	Priority          triagetype.Priority `json:"priority,omitempty"`
	EffectivePriority triagetype.Priority `json:"effective_priority,omitempty"`
	// PreviousPriority is the effective priority before a promotion.
	PreviousPriority triagetype.Priority `json:"previous_priority,omitempty"`
	// Attempt is the task's attempt count after the transition: the attempt
	// that started, or the one that just ended.
	Attempt     int `json:"attempt"`
	MaxAttempts int `json:"max_attempts"`
	// DurationMS is how long the attempt that just ended ran (events that
	// end an attempt: completed, retrying, dead_lettered and cancelled
	// while executing).
	DurationMS *int64 `json:"duration_ms,omitempty"`
	// Error is why the attempt or the task failed (retrying, dead_lettered,
	// and cancelled by the handler).
	Error *triagetype.TaskError `json:"error,omitempty"`
	// RetryAt is when a retrying task runs again (a sleeping one: when it
	// wakes, at the latest).
	RetryAt *time.Time `json:"retry_at,omitempty"`
	// Signal is the signal a sleeping task waits for, or the one a
	// task.signalled event delivered.
	Signal  string `json:"signal,omitempty"`
	TraceID string `json:"trace_id,omitempty"`
	// Schedule is the schedule of a schedule.ticked event, whose Time is
	// the tick's.
	Schedule string `json:"schedule,omitempty"`
	// Scope is the held set of a task.set_aside or task.released event,
	// or of a task.submitted one set aside at submit ("type#<type>",
	// "key#<key>", "tk#<type>#<key>", "fair#<priority>#<key>").
	Scope string `json:"scope,omitempty"`
	// BatchID and Counts describe a completed batch or workflow
	// (batch.completed, workflow.completed).
	BatchID string                    `json:"batch_id,omitempty"`
	Counts  *triagetype.BatchProgress `json:"counts,omitempty"`
}

// Derive returns the event of one stream record of a task, given the
// task's images before and after it (old is nil for an insert, new is nil
// for a removal); ok is false when the change is not an event (see Type).
func Derive(old, new *task.Task) (ev Event, ok bool) {
	if new == nil {
		return Event{}, false // removals (deletes, TTL) are not lifecycle events
	}
	var typ Type
	signal := ""
	switch {
	case old == nil && new.Status == triagetype.Waiting:
		typ = Waiting
	case old == nil:
		typ = Submitted
	case new.Status == triagetype.Queued && new.Held != "" && old.Held != new.Held && old.Status != triagetype.Executing:
		typ = SetAside // a Retry-After's set-aside ends an attempt: task.retrying
	case new.Status == triagetype.Queued && old.Held != "" && new.Held == "":
		typ = Released
	case old.Status == new.Status && len(new.Signals) > len(old.Signals):
		typ, signal = Signalled, newSignal(old, new)
	case old.Status == new.Status:
		if new.EffectivePriority.Rank() < old.EffectivePriority.Rank() {
			typ = Promoted
		}
	case new.Status == triagetype.Retrying && new.Suspend != nil:
		typ, signal = Sleeping, new.Suspend.Signal
	case new.Status == triagetype.Executing:
		typ = Started
	case new.Status == triagetype.Retrying:
		typ = Retrying
	case new.Status == triagetype.Completed:
		typ = Completed
	case new.Status == triagetype.DeadLetter:
		typ = DeadLettered
	case new.Status == triagetype.Cancelled:
		typ = Cancelled
	case new.Status == triagetype.Queued && old.Status == triagetype.Executing:
		typ = Retrying // handed back or reclaimed: the attempt is counted, it runs again
	case new.Status == triagetype.Queued && old.Status == triagetype.DeadLetter:
		typ = Requeued
	}
	if typ == "" {
		return Event{}, false
	}
	ev = Event{
		ID:                fmt.Sprintf("%s-%d", new.ID, new.Version),
		Type:              typ,
		Time:              new.WaitingSince,
		TaskID:            new.ID,
		TaskType:          new.Type,
		Key:               new.Key,
		Status:            new.Status,
		Priority:          new.Priority,
		EffectivePriority: new.EffectivePriority,
		Attempt:           new.Attempts,
		MaxAttempts:       new.MaxAttempts,
		TraceID:           new.TraceID,
	}
	if ev.Time.IsZero() {
		ev.Time = new.CreatedAt
	}
	switch typ {
	case Submitted, SetAside:
		ev.Scope = new.Held
	case Released:
		ev.Scope = old.Held
	case Signalled:
		// A signal's write does not bump the version: its own ID, one per
		// name (a second signal of a name is refused).
		ev.ID, ev.Signal = fmt.Sprintf("%s-%d-signal-%s", new.ID, new.Version, signal), signal
		if sg, ok := new.SignalNamed(signal); ok {
			ev.Time = sg.At
		}
	case Sleeping:
		ev.RetryAt, ev.Signal = new.RetryAt, signal
	case Promoted:
		ev.PreviousPriority = old.EffectivePriority
	case Retrying:
		ev.RetryAt = new.RetryAt
		ev.Error = new.Error
		if new.Status == triagetype.Queued {
			ev.Error = nil
			if a, ok := lastAttempt(old, new); ok && a.Error != "" {
				ev.Error = &triagetype.TaskError{Message: a.Error, Retriable: true}
			}
		}
	case DeadLettered, Cancelled:
		ev.Error = new.Error
	}
	if old != nil && old.Status == triagetype.Executing && typ != Started {
		ev.DurationMS = duration(old, new, ev.Time)
	}
	return ev, true
}

// newSignal names a signal new has and old has not.
func newSignal(old, new *task.Task) string {
	for _, sg := range new.Signals {
		if _, had := old.SignalNamed(sg.Name); !had {
			return sg.Name
		}
	}
	return ""
}

// DeriveTick returns the schedule.ticked event of a stream record: the
// insert of a task a schedule's tick made. Its ID is "<task_id>-tick"
// (one per tick, however often the record is delivered) and its Time the
// tick's, which is the time of the task's id.
func DeriveTick(old, new *task.Task) (Event, bool) {
	if old != nil || new == nil || new.Schedule == "" {
		return Event{}, false
	}
	at := new.CreatedAt
	if id, err := ulid.ParseStrict(new.ID); err == nil {
		at = ulid.Time(id.Time()).UTC()
	}
	return Event{
		ID: new.ID + "-tick", Type: ScheduleTicked, Time: at,
		TaskID: new.ID, TaskType: new.Type, Status: new.Status,
		Priority: new.Priority, EffectivePriority: new.EffectivePriority,
		MaxAttempts: new.MaxAttempts, TraceID: new.TraceID, Schedule: new.Schedule,
	}, true
}

// lastAttempt is the attempt new's history gained over old's (the history
// is capped, so it compares the newest entries, not the lengths).
func lastAttempt(old, new *task.Task) (triagetype.Attempt, bool) {
	if len(new.History) == 0 {
		return triagetype.Attempt{}, false
	}
	a := new.History[len(new.History)-1]
	if n := len(old.History); n > 0 && old.History[n-1] == a {
		return triagetype.Attempt{}, false
	}
	return a, true
}

// duration is how long the attempt that ended with this transition ran:
// from its history entry when it has one, else from the claim's start to
// the transition.
func duration(old, new *task.Task, at time.Time) *int64 {
	var d time.Duration
	if a, ok := lastAttempt(old, new); ok && !a.StartedAt.IsZero() && !a.FinishedAt.Before(a.StartedAt) {
		d = a.FinishedAt.Sub(a.StartedAt)
	} else if old.StartedAt != nil && !at.Before(*old.StartedAt) {
		d = at.Sub(*old.StartedAt)
	} else {
		return nil
	}
	ms := d.Milliseconds()
	return &ms
}

// Filter selects events; its zero value selects all of them.
type Filter struct {
	Types  []Type // any of these types (empty: any type)
	TaskID string // only this task's events ("": every task's)
}

// Match reports whether f selects e.
func (f Filter) Match(e Event) bool {
	if f.TaskID != "" && e.TaskID != f.TaskID {
		return false
	}
	return len(f.Types) == 0 || slices.Contains(f.Types, e.Type)
}

// DeriveCompletion returns the event of a batch or workflow that completed.
func DeriveCompletion(g *counters.GroupCompletion) Event {
	typ := BatchCompleted
	if g.Kind == "workflow" {
		typ = WorkflowCompleted
	}
	return Event{
		ID: fmt.Sprintf("%s-%d", g.ID, g.Version), Type: typ, Time: g.CompletedAt,
		TaskID: g.CallbackID, BatchID: g.ID,
		Counts: &triagetype.BatchProgress{Total: g.Total, Done: g.Total, Completed: g.Completed, DeadLettered: g.DeadLettered, Cancelled: g.Cancelled},
	}
}
