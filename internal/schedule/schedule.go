// Package schedule is triage's periodic tasks: schedules that enqueue one
// task every time a cron expression fires in an IANA time zone.
//
// A schedule is one item of the task table (pk "SCHED#<name>"), written by
// the API and advanced by the promoter, which runs Ticker.Tick once a run
// (every minute). The invariant: each tick of a schedule makes exactly one
// task, however many promoters run and wherever one of them crashes.
// Two things make it so:
//
//  1. The tick's task has a deterministic id, a ULID made from the
//     schedule's name and the tick's time (TickID), and is created with a
//     conditional put (the id must be free). A second promoter, or the
//     same one retried, that enqueues the same tick finds the task there
//     and makes nothing.
//  2. The enqueue comes first, then one conditional write advances the
//     schedule's next_tick from T to T' only if the schedule is still at
//     the version read (so still at T). A crash between the two leaves
//     next_tick at T: the next run enqueues T again, which (1) turns into
//     nothing, and advances. A crash before the enqueue loses nothing
//     either: T is still due.
//
// Due schedules are found without reading all of them: a schedule that is
// not paused has a by-due index entry (dpk "sched#<shard>", sorted by its
// next tick), so a run reads one query per shard of what is due. Listing
// reads a single by-type partition ("SCHED", sorted by name), capped at
// MaxSchedules by a counter item, in pages.
//
// Write units per tick (items under 1 KB): the advance is one UpdateItem
// (1 WCU) that moves the by-due entry (2 WCU: its old entry deleted, its
// new one put) = 3 WCU on top of the tick's task, whose own writes are
// those of any task (5). A catch-up of n ticks writes the schedule once.
package schedule

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"time"

	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Limits and defaults.
const (
	// MaxSchedules bounds the schedules of one deployment: a listing reads
	// one index partition, at most 100 a page, and every promoter run
	// reads what is due (at most this many a minute: ~170 ticks/s, far
	// below any partition's 1,000 WCU/s).
	MaxSchedules        = 10000
	MaxNameLength       = 128
	DefaultCatchUpLimit = 10
	MaxCatchUpLimit     = 100
	// MaxTaskPayload bounds a schedule's task payload: it is kept on the
	// schedule's item, which every tick rewrites (1 WCU per KB), so it is
	// held to what a task keeps inline (store.InlineMax, 3 KiB).
	MaxTaskPayload = 3 << 10
	// Grace is how late a tick may be handled and still count as on time;
	// older ticks are missed and follow the schedule's Missed policy. Two
	// promoter intervals and some: a run may start late or take long.
	Grace = 3 * time.Minute
	// Lookback bounds how far back a run looks for missed ticks: ticks
	// older than this are skipped whatever the policy.
	Lookback = 31 * 24 * time.Hour
)

// Missed-tick policies.
const (
	MissedSkip    = "skip"
	MissedCatchUp = "catch_up"
)

// Schedule is the wire type (triagetype.Schedule).
type Schedule = triagetype.Schedule

// SubmitRequest is a schedule's task (triagetype.SubmitRequest).
type SubmitRequest = triagetype.SubmitRequest

var nameRE = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// CheckName returns a *task.FieldError naming "name" when name cannot name
// a schedule.
func CheckName(name string) *task.FieldError {
	switch {
	case name == "":
		return &task.FieldError{Field: "name", Message: "is required"}
	case len(name) > MaxNameLength:
		return &task.FieldError{Field: "name", Message: fmt.Sprintf("is %d bytes; the limit is %d", len(name), MaxNameLength)}
	case !nameRE.MatchString(name):
		return &task.FieldError{Field: "name", Message: fmt.Sprintf("%q may hold only letters, digits, '.', '_' and '-'", short(name))}
	}
	return nil
}

// Validate checks s as a request and fills in its defaults; it returns
// the parsed expression. A problem is a *task.FieldError naming the field
// ("cron", "timezone", "task.type", ...). known, when not empty, are the
// task types the deployment accepts.
func Validate(s *Schedule, known task.KnownTypes) (*Cron, error) {
	if fe := CheckName(s.Name); fe != nil {
		return nil, fe
	}
	c, err := ParseCron(s.Cron, s.Timezone, DSTGap(s.DSTGap))
	if err != nil {
		return nil, err
	}
	if s.Timezone == "" {
		s.Timezone = "UTC"
	}
	if s.DSTGap == "" {
		s.DSTGap = string(DSTGapRun)
	}
	switch s.Missed {
	case "":
		s.Missed = MissedSkip
	case MissedSkip, MissedCatchUp:
	default:
		return nil, &task.FieldError{Field: "missed", Message: fmt.Sprintf("must be %q (the default) or %q, got %q", MissedSkip, MissedCatchUp, short(s.Missed))}
	}
	switch {
	case s.CatchUpLimit < 0 || s.CatchUpLimit > MaxCatchUpLimit:
		return nil, &task.FieldError{Field: "catch_up_limit", Message: fmt.Sprintf("must be between 1 and %d", MaxCatchUpLimit)}
	case s.CatchUpLimit > 0 && s.Missed != MissedCatchUp:
		return nil, &task.FieldError{Field: "catch_up_limit", Message: `applies only with missed "catch_up"`}
	case s.CatchUpLimit == 0 && s.Missed == MissedCatchUp:
		s.CatchUpLimit = DefaultCatchUpLimit
	}
	r := task.Request(s.Task)
	switch {
	case r.RunAt != nil:
		return nil, &task.FieldError{Field: "task.run_at", Message: "is not allowed: a tick runs at its own time"}
	case r.DelaySeconds != nil:
		return nil, &task.FieldError{Field: "task.delay_seconds", Message: "is not allowed: a tick runs at its own time"}
	case r.IdempotencyKey != "":
		return nil, &task.FieldError{Field: "task.idempotency_key", Message: "is not allowed: each tick's task has a key of its own"}
	case len(r.Payload) > MaxTaskPayload:
		return nil, &task.FieldError{Field: "task.payload", Message: fmt.Sprintf("is %d bytes; a schedule's payload is kept on its record, limit %d bytes", len(r.Payload), MaxTaskPayload)}
	}
	if err := r.Validate(); err != nil {
		if fe, ok := err.(*task.FieldError); ok {
			return nil, &task.FieldError{Field: "task." + fe.Field, Message: fe.Message, TooLarge: fe.TooLarge}
		}
		return nil, err
	}
	if fe := known.Check(r.Type); fe != nil {
		return nil, &task.FieldError{Field: "task." + fe.Field, Message: fe.Message}
	}
	if len(r.Payload) > 0 {
		s.Task.Payload = compactJSON(r.Payload)
	}
	return c, nil
}

// Parse is the parsed expression of a stored (valid) schedule.
func Parse(s *Schedule) (*Cron, error) {
	return ParseCron(s.Cron, s.Timezone, DSTGap(s.DSTGap))
}

// compactJSON drops a valid payload's insignificant space: it is kept on
// the schedule's item, which every tick rewrites.
func compactJSON(b json.RawMessage) json.RawMessage {
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return b
	}
	return out.Bytes()
}
