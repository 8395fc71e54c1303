package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// ListFilter selects tasks for List. Empty fields match everything.
type ListFilter struct {
	Type     string
	Status   triagetype.Status
	Priority triagetype.Priority // effective priority
	// Statuses, when set, matches a task in any of them (Status, if also
	// set, must be one of them). Several statuses are walked on by-type or
	// by-created, newest created first, and checked on the tasks read:
	// by-due holds one class per partition key, sorted by due time, so no
	// one walk of it could keep created order across classes.
	Statuses []triagetype.Status
	// Suspended, when set, matches only a task that waits durably: "any",
	// or the kind of its wait (triagetype.StepSleep, triagetype.StepWait).
	Suspended string
}

// ErrBadCursor is returned for a cursor List did not issue.
var ErrBadCursor = errors.New("invalid cursor")

// listScanFactor bounds the work of one List call: it looks at no more
// than this many index entries per task asked for, and returns a shorter
// page (with a cursor) when the filter matched fewer.
const listScanFactor = 10

// cursor is the position of a listing: the sort key of the last entry it
// looked at. It is validated as a sort key triage writes (ParseSortKey),
// so a forged one can only move the position, never reach DynamoDB as a
// malformed start key.
type cursor struct {
	After string `json:"a"`
}

// List returns up to limit tasks matching f, newest first, after cursor c
// ("" to start), and the cursor of the next page ("" at the end). It walks
// the index that holds the matches most densely: by-due for statuses it
// holds (scheduled, retrying, dead_letter, cancelled; sorted by due or
// finish time), by-type for a type when the store indexes types
// (WithTypeIndex), by-created otherwise, merging the
// shards so each task appears exactly once across pages. Filters the
// index cannot apply are checked on the tasks read; a page may then come
// back short, with a cursor, rather than read without bound.
func (s *Store) List(ctx context.Context, f ListFilter, limit int, c string) ([]*task.Task, string, error) {
	var cur cursor
	if c != "" {
		b, err := base64.RawURLEncoding.DecodeString(c)
		if err != nil || json.Unmarshal(b, &cur) != nil {
			return nil, "", ErrBadCursor
		}
		if _, _, ok := ParseSortKey(cur.After); !ok {
			return nil, "", ErrBadCursor
		}
	}
	index, pks := s.listSource(f)
	var out []*task.Task
	bound := cur.After
	budget := limit * listScanFactor
	more := true
	for more && len(out) < limit && budget > 0 {
		want := min(limit-len(out), budget)
		es, m, err := s.Merged(ctx, index, pks, bound, true, want)
		if err != nil {
			return nil, "", err
		}
		more = m
		budget -= len(es)
		if len(es) == 0 {
			break
		}
		bound = es[len(es)-1].SK
		ts, _, err := s.entriesToTasks(ctx, es, false)
		if err != nil {
			return nil, "", err
		}
		for _, t := range ts {
			if f.matches(t) {
				out = append(out, t)
			}
		}
	}
	if !more {
		return out, "", nil
	}
	b, _ := json.Marshal(cursor{After: bound})
	return out, base64.RawURLEncoding.EncodeToString(b), nil
}

// listSource picks the index and partitions a listing walks.
func (s *Store) listSource(f ListFilter) (string, []string) {
	if c, ok := DueStatus(f.only()); ok {
		return spec.IndexByDue, s.partitions(func(i int) string { return duePartition(c, i) })
	}
	if f.Type != "" && s.typeIndex {
		return spec.IndexByType, s.partitions(func(i int) string { return typePartition(f.Type, i) })
	}
	return spec.IndexByCreated, s.partitions(createdPartition)
}

// only is the one status f selects, or "" when it selects none or several.
func (f ListFilter) only() triagetype.Status {
	switch {
	case len(f.Statuses) == 0:
		return f.Status
	case len(f.Statuses) == 1 && (f.Status == "" || f.Status == f.Statuses[0]):
		return f.Statuses[0]
	}
	return ""
}

func (f ListFilter) matches(t *task.Task) bool {
	return (f.Type == "" || t.Type == f.Type) &&
		(f.Status == "" || t.Status == f.Status) &&
		(len(f.Statuses) == 0 || slices.Contains(f.Statuses, t.Status)) &&
		(f.Priority == "" || t.EffectivePriority == f.Priority) &&
		(f.Suspended == "" || t.Suspend != nil && (f.Suspended == SuspendedAny || t.Suspend.Kind == f.Suspended))
}

// SuspendedAny is the ListFilter.Suspended value that matches every
// durable wait, a sleep or a signal wait.
const SuspendedAny = "any"

func attrString(v types.AttributeValue) string {
	if s, ok := v.(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}
