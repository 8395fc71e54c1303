// Package store keeps tasks in DynamoDB.
//
// Every change to a task is one conditional UpdateItem on (status, version):
// the caller hands over the snapshot it read and says what the next state is,
// the store writes only the attributes that differ, bumps the version and
// refuses the write when anybody else changed the task in between. That one
// rule is what keeps a stale worker from overwriting a result.
package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Sentinel errors; match them with errors.Is.
var (
	ErrNotFound = errors.New("task not found")
	// ErrConflict means the task was not in the status and version the
	// caller read: someone else changed it first.
	ErrConflict = errors.New("task changed concurrently")
)

// ConflictError is returned when a conditional write fails. Current is the
// item as it is now (nil if it no longer exists).
type ConflictError struct {
	ID      string
	Current *task.Task
}

func (e *ConflictError) Error() string {
	if e.Current == nil {
		return fmt.Sprintf("task %s: %v (it no longer exists)", e.ID, ErrConflict)
	}
	return fmt.Sprintf("task %s: %v (now %s, version %d)", e.ID, ErrConflict, e.Current.Status, e.Current.Version)
}

// Unwrap lets errors.Is match ErrConflict.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// DynamoDB is the part of the DynamoDB client the store uses.
type DynamoDB interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
}

// Store reads and writes tasks in one table.
type Store struct {
	db        DynamoDB
	table     string
	log       *slog.Logger
	now       func() time.Time
	retention time.Duration
	shards    int
	typeIndex bool
	blobs     Blobs
	// finished, if set, runs after a task's write moved it to a terminal
	// status and the task has children or a batch (see OnFinish).
	finished func(ctx context.Context, t *task.Task)
}

// Option configures a Store.
type Option func(*Store)

// WithLogger sets the logger that records every transition.
func WithLogger(l *slog.Logger) Option { return func(s *Store) { s.log = l } }

// WithClock sets the time source (tests).
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// WithRetention sets how long a terminal task is kept before DynamoDB's TTL
// removes it. Zero keeps tasks forever.
func WithRetention(d time.Duration) Option { return func(s *Store) { s.retention = d } }

// WithShards sets how many partitions each index key is spread over
// (spec.DefaultShards when n is 0). Every writer and reader of one table
// must use the same count.
func WithShards(n int) Option {
	return func(s *Store) {
		if n > 0 {
			s.shards = min(n, spec.MaxShards)
		}
	}
}

// WithTypeIndex makes every task write an entry to the by-type index, so
// a listing by type reads only that type's entries. Without it (the
// default) a task writes one index entry less (one write unit of its 4 or
// 5), and a listing by type walks by-created and keeps the tasks of the
// type, in pages that may come back short (List). Every writer and reader
// of one table should use the same setting: with it on, a listing by type
// finds only the tasks created while it was on.
func WithTypeIndex(on bool) Option { return func(s *Store) { s.typeIndex = on } }

// DefaultRetention is the TTL of terminal tasks when none is configured.
const DefaultRetention = 7 * 24 * time.Hour

// New returns a store on table.
func New(db DynamoDB, table string, opts ...Option) *Store {
	s := &Store{db: db, table: table, log: slog.New(slog.DiscardHandler), now: time.Now, retention: DefaultRetention, shards: spec.DefaultShards}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Table is the table name.
func (s *Store) Table() string { return s.table }

// Now is the store's clock.
func (s *Store) Now() time.Time { return s.now() }

func taskKey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{spec.AttrPK: &types.AttributeValueMemberS{Value: spec.TaskKeyPrefix + id}}
}

// sortableLayout is a fixed-width UTC time layout: strings in it sort in time order.
const sortableLayout = "2006-01-02T15:04:05.000000000Z"

// SortableTime formats t so that strings sort in time order (fixed width, UTC).
func SortableTime(t time.Time) string { return t.UTC().Format(sortableLayout) }

// Item is the item the store writes for t (the bench measures writes of
// exactly these).
func (s *Store) Item(t *task.Task) (map[string]types.AttributeValue, error) { return s.item(t) }

