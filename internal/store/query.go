package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// The promoter's reads. Index reads are eventually consistent and return
// keys only; the tasks are then read in batches, and every action on one
// is a conditional write that re-checks its state.

// Due returns up to limit tasks of class c in one shard whose due time is
// before before, earliest first, and the sort key to resume after ("" at
// the end).
func (s *Store) Due(ctx context.Context, c DueClass, shard int, before time.Time, after string, limit int32) ([]*task.Task, string, error) {
	es, next, err := s.Entries(ctx, IndexQuery{
		Index: spec.IndexByDue, PK: duePartition(c, shard), Above: after,
		Below: SortableTime(before), Limit: limit,
	})
	if err != nil {
		return nil, "", err
	}
	return s.entriesToTasks(ctx, es, len(next) > 0)
}

// Created returns up to limit tasks submitted at priority p in one shard,
// created after the sort key after and before before, oldest first, and
// the sort key to resume after ("" when the range is exhausted).
func (s *Store) Created(ctx context.Context, p triagetype.Priority, shard int, after string, before time.Time, limit int32) ([]*task.Task, string, error) {
	if after != "" && after >= SortableTime(before) {
		// Nothing lies after the mark and before before: another promoter,
		// whose clock read a little later, moved the mark past this one's
		// cut (a BETWEEN with its bounds reversed is a ValidationException).
		return nil, "", nil
	}
	f := expression.Name("priority").Equal(expression.Value(string(p)))
	for {
		es, next, err := s.Entries(ctx, IndexQuery{
			Index: spec.IndexByCreated, PK: createdPartition(shard), Above: after,
			Below: SortableTime(before), Limit: limit, Filter: &f,
		})
		if err != nil {
			return nil, "", err
		}
		if len(es) == 0 && len(next) > 0 {
			// A page of other priorities only: go on from where it stopped.
			after = attrString(next[spec.AttrCreatedSK])
			continue
		}
		return s.entriesToTasks(ctx, es, len(next) > 0)
	}
}

// AnyCreated reports whether by-created's shard holds an entry of any
// priority after the mark after and before before: one Query of at most
// one entry (half a read unit). The promoter's aging sweep moves its mark
// only past an entry, so an idle deployment writes no mark.
func (s *Store) AnyCreated(ctx context.Context, shard int, after string, before time.Time) (bool, error) {
	if after != "" && after >= SortableTime(before) {
		return false, nil
	}
	es, _, err := s.Entries(ctx, IndexQuery{Index: spec.IndexByCreated, PK: createdPartition(shard), Above: after, Below: SortableTime(before), Limit: 1})
	if err != nil {
		return false, err
	}
	return len(es) > 0, nil
}

// entriesToTasks reads the tasks es point at. resume is the last entry's
// sort key when more may follow, else "".
func (s *Store) entriesToTasks(ctx context.Context, es []Entry, more bool) ([]*task.Task, string, error) {
	ids := make([]string, len(es))
	for i, e := range es {
		ids[i] = e.ID
	}
	ts, err := s.GetMany(ctx, ids)
	if err != nil {
		return nil, "", err
	}
	resume := ""
	if more && len(es) > 0 {
		resume = es[len(es)-1].SK
	}
	return ts, resume, nil
}

// sweepPK is the item holding the promoter's sweep marks, one attribute
// per priority and shard ("m_<priority>#<shard>"): how far the sweep of
// by-created has handled tasks.
const sweepPK = "PROMOTER#SWEEP"

const markPrefix = "m_"

// SweepMarks returns the promoter's sweep marks by key.
func (s *Store) SweepMarks(ctx context.Context) (map[string]string, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{spec.AttrPK: &types.AttributeValueMemberS{Value: sweepPK}},
	})
	if err != nil {
		return nil, fmt.Errorf("read sweep marks: %w", err)
	}
	marks := map[string]string{}
	for k, v := range out.Item {
		if key, ok := strings.CutPrefix(k, markPrefix); ok {
			marks[key] = attrString(v)
		}
	}
	return marks, nil
}

// SetSweepMark records how far the sweep named key has got. Marks only
// move forward: a write that would move one back (a slower concurrent
// promoter) is ignored.
func (s *Store) SetSweepMark(ctx context.Context, key, mark string) error {
	name := markPrefix + key
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.table,
		Key:                       map[string]types.AttributeValue{spec.AttrPK: &types.AttributeValueMemberS{Value: sweepPK}},
		UpdateExpression:          aws.String("SET #m = :m"),
		ConditionExpression:       aws.String("attribute_not_exists(#m) OR #m < :m"),
		ExpressionAttributeNames:  map[string]string{"#m": name},
		ExpressionAttributeValues: map[string]types.AttributeValue{":m": &types.AttributeValueMemberS{Value: mark}},
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return fmt.Errorf("set sweep mark %s: %w", key, err)
	}
	return nil
}
