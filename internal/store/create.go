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

	"github.com/triagehq/triage/internal/blob"
	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/task"
)

// IdempotencyWindow is how long an idempotency key maps to its first task.
const IdempotencyWindow = 24 * time.Hour

// Create writes a new task. When t has an idempotency key that was used
// within IdempotencyWindow, nothing is written and the existing task is
// returned with created=false. The key and the task are written in one
// transaction, so concurrent submits with one key create exactly one task.
//
// A task whose id is taken already (a redelivered direct send derives its
// id from its message) is not written again: the existing task is returned
// with created=false.
//
// A payload over InlineMax is written to the blob store first. When the
// idempotency key named another task, nothing references it and it is
// removed again. After a failed write it is left alone: the write may have
// landed after all; if it did not, the task's message finds no task and the
// consumer removes the object when it dead-letters the message.
func (s *Store) Create(ctx context.Context, t *task.Task) (saved *task.Task, created bool, err error) {
	if err := s.offloadPayload(ctx, t); err != nil {
		return nil, false, err
	}
	saved, created, err = s.create(ctx, t)
	if err == nil && !created && t.PayloadRef != "" && saved.ID != t.ID {
		s.DropPayload(context.WithoutCancel(ctx), t.ID)
	}
	return saved, created, err
}

// DropPayload removes the blob store object a payload of task id would
// have, for a task that was never recorded (the consumer calls it when it
// dead-letters a message whose task never appeared). Failures are logged:
// the object is then only unreferenced storage.
func (s *Store) DropPayload(ctx context.Context, id string) {
	if s.blobs == nil {
		return
	}
	if err := s.blobs.Delete(ctx, blob.PayloadKey(id)); err != nil {
		s.log.Warn("could not remove the payload object of an unrecorded task", "task_id", id, "error", err)
	}
}

func (s *Store) create(ctx context.Context, t *task.Task) (saved *task.Task, created bool, err error) {
	if t.BatchID != "" && t.WorkflowID == "" && t.MemberAdd == "" {
		return s.createMember(ctx, t) // batch.go
	}
	if t.MemberAdd != "" && !s.now().Before(t.MemberWriteBy) {
		// Counted by a member add whose writes are over: the sweep may
		// settle it as soon as MemberAddStale, so a late write could land
		// after it took this member back (memberadd.go).
		return nil, false, fmt.Errorf("batch member %s: %w", t.ID, ErrAddExpired)
	}
	av, err := s.item(t)
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
			// The task a redelivered direct send names comes back with the
			// refusal: no read to find it.
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			if len(ccf.Item) > 0 {
				if existing, uerr := unmarshal(ccf.Item); uerr == nil {
					return existing, false, nil
				}
			}
			existing, gerr := s.Get(ctx, t.ID)
			if gerr != nil {
				return nil, false, fmt.Errorf("create task %s: it exists, and reading it failed: %w", t.ID, gerr)
			}
			return existing, false, nil
		}
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
	refused := func(i int) bool {
		return len(tce.CancellationReasons) > i && aws.ToString(tce.CancellationReasons[i].Code) == "ConditionalCheckFailed"
	}
	if !errors.As(err, &tce) || !refused(0) && !refused(1) {
		return nil, false, fmt.Errorf("create task %s with idempotency key %q: %w", t.ID, t.IdempotencyKey, err)
	}
	if !refused(0) { // the key was free, the id taken: the same task again
		existing, err := s.Get(ctx, t.ID)
		if err != nil {
			return nil, false, fmt.Errorf("create task %s: it exists, and reading it failed: %w", t.ID, err)
		}
		return existing, false, nil
	}
	existing, err := s.ByIdempotencyKey(ctx, t.IdempotencyKey)
	if err != nil {
		return nil, false, err
	}
	return existing, false, nil
}

// CreateFresh writes new tasks whose ids no write can have used before
// (a new workflow's nodes: their ids derive from its fresh id), with no
// condition, 25 to a BatchWriteItem: the same write units as Create, in
// a twenty-fifth of the requests (a 1,000-node workflow's nodes were
// 1,000 conditional puts, most of its submit's time). Without the
// condition a task that did exist would be overwritten, so anything that
// may be written twice (a retried submit) must use Create. Payloads over
// InlineMax go to the blob store first, as Create's. It creates all of
// ts, or returns an error after which any of them may exist.
func (s *Store) CreateFresh(ctx context.Context, ts []*task.Task) error {
	reqs := make([]types.WriteRequest, len(ts))
	for i, t := range ts {
		if t.IdempotencyKey != "" || t.BatchID != "" && t.WorkflowID == "" {
			return fmt.Errorf("create task %s: a task with an idempotency key or of a batch is created with Create", t.ID)
		}
		if err := s.offloadPayload(ctx, t); err != nil {
			return err
		}
		av, err := s.item(t)
		if err != nil {
			return err
		}
		reqs[i] = types.WriteRequest{PutRequest: &types.PutRequest{Item: av}}
	}
	if err := s.batchWrite(ctx, reqs); err != nil {
		return fmt.Errorf("create %d tasks: %w", len(ts), err)
	}
	for _, t := range ts {
		s.logCreated(ctx, t)
	}
	return nil
}

func idemPK(key string) string { return "IDEM#" + key }

// ByIdempotencyKey returns the task a live idempotency key points at, or
// ErrNotFound when the key was never used or its window has passed (an
// expired key that DynamoDB's TTL has not removed yet counts as unused,
// as it does for Create).
func (s *Store) ByIdempotencyKey(ctx context.Context, key string) (*task.Task, error) {
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
	if exp, ok := out.Item[spec.AttrTTL].(*types.AttributeValueMemberN); ok {
		if sec, err := strconv.ParseInt(exp.Value, 10, 64); err == nil && sec < s.now().Unix() {
			return nil, fmt.Errorf("idempotency key %q expired: %w", key, ErrNotFound)
		}
	}
	t, err := s.Get(ctx, id.Value)
	if err != nil {
		return nil, fmt.Errorf("idempotency key %q: %w", key, err)
	}
	return t, nil
}

func (s *Store) logCreated(ctx context.Context, t *task.Task) {
	s.log.LogAttrs(ctx, transitionLevel(t.Status), "task transition",
		slog.String("task_id", t.ID), slog.String("type", t.Type),
		slog.String("priority", string(t.Priority)), slog.String("effective_priority", string(t.EffectivePriority)),
		slog.String("from", ""), slog.String("to", string(t.Status)),
		slog.Int64("version", t.Version), slog.String("trace_id", t.TraceID))
}
