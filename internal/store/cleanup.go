package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// A cleanup job's items. Each job is one item (cleanupPrefix + id); the
// job that runs is named by one pointer item (cleanupActive), so a runner
// finds its work with one read and at most one cleanup runs at a time.
// Neither starts with spec.TaskKeyPrefix, so the stream-kept counters
// ignore them.
const (
	cleanupPrefix = "CLEANUP#"
	cleanupActive = "CLEANUP-ACTIVE"
	// CleanupKeep is how long a finished job stays readable (its TTL).
	CleanupKeep = 7 * 24 * time.Hour
)

// The states of a cleanup job (triagetype's).
const (
	CleanupRunning = triagetype.CleanupRunning
	CleanupDone    = triagetype.CleanupDone
)

// ErrCleanupRunning means a cleanup job is already running: one runs at a
// time. A *CleanupRunningError carries it.
var ErrCleanupRunning = errors.New("a cleanup is already running")

// CleanupRunningError names the job that runs.
type CleanupRunningError struct{ Job *CleanupJob }

func (e *CleanupRunningError) Error() string {
	return fmt.Sprintf("cleanup %s of tasks finished before %s is running", e.Job.ID, e.Job.OlderThan.Format(time.RFC3339))
}

func (e *CleanupRunningError) Unwrap() error { return ErrCleanupRunning }

// CleanupCursor is where a cleanup job has got to: the phase (the dead
// letters, the cancelled tasks, then the completed ones), the shard
// within it, and the sort key of the last index entry read there. Every
// task before the cursor that was eligible has been deleted.
type CleanupCursor struct {
	Phase int    `dynamodbav:"phase"`
	Shard int    `dynamodbav:"shard"`
	After string `dynamodbav:"after,omitempty"`
}

// cleanupPhases are the phases in order: dead letters and cancelled tasks
// by their by-due entries (keyed by completed_at, so a phase reads only
// the tasks it deletes), completed tasks by walking by-created up to the
// cut (a task finishes after it is created).
const cleanupPhases = 3

// CleanupJob is a cleanup of the tasks that finished before OlderThan, as
// the runner left it after its last page.
type CleanupJob struct {
	ID        string        `dynamodbav:"id"`
	OlderThan time.Time     `dynamodbav:"older_than"`
	State     string        `dynamodbav:"state"`
	Deleted   int64         `dynamodbav:"deleted"`
	Read      int64         `dynamodbav:"read"`   // tasks read to find them
	Errors    int64         `dynamodbav:"errors"` // pages that failed and were tried again
	LastError string        `dynamodbav:"last_error,omitempty"`
	Cursor    CleanupCursor `dynamodbav:"cursor"`
	CreatedAt time.Time     `dynamodbav:"created_at"`
	UpdatedAt time.Time     `dynamodbav:"updated_at"`
	DoneAt    *time.Time    `dynamodbav:"done_at,omitempty"`
	// Owner and LeaseUntil: the runner working on it, until when. Another
	// runner takes the job over only once the lease has passed.
	Owner      string    `dynamodbav:"owner,omitempty"`
	LeaseUntil time.Time `dynamodbav:"lease_until"`
	// Version goes up with every save; each save is conditional on it.
	Version   int64 `dynamodbav:"version"`
	ExpiresAt int64 `dynamodbav:"expires_at,omitempty"`
}

// Public is the job as the API shows it.
func (j *CleanupJob) Public() *triagetype.Cleanup {
	return &triagetype.Cleanup{ID: j.ID, OlderThan: j.OlderThan, State: j.State, Deleted: j.Deleted, Read: j.Read,
		Errors: j.Errors, LastError: j.LastError, CreatedAt: j.CreatedAt, UpdatedAt: j.UpdatedAt, DoneAt: j.DoneAt}
}

func cleanupKey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{spec.AttrPK: &types.AttributeValueMemberS{Value: cleanupPrefix + id}}
}

func activeKey() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{spec.AttrPK: &types.AttributeValueMemberS{Value: cleanupActive}}
}

