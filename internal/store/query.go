package store

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/task"
)

// Page is one page of a query and the key to resume after it (nil at the end).
type Page struct {
	Tasks []*task.Task
	Next  map[string]types.AttributeValue
}

// WaitingQuery selects tasks in one status and effective priority whose due
// time (task.Task.DueAt) is before Before, earliest first, through the
// by-status-priority index.
type WaitingQuery struct {
	Status   task.Status
	Priority task.Priority
	Before   time.Time // zero: no upper bound
	After    time.Time // zero: no lower bound
	Limit    int32
	Start    map[string]types.AttributeValue
}

// Waiting runs q. Index reads are eventually consistent: callers re-check
// each task with a conditional write before acting on it.
func (s *Store) Waiting(ctx context.Context, q WaitingQuery) (Page, error) {
	key := expression.Key(spec.AttrGSI1PK).Equal(expression.Value(StatusPartition(q.Status, q.Priority)))
	switch {
	case !q.Before.IsZero() && !q.After.IsZero():
		key = key.And(expression.Key(spec.AttrGSI1SK).Between(expression.Value(SortableTime(q.After)), expression.Value(SortableTime(q.Before))))
	case !q.Before.IsZero():
		key = key.And(expression.Key(spec.AttrGSI1SK).LessThan(expression.Value(SortableTime(q.Before))))
	case !q.After.IsZero():
		key = key.And(expression.Key(spec.AttrGSI1SK).GreaterThan(expression.Value(SortableTime(q.After))))
	}
	return s.query(ctx, spec.IndexByStatus, key, q.Limit, q.Start, true)
}

// TypeQuery selects tasks of one type, newest or oldest first, through the by-type index.
type TypeQuery struct {
	Type        string
	Limit       int32
	Start       map[string]types.AttributeValue
	OldestFirst bool
}

// ByType runs q.
func (s *Store) ByType(ctx context.Context, q TypeQuery) (Page, error) {
	key := expression.Key(spec.AttrGSI2PK).Equal(expression.Value(q.Type))
	return s.query(ctx, spec.IndexByType, key, q.Limit, q.Start, q.OldestFirst)
}

func (s *Store) query(ctx context.Context, index string, key expression.KeyConditionBuilder, limit int32, start map[string]types.AttributeValue, forward bool) (Page, error) {
	expr, err := expression.NewBuilder().WithKeyCondition(key).Build()
	if err != nil {
		return Page{}, err
	}
	in := &dynamodb.QueryInput{
		TableName:                 &s.table,
		IndexName:                 aws.String(index),
		KeyConditionExpression:    expr.KeyCondition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		ExclusiveStartKey:         start,
		ScanIndexForward:          aws.Bool(forward),
	}
	if limit > 0 {
		in.Limit = aws.Int32(limit)
	}
	out, err := s.db.Query(ctx, in)
	if err != nil {
		return Page{}, fmt.Errorf("query %s: %w", index, err)
	}
	p := Page{Next: out.LastEvaluatedKey}
	for _, it := range out.Items {
		t, err := unmarshal(it)
		if err != nil {
			return Page{}, err
		}
		p.Tasks = append(p.Tasks, t)
	}
	return p, nil
}

// CountWaiting counts the tasks in one status and effective priority.
func (s *Store) CountWaiting(ctx context.Context, st task.Status, p task.Priority) (int, error) {
	key := expression.Key(spec.AttrGSI1PK).Equal(expression.Value(StatusPartition(st, p)))
	expr, err := expression.NewBuilder().WithKeyCondition(key).Build()
	if err != nil {
		return 0, err
	}
	in := &dynamodb.QueryInput{
		TableName: &s.table, IndexName: aws.String(spec.IndexByStatus),
		KeyConditionExpression: expr.KeyCondition(), ExpressionAttributeNames: expr.Names(),
		ExpressionAttributeValues: expr.Values(), Select: types.SelectCount,
	}
	total := 0
	for {
		out, err := s.db.Query(ctx, in)
		if err != nil {
			return 0, fmt.Errorf("count %s: %w", StatusPartition(st, p), err)
		}
		total += int(out.Count)
		if len(out.LastEvaluatedKey) == 0 {
			return total, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}
