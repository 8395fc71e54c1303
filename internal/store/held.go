package store

import (
	"context"
	"strings"

	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/task"
)

// Set-aside tasks (see package hold). A queued task that cannot start now
// (its type or key paused, at a concurrency or rate limit, waiting for a
// Retry-After) is written once with Held naming the scope it waits for and
// no live message (DispatchVersion NoMessage). Its by-due entry is then
//
//	by-due  held#<scope>#<shard>   fair_at#id   (created_at#id without fair_at)
//
// so a scope's set-aside tasks read back in weighted fair submit order
// (task.Task.FairAt: each key in its submit order, keys interleaved by
// weight) with one query per shard, merged. The shard is the task id's, so a scope holding 10,000
// arrivals a second writes 10,000 / 16 = 625 index entries a second per
// partition, inside DynamoDB's 1,000 WCU per partition key.

// heldPrefix starts every held class: "held#" and the scope. Scopes are
// built of types and keys, which never contain '#' beyond the separators
// the scope itself puts in, and the shard is always the last part.
const heldPrefix = "held#"

// DueHeld is the by-due class of the tasks set aside in scope.
func DueHeld(scope string) DueClass { return DueClass(heldPrefix + scope) }

// HeldScope returns the scope of a held class, and whether c is one.
func HeldScope(c DueClass) (string, bool) { return strings.CutPrefix(string(c), heldPrefix) }

// HeldSortKey is t's sort key in its scope's held set: a releaser that
// tried t goes on strictly after it.
func HeldSortKey(t *task.Task) string { return sortKey(t.HeldOrder(), t.ID) }

// Held returns up to n tasks set aside in scope, in weighted fair submit
// order (HeldOrder, then id), strictly after the sort key after ("" for the first): one
// eventually consistent query per shard, merged, then a batch read of the
// tasks. A task may have been released or moved on since it was indexed:
// the caller's conditional write finds out.
func (s *Store) Held(ctx context.Context, scope, after string, n int) ([]*task.Task, string, error) {
	pks := s.partitions(func(sh int) string { return duePartition(DueHeld(scope), sh) })
	es, _, err := s.Merged(ctx, spec.IndexByDue, pks, after, false, n)
	if err != nil || len(es) == 0 {
		return nil, "", err
	}
	ids := make([]string, len(es))
	for i, e := range es {
		ids[i] = e.ID
	}
	ts, err := s.GetMany(ctx, ids)
	if err != nil {
		return nil, "", err
	}
	return ts, es[len(es)-1].SK, nil
}