// StartCleanup records a new running cleanup job of the tasks finished
// before olderThan and makes it the active one, in one transaction: when
// a job is running already, nothing is written and the error is a
// *CleanupRunningError naming it.
func (s *Store) StartCleanup(ctx context.Context, olderThan time.Time) (*CleanupJob, error) {
	now := s.now()
	j := &CleanupJob{ID: task.NewID(now), OlderThan: olderThan.UTC(), State: CleanupRunning, CreatedAt: now, UpdatedAt: now, Version: 1}
	av, err := attributevalue.MarshalMap(j)
	if err != nil {
		return nil, fmt.Errorf("marshal cleanup: %w", err)
	}
	av[spec.AttrPK] = cleanupKey(j.ID)[spec.AttrPK]
	err = s.transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{
			TableName: &s.table, Item: map[string]types.AttributeValue{
				spec.AttrPK: activeKey()[spec.AttrPK],
				"job":       &types.AttributeValueMemberS{Value: j.ID},
			},
			ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
			ExpressionAttributeNames: map[string]string{"#pk": spec.AttrPK},
		}},
		{Put: &types.Put{TableName: &s.table, Item: av}},
	}})
	var tc *types.TransactionCanceledException
	if errors.As(err, &tc) {
		if running, rerr := s.ActiveCleanup(ctx); rerr == nil && running != nil {
			return nil, &CleanupRunningError{Job: running}
		}
		return nil, ErrCleanupRunning
	}
	if err != nil {
		return nil, fmt.Errorf("start cleanup: %w", err)
	}
	return j, nil
}

// CleanupJob reads job id (ErrNotFound when there is none).
func (s *Store) CleanupJob(ctx context.Context, id string) (*CleanupJob, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: cleanupKey(id), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("read cleanup %s: %w", id, err)
	}
	if out.Item == nil {
		return nil, fmt.Errorf("cleanup %s: %w", id, ErrNotFound)
	}
	var j CleanupJob
	if err := attributevalue.UnmarshalMap(out.Item, &j); err != nil {
		return nil, fmt.Errorf("decode cleanup %s: %w", id, err)
	}
	return &j, nil
}

// ActiveCleanup returns the running job, or nil when none runs: one read
// of the pointer item when none does, two when one does.
func (s *Store) ActiveCleanup(ctx context.Context) (*CleanupJob, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: activeKey(), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("read the active cleanup: %w", err)
	}
	id := attrString(out.Item["job"])
	if id == "" {
		return nil, nil
	}
	j, err := s.CleanupJob(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil, nil // the pointer of a job whose item expired: nothing runs
	}
	return j, err
}

// SaveCleanup writes j as its runner left it, conditional on the version
// it read (cur) and bumping it. A job whose state is CleanupDone also
// gets its TTL and stops being the active one, in the same transaction.
// ErrConflict means another runner saved it first: this one has lost it.
func (s *Store) SaveCleanup(ctx context.Context, j *CleanupJob) error {
	read := j.Version
	j.Version++
	j.UpdatedAt = s.now()
	if j.State == CleanupDone {
		j.ExpiresAt = j.UpdatedAt.Add(CleanupKeep).Unix()
	}
	av, err := attributevalue.MarshalMap(j)
	if err != nil {
		return fmt.Errorf("marshal cleanup: %w", err)
	}
	av[spec.AttrPK] = cleanupKey(j.ID)[spec.AttrPK]
	cond := expression.Name("version").Equal(expression.Value(read))
	expr, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return err
	}
	put := &types.Put{TableName: &s.table, Item: av, ConditionExpression: expr.Condition(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values()}
	if j.State != CleanupDone {
		_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: put.TableName, Item: put.Item, ConditionExpression: put.ConditionExpression,
			ExpressionAttributeNames: put.ExpressionAttributeNames, ExpressionAttributeValues: put.ExpressionAttributeValues})
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			j.Version = read
			return fmt.Errorf("save cleanup %s: %w", j.ID, ErrConflict)
		}
		if err != nil {
			j.Version = read
			return fmt.Errorf("save cleanup %s: %w", j.ID, err)
		}
		return nil
	}
	err = s.transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: put},
		{Delete: &types.Delete{
			TableName: &s.table, Key: activeKey(),
			ConditionExpression:       aws.String("#job = :job"),
			ExpressionAttributeNames:  map[string]string{"#job": "job"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":job": &types.AttributeValueMemberS{Value: j.ID}},
		}},
	}})
	var tc *types.TransactionCanceledException
	if errors.As(err, &tc) {
		j.Version = read
		return fmt.Errorf("finish cleanup %s: %w", j.ID, ErrConflict)
	}
	if err != nil {
		j.Version = read
		return fmt.Errorf("finish cleanup %s: %w", j.ID, err)
	}
	return nil
}

