package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/task"
)

// IdempotencyWindow is how long an idempotency key maps to its first task.
const IdempotencyWindow = 24 * time.Hour

// Create writes a new task. When t has an idempotency key that was used
// within IdempotencyWindow, nothing is written and the existing task is
// returned with created=false. The key and the task are written in one
// transaction, so concurrent submits with one key create exactly one task.
func (s *Store) Create(ctx context.Context, t *task.Task) (saved *task.Task, created bool, err error) {
	if err := s.registerType(ctx, t.Type); err != nil {
		return nil, false, err
	}
	av, err := item(t)
	if err != nil {
		return nil, false, err
	}
	notExists := expression.AttributeNotExists(expression.Name(spec.AttrPK))
	taskCond, err := expression.NewBuilder().WithCondition(notExists).Build()
	if err != nil {
		return nil, false, err
	}
	if t.IdempotencyKey == "" {
		_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: &s.table, Item: av,
			ConditionExpression:      taskCond.Condition(),
			ExpressionAttributeNames: taskCond.Names(),
		})
		if err != nil {
			return nil, false, fmt.Errorf("create task %s: %w", t.ID, err)
		}
		s.logCreated(ctx, t)
		return t, true, nil
	}

	now := s.now()
	idemCond, err := expression.NewBuilder().WithCondition(
		notExists.Or(expression.Name(spec.AttrTTL).LessThan(expression.Value(now.Unix()))),
	).Build()
	if err != nil {
		return nil, false, err
	}
	idem := map[string]types.AttributeValue{
		spec.AttrPK:  &types.AttributeValueMemberS{Value: idemPK(t.IdempotencyKey)},
		"task_id":    &types.AttributeValueMemberS{Value: t.ID},
		spec.AttrTTL: &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(IdempotencyWindow).Unix(), 10)},
	}
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{
				TableName: &s.table, Item: idem,
				ConditionExpression:       idemCond.Condition(),
				ExpressionAttributeNames:  idemCond.Names(),
				ExpressionAttributeValues: idemCond.Values(),
			}},
			{Put: &types.Put{
				TableName: &s.table, Item: av,
				ConditionExpression:      taskCond.Condition(),
				ExpressionAttributeNames: taskCond.Names(),
			}},
		},
	})
	if err == nil {
		s.logCreated(ctx, t)
		return t, true, nil
	}
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) || len(tce.CancellationReasons) == 0 || aws.ToString(tce.CancellationReasons[0].Code) != "ConditionalCheckFailed" {
		return nil, false, fmt.Errorf("create task %s with idempotency key %q: %w", t.ID, t.IdempotencyKey, err)
	}
	existing, err := s.byIdempotencyKey(ctx, t.IdempotencyKey)
	if err != nil {
		return nil, false, err
	}
	return existing, false, nil
}

func idemPK(key string) string { return "IDEM#" + key }

// byIdempotencyKey returns the task a live idempotency key points at.
func (s *Store) byIdempotencyKey(ctx context.Context, key string) (*task.Task, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{spec.AttrPK: &types.AttributeValueMemberS{Value: idemPK(key)}},
	})
	if err != nil {
		return nil, fmt.Errorf("read idempotency key %q: %w", key, err)
	}
	id, ok := out.Item["task_id"].(*types.AttributeValueMemberS)
	if !ok {
		return nil, fmt.Errorf("idempotency key %q: %w", key, ErrNotFound)
	}
	t, err := s.Get(ctx, id.Value)
	if err != nil {
		return nil, fmt.Errorf("idempotency key %q: %w", key, err)
	}
	return t, nil
}

// Discard removes a task that was created but never handed to a queue (its
// send failed), together with its idempotency key, so a retry of the same
// request starts clean.
func (s *Store) Discard(ctx context.Context, t *task.Task) error {
	if err := s.Delete(ctx, t); err != nil {
		return err
	}
	if t.IdempotencyKey == "" {
		return nil
	}
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: &s.table,
		Key:       map[string]types.AttributeValue{spec.AttrPK: &types.AttributeValueMemberS{Value: idemPK(t.IdempotencyKey)}},
	})
	if err != nil {
		return fmt.Errorf("discard idempotency key %q: %w", t.IdempotencyKey, err)
	}
	return nil
}

func (s *Store) logCreated(ctx context.Context, t *task.Task) {
	s.log.LogAttrs(ctx, slog.LevelInfo, "task transition",
		slog.String("task_id", t.ID), slog.String("type", t.Type),
		slog.String("priority", string(t.Priority)), slog.String("effective_priority", string(t.EffectivePriority)),
		slog.String("from", ""), slog.String("to", string(t.Status)),
		slog.Int64("version", t.Version), slog.String("trace_id", t.TraceID))
}
