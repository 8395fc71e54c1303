package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/errgroup"

	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// The items of dependencies (internal/flow keeps the rules; this file the
// layout):
//
//	entry               pk                        by-due key (dpk / dsk)                          written
//	first edge          the child's own item      waiting#<shard of parent> / <parent>#<created>#<child>   with the child (EdgeKey)
//	further edges       EDGE#<parent>#<child>     edge#<parent> / <child>                         once, before the child is recorded
//	flow sweep marks    FLOW#SWEEP                -                                               once per promoter run and shard
//
// A child's first unfinished parent (task.Task.EdgeParent) finds it
// through the child's own by-due entry, which the child needs anyway so
// that the sweep finds it: no item of its own, and its index entry costs
// the 1 write unit every waiting task's entry costs. Each further parent
// has an edge item (1 write unit for the item, 1 for its by-due entry,
// expiring after EdgeTTL). A parent's children are read a page at a time
// from both (EdgeChildren, Children), so a parent with 100,000 children
// needs no big item. Edge items written by the layout before edge keys
// (one per parent) are read the same way, so their children are still
// released.
//
// The hot key: the partition waiting#<shard of the parent> takes one
// entry per child at its submit and one removal at its claim; a parent's
// edge#<parent> one entry per further child. A single parent's children
// are therefore submitted, and claimed, below 1,000 a second each before
// its partition is at DynamoDB's write limit per key (a 100,000-child
// fan-out: 100 s of submits at that rate, as with edge items before).
// Other parents of the same shard share the partition.

// EdgeTTL is how long an edge item is kept (DynamoDB's TTL removes it).
const EdgeTTL = 30 * 24 * time.Hour

const (
	edgePrefix    = "EDGE#"
	edgePartition = "edge#"
	flowSweepPK   = "FLOW#SWEEP"
)

// OnFinish sets fn to run after any write that moves a task with children
// or a batch to a terminal status (the consumer's outcomes, a cancel, the
// promoter's DLQ reconciliation), in the writer's goroutine: internal/flow
// walks the task's edges there. A crash between the write and fn is
// repaired by internal/flow's sweep. Call it once, while assembling.
func (s *Store) OnFinish(fn func(ctx context.Context, t *task.Task)) { s.finished = fn }

// PutEdges records that child waits for each of parents: one item per
// edge, written side by side with unconditional puts (writing one twice is
// harmless).
func (s *Store) PutEdges(ctx context.Context, child string, parents []string) error {
	exp := strconv.FormatInt(s.now().Add(EdgeTTL).Unix(), 10)
	errs := make([]error, len(parents)) // every edge's, joined
	var g errgroup.Group
	g.SetLimit(16)
	for i, p := range parents {
		g.Go(func() error {
			_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: map[string]types.AttributeValue{
				spec.AttrPK:    &types.AttributeValueMemberS{Value: edgePrefix + p + "#" + child},
				spec.AttrDuePK: &types.AttributeValueMemberS{Value: edgePartition + p},
				spec.AttrDueSK: &types.AttributeValueMemberS{Value: child},
				spec.AttrTTL:   &types.AttributeValueMemberN{Value: exp},
			}})
			if err != nil {
				errs[i] = fmt.Errorf("record edge %s -> %s: %w", p, child, err)
			}
			return nil
		})
	}
	_ = g.Wait()
	return errors.Join(errs...)
}

// Edge is one parent -> child dependency.
type Edge struct{ Parent, Child string }

// PutEdgeBatch records many edges as PutEdges does, 25 to a BatchWriteItem
// request, 4 requests at a time: a workflow's edges, all known at its
// submit, in a few round trips instead of one each. The puts are not
// conditional (writing an edge twice is harmless); items DynamoDB leaves
// unprocessed are sent again with a growing pause. Same units as PutEdges.
func (s *Store) PutEdgeBatch(ctx context.Context, edges []Edge) error {
	exp := strconv.FormatInt(s.now().Add(EdgeTTL).Unix(), 10)
	reqs := make([]types.WriteRequest, len(edges))
	for i, e := range edges {
		reqs[i] = types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{
			spec.AttrPK:    &types.AttributeValueMemberS{Value: edgePrefix + e.Parent + "#" + e.Child},
			spec.AttrDuePK: &types.AttributeValueMemberS{Value: edgePartition + e.Parent},
			spec.AttrDueSK: &types.AttributeValueMemberS{Value: e.Child},
			spec.AttrTTL:   &types.AttributeValueMemberN{Value: exp},
		}}}
	}
	if err := s.batchWrite(ctx, reqs); err != nil {
		return fmt.Errorf("record edges: %w", err)
	}
	return nil
}

