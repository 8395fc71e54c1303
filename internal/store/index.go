package store

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/oklog/ulid/v2"
	"golang.org/x/sync/errgroup"

	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// The index layout (see spec for the attributes):
//
//	index       partition key            sort key              holds            written
//	by-created  c#<shard>                created_at#id         every task       once, at creation
//	by-type     <type>#<shard>           created_at#id         every task       once, at creation
//	by-due      <class>#<shard>          due time#id           see DueOf        entering and leaving a class
//	by-due      waiting#<parent shard>   parent#created#id     see EdgeKey      at creation; removed at the claim
//
// The shard of a task is a hash of its id, so one busy type or priority
// spreads its writes over every shard. A task's ordinary life (created
// queued, claimed, completed) writes two index entries in all, both at
// creation: transitions change no index key and no projected attribute.

// shardOf is the shard of the task with this id.
func (s *Store) shardOf(id string) int { return Shard(id, s.shards) }

// Shard spreads keys over n shards by a hash of key: the one rule every
// sharded writer and reader of the table shares.
func Shard(key string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}

// Shards is the number of shards each index key is spread over.
func (s *Store) Shards() int { return s.shards }

func createdPartition(shard int) string          { return "c#" + strconv.Itoa(shard) }
func typePartition(typ string, shard int) string { return typ + "#" + strconv.Itoa(shard) }
func duePartition(c DueClass, shard int) string  { return string(c) + "#" + strconv.Itoa(shard) }
func sortKey(at time.Time, id string) string     { return SortableTime(at) + "#" + id }
func taskIDFromPK(pk string) (string, bool)      { return strings.CutPrefix(pk, spec.TaskKeyPrefix) }
func (s *Store) partitions(f func(int) string) []string {
	out := make([]string, s.shards)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

// DueClass is a by-due index class: a state a timer or an operator acts on.
type DueClass string

// The by-due classes.
const (
	DueScheduled    DueClass = "scheduled"     // by run_at: the promoter releases them
	DueRetrying     DueClass = "retrying"      // by retry_at: parked retries, lost messages
	DueQueuedLow    DueClass = "queued-low"    // tracked queued tasks, by when their wait began
	DueQueuedMedium DueClass = "queued-medium" // likewise
	DueDeadLetter   DueClass = "dead_letter"   // by completed_at: listing, cleanup
	DueCancelled    DueClass = "cancelled"     // likewise
	DueWaiting      DueClass = "waiting"       // by created_at, or by edge parent (EdgeKey): internal/flow
)

// DueQueued is the class of tracked queued tasks at priority p (high has none).
func DueQueued(p triagetype.Priority) (DueClass, bool) {
	switch p {
	case triagetype.Low:
		return DueQueuedLow, true
	case triagetype.Medium:
		return DueQueuedMedium, true
	}
	return "", false
}

// DueStatus is the class holding every task of status st, if there is one.
func DueStatus(st triagetype.Status) (DueClass, bool) {
	switch st {
	case triagetype.Scheduled:
		return DueScheduled, true
	case triagetype.Retrying:
		return DueRetrying, true
	case triagetype.DeadLetter:
		return DueDeadLetter, true
	case triagetype.Cancelled:
		return DueCancelled, true
	}
	// Waiting tasks are in DueWaiting, but a child is sorted there by its
	// edge parent (EdgeKey), not by time: no listing reads it.
	return "", false
}

// DueOf is the by-due entry t's state calls for: its class and the time it
// sorts by. Queued tasks have one only when tracked (their wait began after
// creation, so the promoter's sweep of new tasks would not find them) and
// below high priority (high tasks do not age), or when parked (Parked:
// released, in the waiting class until their claim). A parked or waiting
// task with an edge parent is keyed by that parent, not by the time
// (EdgeKey; the store writes what dueKey says).
func DueOf(t *task.Task) (DueClass, time.Time, bool) {
	switch t.Status {
	case triagetype.Scheduled:
		if t.RunAt != nil {
			return DueScheduled, *t.RunAt, true
		}
	case triagetype.Retrying:
		if t.RetryAt != nil {
			return DueRetrying, *t.RetryAt, true
		}
	case triagetype.DeadLetter, triagetype.Cancelled:
		at := t.CreatedAt
		if t.CompletedAt != nil {
			at = *t.CompletedAt
		}
		c, _ := DueStatus(t.Status)
		return c, at, true
	case triagetype.Queued:
		if Parked(t) {
			// Released, not claimed yet: still in its edge parent's
			// waiting partition (EdgeKey); internal/flow's sweep ages it.
			return DueWaiting, t.CreatedAt, true
		}
		if t.Held != "" {
			// Set aside: found by its scope, in weighted fair submit
			// order (held.go).
			return DueHeld(t.Held), t.HeldOrder(), true
		}
		if c, ok := DueQueued(t.EffectivePriority); ok && t.Tracked {
			return c, t.AgingFrom(), true
		}
	case triagetype.Waiting:
		return DueWaiting, t.CreatedAt, true
	}
	return "", time.Time{}, false
}

// Parked reports whether t's by-due entry is in its edge parent's waiting
// partition (EdgeKey): it waits, or it was released and is queued, not
// set aside, and not claimed since. Its first parent's walk finds it
// there, so it needs no edge item; and its release changes no index key
// (the claim removes the entry, as it removes any by-due entry).
func Parked(t *task.Task) bool {
	return t.EdgeParent != "" && (t.Status == triagetype.Waiting || t.Status == triagetype.Queued && t.Held == "")
}

// EdgeKey is the by-due entry of a parked task (Parked): partition
// waiting#<shard of its edge parent>, sort key
// <edge parent>#<created_at>#<id>. A parent's walk reads its children
// with one begins_with query (EdgeChildren); internal/flow's sweep reads
// the partition whole and takes the creation time from the sort key.
func (s *Store) EdgeKey(t *task.Task) (pk, sk string) {
	return duePartition(DueWaiting, s.shardOf(t.EdgeParent)), edgePrefixOf(t.EdgeParent) + sortKey(t.CreatedAt, t.ID)
}

// edgePrefixOf starts the sort keys of parent's children in its waiting
// partition.
func edgePrefixOf(parent string) string { return parent + "#" }

// dueKey is the by-due entry (partition and sort key) t's state calls for.
func (s *Store) dueKey(t *task.Task) (pk, sk string, ok bool) {
	if Parked(t) {
		pk, sk = s.EdgeKey(t)
		return pk, sk, true
	}
	class, at, ok := DueOf(t)
	if !ok {
		return "", "", false
	}
	return duePartition(class, s.shardOf(t.ID)), sortKey(at, t.ID), true
}

// waitingCreated is the creation time and task id in a sort key of the
// waiting partitions: <created_at>#<id> (a task without an edge parent,
// and every waiting task of the layout before edge keys) or
// <edge parent>#<created_at>#<id>.
func waitingCreated(sk string) (time.Time, string, bool) {
	rest, id, ok := cutLast(sk, "#")
	if !ok {
		return time.Time{}, "", false
	}
	at := rest
	if _, t, ok := cutLast(rest, "#"); ok {
		at = t
	}
	ts, err := time.Parse(sortableLayout, at)
	if err != nil || len(at) != len(sortableLayout) {
		return time.Time{}, "", false
	}
	return ts, id, true
}

// Entry is one index entry: the task it points at and its sort key.
type Entry struct {
	ID string
	SK string
}

// IndexQuery reads one partition of an index.
type IndexQuery struct {
	Index, PK string
	// Above and Below bound the sort key, exclusive; "" leaves a side open.
	Above, Below string
	Desc         bool
	Limit        int32
	Start        map[string]types.AttributeValue
	// Filter, if set, is applied to projected attributes after the read.
	Filter *expression.ConditionBuilder
}

// Entries runs q and returns its entries and where to resume (nil at the end).
func (s *Store) Entries(ctx context.Context, q IndexQuery) ([]Entry, map[string]types.AttributeValue, error) {
	ix, ok := indexes[q.Index]
	if !ok {
		return nil, nil, fmt.Errorf("unknown index %q", q.Index)
	}
	key := expression.Key(ix.PartitionKey).Equal(expression.Value(q.PK))
	sk := expression.Key(ix.SortKey)
	switch {
	case q.Above != "" && q.Below != "":
		// BETWEEN is inclusive; the bounds are excluded below.
		key = key.And(sk.Between(expression.Value(q.Above), expression.Value(q.Below)))
	case q.Above != "":
		key = key.And(sk.GreaterThan(expression.Value(q.Above)))
	case q.Below != "":
		key = key.And(sk.LessThan(expression.Value(q.Below)))
	}
	b := expression.NewBuilder().WithKeyCondition(key)
	if q.Filter != nil {
		b = b.WithFilter(*q.Filter)
	}
	expr, err := b.Build()
	if err != nil {
		return nil, nil, err
	}
	in := &dynamodb.QueryInput{
		TableName: &s.table, IndexName: aws.String(q.Index),
		KeyConditionExpression: expr.KeyCondition(), FilterExpression: expr.Filter(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ExclusiveStartKey: q.Start, ScanIndexForward: aws.Bool(!q.Desc),
	}
	if q.Limit > 0 {
		in.Limit = aws.Int32(q.Limit)
	}
	out, err := s.db.Query(ctx, in)
	if err != nil {
		return nil, nil, fmt.Errorf("query %s %s: %w", q.Index, q.PK, err)
	}
	es := make([]Entry, 0, len(out.Items))
	for _, it := range out.Items {
		pk, _ := it[spec.AttrPK].(*types.AttributeValueMemberS)
		skv, _ := it[ix.SortKey].(*types.AttributeValueMemberS)
		if pk == nil || skv == nil {
			continue
		}
		id, ok := taskIDFromPK(pk.Value)
		if !ok || skv.Value == q.Above || skv.Value == q.Below {
			continue
		}
		es = append(es, Entry{ID: id, SK: skv.Value})
	}
	return es, out.LastEvaluatedKey, nil
}

var indexes = func() map[string]spec.Index {
	m := map[string]spec.Index{}
	for _, ix := range spec.New("").Table.Indexes {
		m[ix.Name] = ix
	}
	return m
}()

// Merged returns up to n entries from the given partitions of index, in
// sort-key order (descending when desc), strictly beyond bound ("" for the
// start): the global first n, read with one query per partition, in
// parallel. more says whether entries beyond the last one returned may
// exist. Every entry comes exactly once across calls that pass the last
// returned sort key as the next bound, since sort keys end in the unique
// task id.
func (s *Store) Merged(ctx context.Context, index string, pks []string, bound string, desc bool, n int) (entries []Entry, more bool, err error) {
	type result struct {
		es   []Entry
		full bool
		err  error
	}
	res := make([]result, len(pks))
	var wg sync.WaitGroup
	for i, pk := range pks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := IndexQuery{Index: index, PK: pk, Desc: desc, Limit: int32(n)}
			if desc {
				q.Below = bound
			} else {
				q.Above = bound
			}
			es, next, err := s.Entries(ctx, q)
			res[i] = result{es: es, full: len(next) > 0, err: err}
		}()
	}
	wg.Wait()
	for _, r := range res {
		if r.err != nil {
			return nil, false, r.err
		}
		entries = append(entries, r.es...)
		more = more || r.full
	}
	slices.SortFunc(entries, func(a, b Entry) int {
		if desc {
			return cmp.Compare(b.SK, a.SK)
		}
		return cmp.Compare(a.SK, b.SK)
	})
	if len(entries) > n {
		entries, more = entries[:n], true
	}
	return entries, more, nil
}