// item marshals t with its key and the index attributes its state calls
// for (see spec): a by-created entry always, a by-type entry when the
// store indexes types (WithTypeIndex), a by-due entry only in the states
// that have one.
func (s *Store) item(t *task.Task) (map[string]types.AttributeValue, error) {
	av, err := MarshalTask(t)
	if err != nil {
		return nil, fmt.Errorf("marshal task %s: %w", t.ID, err)
	}
	// A body kept in the blob store is never written to the item, loaded
	// or not: the item keeps its reference (and size) only.
	if t.PayloadRef != "" {
		delete(av, "payload")
	}
	if t.ResultRef != "" {
		delete(av, "result")
	}
	sh := s.shardOf(t.ID)
	av[spec.AttrPK] = &types.AttributeValueMemberS{Value: spec.TaskKeyPrefix + t.ID}
	av[spec.AttrCreatedPK] = &types.AttributeValueMemberS{Value: createdPartition(sh)}
	av[spec.AttrCreatedSK] = &types.AttributeValueMemberS{Value: sortKey(t.CreatedAt, t.ID)}
	if s.typeIndex {
		av[spec.AttrTypePK] = &types.AttributeValueMemberS{Value: typePartition(t.Type, sh)}
	}
	if pk, sk, ok := s.dueKey(t); ok {
		av[spec.AttrDuePK] = &types.AttributeValueMemberS{Value: pk}
		av[spec.AttrDueSK] = &types.AttributeValueMemberS{Value: sk}
	}
	return av, nil
}

// unmarshal decodes a task item, its durable records (durable.go)
// included.
func unmarshal(av map[string]types.AttributeValue) (*task.Task, error) {
	t, err := Unmarshal(av)
	if err != nil {
		return nil, fmt.Errorf("unmarshal task: %w", err)
	}
	return t, nil
}

// Get reads a task with a strongly consistent read.
func (s *Store) Get(ctx context.Context, id string) (*task.Task, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: taskKey(id), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("get task %s: %w", id, err)
	}
	if len(out.Item) == 0 {
		return nil, fmt.Errorf("get task %s: %w", id, ErrNotFound)
	}
	return unmarshal(out.Item)
}

// Transition moves cur to status to. apply edits the next state (a copy of
// cur); the store then sets status, bumps the version, stamps waiting_since
// when the status or effective priority changes, and sets expires_at when
// the new status is terminal. It fails with a *TransitionError if the state
// machine forbids the move and a *ConflictError if cur is stale.
func (s *Store) Transition(ctx context.Context, cur *task.Task, to triagetype.Status, apply func(next *task.Task)) (*task.Task, error) {
	if err := task.CheckTransition(cur.Status, to); err != nil {
		return nil, fmt.Errorf("task %s: %w", cur.ID, err)
	}
	return s.write(ctx, cur, to, apply)
}

// Touch writes a change that keeps the status (a heartbeat extending the
// lease, a cancel request), under the same (status, version) condition.
func (s *Store) Touch(ctx context.Context, cur *task.Task, apply func(next *task.Task)) (*task.Task, error) {
	return s.write(ctx, cur, cur.Status, apply)
}

func (s *Store) write(ctx context.Context, cur *task.Task, to triagetype.Status, apply func(next *task.Task)) (*task.Task, error) {
	now := s.now()
	next := cur.Clone()
	if apply != nil {
		apply(next)
	}
	next.Status = to
	next.Version = cur.Version + 1
	if to != triagetype.Executing {
		// An attempt's token dies with the attempt: no report made with it
		// can land once the task has left executing.
		next.ProgressToken, next.ReportedAt = "", nil
	}
	moved := to != cur.Status || next.EffectivePriority != cur.EffectivePriority
	if moved {
		next.WaitingSince = now
	}
	// A wait that starts after creation is invisible to the promoter's
	// sweep of new tasks, so it gets a by-due entry of its own (see DueOf).
	next.Tracked = to == triagetype.Queued && (moved || next.Tracked)
	// A parked task (Parked) keeps its entry through its release and
	// while it stays queued at its priority; any other move (a claim, a
	// promotion, a set-aside, a cancel) takes it to the entry its new
	// state calls for.
	if !(to == triagetype.Waiting || to == triagetype.Queued && (cur.Status == triagetype.Waiting || cur.Status == triagetype.Queued) &&
		next.EffectivePriority == cur.EffectivePriority && next.Held == "") {
		next.EdgeParent = ""
	}
	if to.Terminal() && s.retention > 0 {
		next.ExpiresAt = now.Add(s.retention).Unix()
	}
	resultKey, err := s.offloadResult(ctx, next)
	if err != nil {
		return nil, err
	}
	saved, err := s.update(ctx, cur, next)
	if err != nil {
		if resultKey != "" {
			// Nothing references it: the write that would have was refused.
			if derr := s.blobs.Delete(context.WithoutCancel(ctx), resultKey); derr != nil {
				s.log.Warn("could not remove the result of a refused write", "task_id", cur.ID, "key", resultKey, "error", derr)
			}
		}
		return nil, err
	}
	if s.finished != nil && to.Terminal() && !cur.Status.Terminal() && (saved.HasChildren || saved.BatchID != "") {
		s.finished(ctx, saved)
	}
	return saved, nil
}