// batchWrite makes reqs, 25 to a BatchWriteItem and 4 requests at once,
// retrying what DynamoDB leaves unprocessed (up to 8 times, with a
// growing wait).
func (s *Store) batchWrite(ctx context.Context, reqs []types.WriteRequest) error {
	var g errgroup.Group
	g.SetLimit(4)
	for start := 0; start < len(reqs); start += 25 {
		chunk := reqs[start:min(start+25, len(reqs))]
		g.Go(func() error {
			items := map[string][]types.WriteRequest{s.table: chunk}
			for attempt := 0; len(items[s.table]) > 0; attempt++ {
				if attempt > 0 {
					if attempt > 8 {
						return fmt.Errorf("%d writes left unprocessed", len(items[s.table]))
					}
					select {
					case <-ctx.Done():
						return ctx.Err()
					case <-time.After(time.Duration(attempt*attempt) * 25 * time.Millisecond):
					}
				}
				out, err := s.db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: items})
				if err != nil {
					return err
				}
				items = out.UnprocessedItems
			}
			return nil
		})
	}
	return g.Wait()
}

// Children returns up to limit children of parent (from its edges, an
// eventually consistent index read) after the child id after, and where
// to resume ("" at the end).
func (s *Store) Children(ctx context.Context, parent, after string, limit int32) ([]string, string, error) {
	in := &dynamodb.QueryInput{
		TableName: &s.table, IndexName: aws.String(spec.IndexByDue),
		KeyConditionExpression:    aws.String("#pk = :pk"),
		ExpressionAttributeNames:  map[string]string{"#pk": spec.AttrDuePK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: edgePartition + parent}},
		Limit:                     aws.Int32(limit),
	}
	if after != "" {
		in.ExclusiveStartKey = map[string]types.AttributeValue{
			spec.AttrPK:    &types.AttributeValueMemberS{Value: edgePrefix + parent + "#" + after},
			spec.AttrDuePK: &types.AttributeValueMemberS{Value: edgePartition + parent},
			spec.AttrDueSK: &types.AttributeValueMemberS{Value: after},
		}
	}
	out, err := s.db.Query(ctx, in)
	if err != nil {
		return nil, "", fmt.Errorf("read children of task %s: %w", parent, err)
	}
	var ids []string
	for _, it := range out.Items {
		if v, ok := it[spec.AttrDueSK].(*types.AttributeValueMemberS); ok {
			ids = append(ids, v.Value)
		}
	}
	next := ""
	if len(out.LastEvaluatedKey) > 0 && len(ids) > 0 {
		next = ids[len(ids)-1]
	}
	return ids, next, nil
}

// EdgeChildren returns up to limit tasks whose edge parent (EdgeKey) is
// parent, after the sort key after ("" to start), and where to resume
// ("" at the end): one eventually consistent begins_with query on the
// parent's waiting partition. It returns waiting children and released
// ones not claimed yet; the caller checks their status.
func (s *Store) EdgeChildren(ctx context.Context, parent, after string, limit int32) ([]string, string, error) {
	in := &dynamodb.QueryInput{
		TableName: &s.table, IndexName: aws.String(spec.IndexByDue),
		KeyConditionExpression:   aws.String("#pk = :pk AND begins_with(#sk, :p)"),
		ExpressionAttributeNames: map[string]string{"#pk": spec.AttrDuePK, "#sk": spec.AttrDueSK},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": &types.AttributeValueMemberS{Value: duePartition(DueWaiting, s.shardOf(parent))},
			":p":  &types.AttributeValueMemberS{Value: edgePrefixOf(parent)},
		},
		Limit: aws.Int32(limit),
	}
	if after != "" {
		_, id, _ := cutLast(after, "#")
		in.ExclusiveStartKey = map[string]types.AttributeValue{
			spec.AttrPK:    &types.AttributeValueMemberS{Value: spec.TaskKeyPrefix + id},
			spec.AttrDuePK: &types.AttributeValueMemberS{Value: duePartition(DueWaiting, s.shardOf(parent))},
			spec.AttrDueSK: &types.AttributeValueMemberS{Value: after},
		}
	}
	out, err := s.db.Query(ctx, in)
	if err != nil {
		return nil, "", fmt.Errorf("read children of task %s: %w", parent, err)
	}
	var ids []string
	last := ""
	for _, it := range out.Items {
		if id, ok := taskIDFromPK(attrString(it[spec.AttrPK])); ok {
			ids = append(ids, id)
			last = attrString(it[spec.AttrDueSK])
		}
	}
	if len(out.LastEvaluatedKey) == 0 {
		last = ""
	}
	return ids, last, nil
}