// CleanupPage reads the next page (up to limit index entries) of a
// cleanup of the tasks finished before olderThan from cursor at, and
// returns the tasks on it that the cleanup may delete (finished before
// the cut, as read), how many tasks it read, and the cursor after it;
// done reports that no page is left. Each page is one index query and one
// batch read of at most limit tasks, whatever the table holds.
func (s *Store) CleanupPage(ctx context.Context, olderThan time.Time, at CleanupCursor, limit int32) (eligible []*task.Task, read int, next CleanupCursor, done bool, err error) {
	if at.Phase >= cleanupPhases {
		return nil, 0, at, true, nil
	}
	var ts []*task.Task
	var resume string
	switch at.Phase {
	case 0, 1:
		class := DueDeadLetter
		if at.Phase == 1 {
			class = DueCancelled
		}
		ts, resume, err = s.Due(ctx, class, at.Shard, olderThan, at.After, limit)
	default:
		var es []Entry
		var more map[string]types.AttributeValue
		es, more, err = s.Entries(ctx, IndexQuery{Index: spec.IndexByCreated, PK: createdPartition(at.Shard), Above: at.After, Below: SortableTime(olderThan), Limit: limit})
		if err == nil {
			ts, resume, err = s.entriesToTasks(ctx, es, len(more) > 0)
		}
	}
	if err != nil {
		return nil, 0, at, false, fmt.Errorf("cleanup page (phase %d, shard %d): %w", at.Phase, at.Shard, err)
	}
	for _, t := range ts {
		if t.Status.Terminal() && t.CompletedAt != nil && t.CompletedAt.Before(olderThan) &&
			(at.Phase == 2) == (t.Status == triagetype.Completed) {
			eligible = append(eligible, t)
		}
	}
	next = CleanupCursor{Phase: at.Phase, Shard: at.Shard, After: resume}
	if resume == "" { // this shard of this phase is done
		next.After = ""
		if next.Shard++; next.Shard >= s.shards {
			next.Phase, next.Shard = next.Phase+1, 0
		}
	}
	return eligible, len(ts), next, next.Phase >= cleanupPhases, nil
}

// DeleteCompleted deletes completed tasks with BatchWriteItem, 25 a
// request, and returns how many it deleted. The deletes are not
// conditional: a completed task never changes again (no retry, cancel or
// run reaches it), so the status read is still true. Items DynamoDB
// leaves unprocessed are sent again with a growing pause. Tasks in other
// states are skipped: they need Delete's condition.
func (s *Store) DeleteCompleted(ctx context.Context, ts []*task.Task) (int, error) {
	var reqs []types.WriteRequest
	for _, t := range ts {
		if t.Status == triagetype.Completed {
			reqs = append(reqs, types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: taskKey(t.ID)}})
		}
	}
	n := 0
	for start := 0; start < len(reqs); start += 25 {
		chunk := reqs[start:min(start+25, len(reqs))]
		items := map[string][]types.WriteRequest{s.table: chunk}
		for attempt := 0; len(items[s.table]) > 0; attempt++ {
			if attempt > 0 {
				if attempt > 8 {
					return n + len(chunk) - len(items[s.table]), fmt.Errorf("delete completed tasks: %d left unprocessed", len(items[s.table]))
				}
				select {
				case <-ctx.Done():
					return n + len(chunk) - len(items[s.table]), ctx.Err()
				case <-time.After(time.Duration(attempt*attempt) * 25 * time.Millisecond):
				}
			}
			out, err := s.db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: items})
			if err != nil {
				return n + len(chunk) - len(items[s.table]), fmt.Errorf("delete completed tasks: %w", err)
			}
			items = out.UnprocessedItems
		}
		n += len(chunk)
	}
	return n, nil
}