// update writes next over cur: the attributes that differ, conditional on
// cur's status and version.
func (s *Store) update(ctx context.Context, cur, next *task.Task) (*task.Task, error) {
	to := next.Status
	// A batch member's first finish marks it batch_counted in this same
	// write; the stream consumer counts it on its shard from that write's
	// record (see batch.go and FirstFinish).
	if next.BatchID != "" && to.Terminal() && !cur.Status.Terminal() && !cur.BatchCounted {
		next.BatchCounted = true
	}
	before, err := s.item(cur)
	if err != nil {
		return nil, err
	}
	after, err := s.item(next)
	if err != nil {
		return nil, err
	}
	if err := checkSize(cur.ID, after); err != nil {
		return nil, err
	}
	var upd expression.UpdateBuilder
	changed := false
	for k, v := range after {
		if k == spec.AttrPK {
			continue
		}
		if old, ok := before[k]; !ok || !reflect.DeepEqual(old, v) {
			upd = upd.Set(expression.Name(k), expression.Value(v))
			changed = true
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			upd = upd.Remove(expression.Name(k))
			changed = true
		}
	}
	if !changed {
		return cur, nil
	}
	cond := expression.Name("status").Equal(expression.Value(string(cur.Status))).
		And(expression.Name("version").Equal(expression.Value(cur.Version)))
	expr, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build()
	if err != nil {
		return nil, fmt.Errorf("build update of task %s: %w", cur.ID, err)
	}
	saved, err := s.updateTask(ctx, cur.ID, expr)
	if err != nil {
		return nil, err
	}
	if to != cur.Status {
		s.log.LogAttrs(ctx, transitionLevel(to), "task transition",
			slog.String("task_id", saved.ID), slog.String("type", saved.Type),
			slog.String("priority", string(saved.Priority)), slog.String("effective_priority", string(saved.EffectivePriority)),
			slog.String("from", string(cur.Status)), slog.String("to", string(to)),
			slog.Int64("version", saved.Version), slog.Int("attempts", saved.Attempts),
			slog.String("trace_id", saved.TraceID))
	}
	return saved, nil
}

// conflict turns a failed conditional write into a *ConflictError carrying
// the current item, and DynamoDB's item size refusal into an
// *ItemTooLargeError; other errors are wrapped as they are.
func (s *Store) conflict(id string, err error) error {
	if isSizeLimit(err) {
		return &ItemTooLargeError{ID: id}
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return fmt.Errorf("write task %s: %w", id, err)
	}
	ce := &ConflictError{ID: id}
	if len(ccf.Item) > 0 {
		if t, uerr := unmarshal(ccf.Item); uerr == nil {
			ce.Current = t
		}
	}
	return ce
}

// Delete removes a task, conditional on the status and version read.
func (s *Store) Delete(ctx context.Context, cur *task.Task) error {
	cond := expression.Name("status").Equal(expression.Value(string(cur.Status))).
		And(expression.Name("version").Equal(expression.Value(cur.Version)))
	expr, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return err
	}
	_, err = s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: &s.table, Key: taskKey(cur.ID),
		ConditionExpression:                 expr.Condition(),
		ExpressionAttributeNames:            expr.Names(),
		ExpressionAttributeValues:           expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err != nil {
		return s.conflict(cur.ID, err)
	}
	s.log.LogAttrs(ctx, slog.LevelDebug, "task deleted", slog.String("task_id", cur.ID), slog.String("status", string(cur.Status)))
	return nil
}

// transitionLevel is the log level of a transition to status to: Debug for
// a task's ordinary life (a worker would otherwise log two lines a task at
// Info), Info for a dead letter, which someone has to look at.
func transitionLevel(to triagetype.Status) slog.Level {
	if to == triagetype.DeadLetter {
		return slog.LevelInfo
	}
	return slog.LevelDebug
}

// updateTask applies expr to task id's item and returns the item as
// written (ALL_NEW); a failed condition is a *ConflictError holding the
// item as it was (ALL_OLD), so a refusal needs no read.
func (s *Store) updateTask(ctx context.Context, id string, expr expression.Expression) (*task.Task, error) {
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           &s.table,
		Key:                                 taskKey(id),
		UpdateExpression:                    expr.Update(),
		ConditionExpression:                 expr.Condition(),
		ExpressionAttributeNames:            expr.Names(),
		ExpressionAttributeValues:           expr.Values(),
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err != nil {
		return nil, s.conflict(id, err)
	}
	return unmarshal(out.Attributes)
}