// GetMany reads the tasks with these ids (eventually consistent, 100 per
// request) and returns those that exist, in the order of ids. Callers act
// on a task only through conditional writes, which re-check its state.
func (s *Store) GetMany(ctx context.Context, ids []string) ([]*task.Task, error) {
	return s.getMany(ctx, ids, false)
}

// GetManyConsistent is GetMany with strongly consistent reads (a waiting
// task's check of its parents right after it was recorded).
func (s *Store) GetManyConsistent(ctx context.Context, ids []string) ([]*task.Task, error) {
	return s.getMany(ctx, ids, true)
}

// getManyParallel bounds the BatchGetItem calls one getMany has in flight.
const getManyParallel = 4

func (s *Store) getMany(ctx context.Context, ids []string, consistent bool) ([]*task.Task, error) {
	// One BatchGetItem per 100 ids (its limit), getManyParallel at a time.
	var mu sync.Mutex
	found := make(map[string]*task.Task, len(ids))
	var g errgroup.Group
	g.SetLimit(getManyParallel)
	for start := 0; start < len(ids); start += 100 {
		keys := make([]map[string]types.AttributeValue, 0, 100)
		seen := map[string]bool{}
		for _, id := range ids[start:min(start+100, len(ids))] {
			if !seen[id] {
				seen[id] = true
				keys = append(keys, taskKey(id))
			}
		}
		g.Go(func() error {
			req := map[string]types.KeysAndAttributes{s.table: {Keys: keys, ConsistentRead: aws.Bool(consistent)}}
			for attempt := 0; len(req) > 0; attempt++ {
				if attempt > 0 {
					if attempt > 8 {
						return fmt.Errorf("read %d tasks: DynamoDB kept some unprocessed", len(ids))
					}
					time.Sleep(time.Duration(attempt*attempt) * 10 * time.Millisecond)
				}
				out, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
				if err != nil {
					return fmt.Errorf("read %d tasks: %w", len(keys), err)
				}
				for _, it := range out.Responses[s.table] {
					t, err := unmarshal(it)
					if err != nil {
						return err
					}
					mu.Lock()
					found[t.ID] = t
					mu.Unlock()
				}
				req = out.UnprocessedKeys
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out := make([]*task.Task, 0, len(found))
	for _, id := range ids {
		if t, ok := found[id]; ok {
			out = append(out, t)
			delete(found, id)
		}
	}
	return out, nil
}

// ParseSortKey checks that sk is an index sort key triage wrote: a
// fixed-width UTC time, '#', and a task id. Cursors carry sort keys, so
// this is what stands between a forged cursor and a query.
func ParseSortKey(sk string) (time.Time, string, bool) {
	at, id, ok := strings.Cut(sk, "#")
	if !ok || len(at) != len(sortableLayout) {
		return time.Time{}, "", false
	}
	ts, err := time.Parse(sortableLayout, at)
	if err != nil {
		return time.Time{}, "", false
	}
	if _, err := ulid.ParseStrict(id); err != nil {
		return time.Time{}, "", false
	}
	return ts, id, true
}