// Waiting returns the tasks of by-due partition waiting#<shard> after the
// sort key after ("" to start) that were created before before, reading at
// most limit entries, and where to resume ("" at the end). The partition
// holds waiting tasks sorted by time (<created>#<id>: those without an
// edge parent, and all of the layout before edge keys) or by edge parent
// (EdgeKey), and released children not claimed yet; the creation time
// comes from the sort key, so younger entries are not read.
func (s *Store) Waiting(ctx context.Context, shard int, before time.Time, after string, limit int32) ([]*task.Task, string, error) {
	es, next, err := s.Entries(ctx, IndexQuery{Index: spec.IndexByDue, PK: duePartition(DueWaiting, shard), Above: after, Limit: limit})
	if err != nil {
		return nil, "", err
	}
	resume := ""
	if len(next) > 0 {
		resume = attrString(next[spec.AttrDueSK])
	}
	old := es[:0]
	for _, e := range es {
		if at, _, ok := waitingCreated(e.SK); ok && at.Before(before) {
			old = append(old, e)
		}
	}
	ts, _, err := s.entriesToTasks(ctx, old, false)
	return ts, resume, err
}

// MarkParent sets has_children on task id, so that its finish walks its
// edges, and returns the task as it is now (a strongly consistent answer:
// the caller learns whether it had already finished). A task that does
// not exist is ErrNotFound. It writes outside the version rule: no
// transition writes has_children, so no stale snapshot removes it.
func (s *Store) MarkParent(ctx context.Context, id string) (*task.Task, error) {
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: taskKey(id),
		UpdateExpression:          aws.String("SET has_children = :t"),
		ConditionExpression:       aws.String("attribute_exists(#pk)"),
		ExpressionAttributeNames:  map[string]string{"#pk": spec.AttrPK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":t": &types.AttributeValueMemberBOOL{Value: true}},
		ReturnValues:              types.ReturnValueAllNew,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil, fmt.Errorf("parent %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("mark parent %s: %w", id, err)
	}
	return unmarshal(out.Attributes)
}

// ResolveParent takes parent out of child's waiting_on set, once: the
// write is conditional on the set holding it, so a second resolution of
// the same edge (a walk and a sweep, two walks) changes nothing and
// reports resolved=false. It returns the child as it is after the write.
// A child that does not exist (its submit failed after its edges were
// written) reads as not resolved.
func (s *Store) ResolveParent(ctx context.Context, child, parent string) (t *task.Task, resolved bool, err error) {
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: taskKey(child),
		UpdateExpression:          aws.String("DELETE waiting_on :p"),
		ConditionExpression:       aws.String("contains(waiting_on, :e)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberSS{Value: []string{parent}}, ":e": &types.AttributeValueMemberS{Value: parent}},
		ReturnValues:              types.ReturnValueAllNew,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("resolve parent %s of task %s: %w", parent, child, err)
	}
	t, err = unmarshal(out.Attributes)
	return t, err == nil, err
}

// FlowMark returns the flow sweep's resume mark for key ("" to start).
func (s *Store) FlowMark(ctx context.Context, key string) (string, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, ConsistentRead: aws.Bool(true),
		Key:                  map[string]types.AttributeValue{spec.AttrPK: &types.AttributeValueMemberS{Value: flowSweepPK}},
		ProjectionExpression: aws.String("#m"), ExpressionAttributeNames: map[string]string{"#m": markPrefix + key},
	})
	if err != nil {
		return "", fmt.Errorf("read flow sweep mark %s: %w", key, err)
	}
	return attrString(out.Item[markPrefix+key]), nil
}

// SetFlowMark records the flow sweep's resume mark for key. Unlike the
// promoter's sweep marks it may move back: the sweep of waiting tasks
// starts over when it reaches the end.
func (s *Store) SetFlowMark(ctx context.Context, key, mark string) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.table,
		Key:                       map[string]types.AttributeValue{spec.AttrPK: &types.AttributeValueMemberS{Value: flowSweepPK}},
		UpdateExpression:          aws.String("SET #m = :m"),
		ExpressionAttributeNames:  map[string]string{"#m": markPrefix + key},
		ExpressionAttributeValues: map[string]types.AttributeValue{":m": &types.AttributeValueMemberS{Value: mark}},
	})
	if err != nil {
		return fmt.Errorf("set flow sweep mark %s: %w", key, err)
	}
	return nil
}

// Parents returns t's parents as its handler sees them: id, node, status,
// and result or error (results kept off the record are loaded). A parent
// that no longer exists is left out. It reads 1 unit per parent (eventually
// consistent: a parent finished before its child was released).
func (s *Store) Parents(ctx context.Context, t *task.Task) ([]triagetype.Parent, error) {
	if len(t.After) == 0 {
		return nil, nil
	}
	ps, err := s.GetMany(ctx, t.After)
	if err != nil {
		return nil, fmt.Errorf("read parents of task %s: %w", t.ID, err)
	}
	out := make([]triagetype.Parent, 0, len(ps))
	for _, p := range ps {
		if err := s.LoadBodies(ctx, p); err != nil {
			return nil, fmt.Errorf("read result of parent %s: %w", p.ID, err)
		}
		out = append(out, triagetype.Parent{ID: p.ID, Node: p.Node, Status: p.Status, Result: p.Result, Error: p.Error})
	}
	return out, nil
}
