package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/triagetype"
)

// Sentinel errors; match them with errors.Is.
var (
	ErrNotFound = errors.New("schedule not found")
	// ErrConflict: the schedule changed since it was read.
	ErrConflict = errors.New("schedule changed concurrently")
	// ErrFull: MaxSchedules exist already.
	ErrFull = errors.New("too many schedules")
)

// Table layout of a schedule (see the package doc).
const (
	keyPrefix = "SCHED#"
	// countKey is the item counting the schedules, which keeps them under
	// MaxSchedules: created and deleted together with a schedule, in one
	// transaction, so no caller can push the count past the cap.
	countKey = "SCHEDCOUNT"
	// listPartition is the by-type partition that lists every schedule by
	// name. Task partitions there are "<type>#<shard>", and a type has no
	// '#', so none is ever this.
	listPartition = "SCHED"
	// duePrefix starts the by-due partitions of schedules that are not
	// paused ("sched#<shard>"); no task class has this name.
	duePrefix = "sched#"
)

// DynamoDB is the part of the DynamoDB client the store uses.
type DynamoDB interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

// Store keeps schedules in the task table.
type Store struct {
	db     DynamoDB
	table  string
	shards int
	now    func() time.Time
}

// NewStore returns the schedule store on table, with the table's shard
// count (store.Store.Shards) and clock (nil: time.Now).
func NewStore(db DynamoDB, table string, shards int, now func() time.Time) *Store {
	if shards <= 0 {
		shards = spec.DefaultShards
	}
	if now == nil {
		now = time.Now
	}
	return &Store{db: db, table: table, shards: shards, now: now}
}

// StoreOn is the schedule store beside the tasks of tasks, on their table,
// shard count and clock: how the API, the promoter and the direct transport
// make theirs. The shared wiring (package app) holds none, so a worker,
// which never ticks or edits a schedule, does not link this package or its
// cron parser.
func StoreOn(db DynamoDB, table string, tasks *store.Store) *Store {
	return NewStore(db, table, tasks.Shards(), tasks.Now)
}

// item is a schedule as stored.
type item struct {
	PK           string `dynamodbav:"pk"`
	Name         string `dynamodbav:"name"`
	Cron         string `dynamodbav:"cron"`
	Timezone     string `dynamodbav:"timezone"`
	Task         string `dynamodbav:"task"` // the SubmitRequest's JSON
	Paused       bool   `dynamodbav:"paused"`
	Missed       string `dynamodbav:"missed"`
	CatchUpLimit int    `dynamodbav:"catch_up_limit,omitempty"`
	DSTGap       string `dynamodbav:"dst_gap"`
	NextTick     string `dynamodbav:"next_tick,omitempty"` // sortable UTC; absent when paused
	LastTick     string `dynamodbav:"last_tick,omitempty"`
	LastTaskID   string `dynamodbav:"last_task_id,omitempty"`
	CreatedAt    string `dynamodbav:"created_at"`
	UpdatedAt    string `dynamodbav:"updated_at"`
	Version      int64  `dynamodbav:"version"`
	TPK          string `dynamodbav:"tpk"`
	CSK          string `dynamodbav:"csk"`
	DPK          string `dynamodbav:"dpk,omitempty"`
	DSK          string `dynamodbav:"dsk,omitempty"`
}

// Stored is a schedule with its version (every write is conditional on it).
type Stored struct {
	Schedule
	Version int64
}

func key(name string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{spec.AttrPK: &types.AttributeValueMemberS{Value: keyPrefix + name}}
}

func (s *Store) toItem(sc *Stored) (map[string]types.AttributeValue, error) {
	taskJSON, err := json.Marshal(sc.Task)
	if err != nil {
		return nil, err
	}
	it := item{
		PK: keyPrefix + sc.Name, Name: sc.Name, Cron: sc.Cron, Timezone: sc.Timezone, Task: string(taskJSON),
		Paused: sc.Paused, Missed: sc.Missed, CatchUpLimit: sc.CatchUpLimit, DSTGap: sc.DSTGap,
		LastTaskID: sc.LastTaskID, CreatedAt: store.SortableTime(sc.CreatedAt), UpdatedAt: store.SortableTime(sc.UpdatedAt),
		Version: sc.Version, TPK: listPartition, CSK: sc.Name,
	}
	if sc.LastTick != nil {
		it.LastTick = store.SortableTime(*sc.LastTick)
	}
	if !sc.Paused && sc.NextTick != nil {
		it.NextTick = store.SortableTime(*sc.NextTick)
		it.DPK, it.DSK = s.duePartition(sc.Name), dueSortKey(*sc.NextTick, sc.Name)
	}
	return attributevalue.MarshalMap(it)
}

func fromItem(av map[string]types.AttributeValue) (*Stored, error) {
	var it item
	if err := attributevalue.UnmarshalMap(av, &it); err != nil {
		return nil, fmt.Errorf("read schedule: %w", err)
	}
	sc := &Stored{Version: it.Version, Schedule: Schedule{
		Name: it.Name, Cron: it.Cron, Timezone: it.Timezone, Paused: it.Paused, Missed: it.Missed,
		CatchUpLimit: it.CatchUpLimit, DSTGap: it.DSTGap, LastTaskID: it.LastTaskID,
	}}
	if err := json.Unmarshal([]byte(it.Task), &sc.Task); err != nil {
		return nil, fmt.Errorf("read schedule %s's task: %w", it.Name, err)
	}
	parse := func(v string) *time.Time {
		if v == "" {
			return nil
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return nil
		}
		return &t
	}
	sc.NextTick, sc.LastTick = parse(it.NextTick), parse(it.LastTick)
	if t := parse(it.CreatedAt); t != nil {
		sc.CreatedAt = *t
	}
	if t := parse(it.UpdatedAt); t != nil {
		sc.UpdatedAt = *t
	}
	return sc, nil
}

func (s *Store) duePartition(name string) string {
	return duePrefix + strconv.Itoa(store.Shard(name, s.shards))
}

func dueSortKey(at time.Time, name string) string { return store.SortableTime(at) + "#" + name }

// Put creates the schedule sc names, or replaces it. A new schedule's
// first tick is the first after now; a replaced one keeps its next tick
// when its expression, zone and pause are unchanged (so a redeploy loses
// no tick), and otherwise starts at the first tick after now. It returns
// the stored schedule and whether it was created. c is sc's parsed
// expression (Validate).
func (s *Store) Put(ctx context.Context, sc Schedule, c *Cron) (*Stored, bool, error) {
	for range 5 {
		cur, err := s.Get(ctx, sc.Name)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return nil, false, err
		}
		now := s.now().UTC()
		next := &Stored{Schedule: sc}
		next.LastTick, next.LastTaskID, next.NextTick = nil, "", nil
		next.UpdatedAt = now
		if !sc.Paused {
			t := c.Next(now).UTC()
			next.NextTick = &t
		}
		if cur == nil {
			next.CreatedAt, next.Version = now, 1
			err := s.create(ctx, next)
			if errors.Is(err, ErrConflict) {
				continue
			}
			return next, err == nil, err
		}
		next.CreatedAt, next.Version = cur.CreatedAt, cur.Version+1
		next.LastTick, next.LastTaskID = cur.LastTick, cur.LastTaskID
		if !sc.Paused && !cur.Paused && cur.NextTick != nil && cur.Cron == sc.Cron && cur.Timezone == sc.Timezone && cur.DSTGap == sc.DSTGap {
			next.NextTick = cur.NextTick
		}
		err = s.replace(ctx, next, cur.Version)
		if errors.Is(err, ErrConflict) {
			continue
		}
		return next, false, err
	}
	return nil, false, fmt.Errorf("put schedule %s: %w (it kept changing)", sc.Name, ErrConflict)
}

func (s *Store) create(ctx context.Context, sc *Stored) error {
	av, err := s.toItem(sc)
	if err != nil {
		return err
	}
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{
			TableName: &s.table, Item: av,
			ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
			ExpressionAttributeNames: map[string]string{"#pk": spec.AttrPK},
		}},
		{Update: &types.Update{
			TableName: &s.table, Key: key0(countKey),
			UpdateExpression:          aws.String("ADD #n :one"),
			ConditionExpression:       aws.String("attribute_not_exists(#n) OR #n < :max"),
			ExpressionAttributeNames:  map[string]string{"#n": "count"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":one": num(1), ":max": num(MaxSchedules)},
		}},
	}})
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		if refused(tce, 1) {
			return fmt.Errorf("create schedule %s: %w (the limit is %d)", sc.Name, ErrFull, MaxSchedules)
		}
		if refused(tce, 0) {
			return fmt.Errorf("create schedule %s: %w", sc.Name, ErrConflict)
		}
	}
	if err != nil {
		return fmt.Errorf("create schedule %s: %w", sc.Name, err)
	}
	return nil
}

func (s *Store) replace(ctx context.Context, sc *Stored, version int64) error {
	av, err := s.toItem(sc)
	if err != nil {
		return err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &s.table, Item: av,
		ConditionExpression:       aws.String("#v = :v"),
		ExpressionAttributeNames:  map[string]string{"#v": "version"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": num(version)},
	})
	return conflict(err, "replace schedule "+sc.Name)
}

// Get reads one schedule (strongly consistent).
func (s *Store) Get(ctx context.Context, name string) (*Stored, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: key(name), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("get schedule %s: %w", name, err)
	}
	if len(out.Item) == 0 {
		return nil, fmt.Errorf("schedule %s: %w", name, ErrNotFound)
	}
	return fromItem(out.Item)
}

// Delete removes a schedule; ErrNotFound if there is none.
func (s *Store) Delete(ctx context.Context, name string) error {
	_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Delete: &types.Delete{
			TableName: &s.table, Key: key(name),
			ConditionExpression:      aws.String("attribute_exists(#pk)"),
			ExpressionAttributeNames: map[string]string{"#pk": spec.AttrPK},
		}},
		{Update: &types.Update{
			TableName: &s.table, Key: key0(countKey),
			UpdateExpression:          aws.String("ADD #n :minus"),
			ExpressionAttributeNames:  map[string]string{"#n": "count"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":minus": num(-1)},
		}},
	}})
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) && refused(tce, 0) {
		return fmt.Errorf("delete schedule %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("delete schedule %s: %w", name, err)
	}
	return nil
}

// SetPaused pauses or resumes a schedule. Pausing removes its by-due
// entry; resuming starts at the first tick after now (ticks while paused
// are not run).
func (s *Store) SetPaused(ctx context.Context, name string, paused bool) (*Stored, error) {
	for range 5 {
		cur, err := s.Get(ctx, name)
		if err != nil {
			return nil, err
		}
		if cur.Paused == paused {
			return cur, nil
		}
		c, err := Parse(&cur.Schedule)
		if err != nil {
			return nil, fmt.Errorf("schedule %s: stored expression: %w", name, err)
		}
		next := *cur
		next.Paused, next.Version, next.NextTick = paused, cur.Version+1, nil
		next.UpdatedAt = s.now().UTC()
		if !paused {
			t := c.Next(next.UpdatedAt).UTC()
			next.NextTick = &t
		}
		err = s.replace(ctx, &next, cur.Version)
		if errors.Is(err, ErrConflict) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return &next, nil
	}
	return nil, fmt.Errorf("pause schedule %s: %w (it kept changing)", name, ErrConflict)
}

// List returns up to limit (1 to 100) schedules by name after cursor (a
// name; "" from the start), and the cursor of the next page ("" at the
// end): one query of the list partition and one batch read.
func (s *Store) List(ctx context.Context, limit int, cursor string) ([]Schedule, string, error) {
	limit = min(max(limit, 1), 100)
	kc := expression.Key(spec.AttrTypePK).Equal(expression.Value(listPartition))
	if cursor != "" {
		kc = kc.And(expression.Key(spec.AttrCreatedSK).GreaterThan(expression.Value(cursor)))
	}
	ex, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		return nil, "", err
	}
	out, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName: &s.table, IndexName: aws.String(spec.IndexByType),
		KeyConditionExpression: ex.KeyCondition(), ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
		Limit: aws.Int32(int32(limit)),
	})
	if err != nil {
		return nil, "", fmt.Errorf("list schedules: %w", err)
	}
	var names []string
	for _, it := range out.Items {
		if v, ok := it[spec.AttrPK].(*types.AttributeValueMemberS); ok {
			names = append(names, strings.TrimPrefix(v.Value, keyPrefix))
		}
	}
	got, err := s.getMany(ctx, names)
	if err != nil {
		return nil, "", err
	}
	list := make([]Schedule, 0, len(got))
	for _, sc := range got {
		list = append(list, sc.Schedule)
	}
	next := ""
	if len(out.LastEvaluatedKey) > 0 && len(names) > 0 {
		next = names[len(names)-1]
	}
	return list, next, nil
}

// getMany reads the named schedules (consistently), in the order of names;
// ones deleted since they were indexed are left out.
func (s *Store) getMany(ctx context.Context, names []string) ([]*Stored, error) {
	if len(names) == 0 {
		return nil, nil
	}
	keys := make([]map[string]types.AttributeValue, len(names))
	for i, n := range names {
		keys[i] = key(n)
	}
	byName := map[string]*Stored{}
	for len(keys) > 0 {
		out, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
			s.table: {Keys: keys, ConsistentRead: aws.Bool(true)},
		}})
		if err != nil {
			return nil, fmt.Errorf("read schedules: %w", err)
		}
		for _, av := range out.Responses[s.table] {
			sc, err := fromItem(av)
			if err != nil {
				return nil, err
			}
			byName[sc.Name] = sc
		}
		keys = out.UnprocessedKeys[s.table].Keys
	}
	var res []*Stored
	for _, n := range names {
		if sc, ok := byName[n]; ok {
			res = append(res, sc)
		}
	}
	return res, nil
}

// Due returns the names of schedules not paused whose next tick is at or
// before now, from one shard's by-due partition, up to limit, after the
// name cursor ("" from the start) and where to resume ("" at the end).
// The index is eventually consistent: a caller reads each schedule again
// (Get) before acting on it.
func (s *Store) Due(ctx context.Context, shard int, now time.Time, after string, limit int32) ([]string, string, error) {
	kc := expression.Key(spec.AttrDuePK).Equal(expression.Value(duePrefix + strconv.Itoa(shard)))
	// Every sort key of a tick at or before now sorts below the time just
	// after it (fixed-width times).
	bound := store.SortableTime(now.Add(time.Nanosecond))
	if after != "" {
		kc = kc.And(expression.Key(spec.AttrDueSK).Between(expression.Value(after+"\x00"), expression.Value(bound)))
	} else {
		kc = kc.And(expression.Key(spec.AttrDueSK).LessThan(expression.Value(bound)))
	}
	ex, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		return nil, "", err
	}
	out, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName: &s.table, IndexName: aws.String(spec.IndexByDue),
		KeyConditionExpression: ex.KeyCondition(), ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
		Limit: aws.Int32(limit),
	})
	if err != nil {
		return nil, "", fmt.Errorf("due schedules of shard %d: %w", shard, err)
	}
	var names []string
	last := ""
	for _, it := range out.Items {
		if v, ok := it[spec.AttrPK].(*types.AttributeValueMemberS); ok {
			names = append(names, strings.TrimPrefix(v.Value, keyPrefix))
		}
		if v, ok := it[spec.AttrDueSK].(*types.AttributeValueMemberS); ok {
			last = v.Value
		}
	}
	if len(out.LastEvaluatedKey) == 0 {
		last = ""
	}
	return names, last, nil
}

// Shards is the number of by-due partitions schedules spread over.
func (s *Store) Shards() int { return s.shards }

// Advance records that the ticks up to last were handled: next_tick
// becomes next, last_tick and last_task_id are set, and the by-due entry
// moves with it. It is one UpdateItem, conditional on the version read
// and on next_tick still being the tick read (ErrConflict otherwise:
// another promoter, or an API write, came first).
func (s *Store) Advance(ctx context.Context, cur *Stored, last time.Time, lastTaskID string, next time.Time) error {
	if cur.NextTick == nil {
		return fmt.Errorf("advance schedule %s: %w (it has no next tick)", cur.Name, ErrConflict)
	}
	now := s.now().UTC()
	upd := expression.Set(expression.Name("next_tick"), expression.Value(store.SortableTime(next))).
		Set(expression.Name(spec.AttrDueSK), expression.Value(dueSortKey(next, cur.Name))).
		Set(expression.Name("last_tick"), expression.Value(store.SortableTime(last))).
		Set(expression.Name("last_task_id"), expression.Value(lastTaskID)).
		Set(expression.Name("updated_at"), expression.Value(store.SortableTime(now))).
		Set(expression.Name("version"), expression.Value(cur.Version+1))
	cond := expression.Name("version").Equal(expression.Value(cur.Version)).
		And(expression.Name("next_tick").Equal(expression.Value(store.SortableTime(*cur.NextTick))))
	return s.updateIf(ctx, cur.Name, upd, cond, "advance schedule")
}

// Start gives a pending schedule (written at deploy time, see DeployItem)
// its first tick, next: one UpdateItem conditional on the version read and
// on its still having no next tick.
func (s *Store) Start(ctx context.Context, cur *Stored, next time.Time) error {
	now := store.SortableTime(s.now())
	upd := expression.Set(expression.Name("next_tick"), expression.Value(store.SortableTime(next))).
		Set(expression.Name(spec.AttrDueSK), expression.Value(dueSortKey(next, cur.Name))).
		Set(expression.Name("updated_at"), expression.Value(now)).
		Set(expression.Name("created_at"), expression.IfNotExists(expression.Name("created_at"), expression.Value(now))).
		Set(expression.Name("version"), expression.Value(cur.Version+1))
	cond := expression.Name("version").Equal(expression.Value(cur.Version)).
		And(expression.AttributeNotExists(expression.Name("next_tick")))
	return s.updateIf(ctx, cur.Name, upd, cond, "start schedule")
}

// updateIf applies upd to schedule name's item under cond. The item comes
// back (no extra capacity) so a caller counting units (the bench) can size
// the write and see the index entry move.
func (s *Store) updateIf(ctx context.Context, name string, upd expression.UpdateBuilder, cond expression.ConditionBuilder, what string) error {
	ex, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build()
	if err != nil {
		return err
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(name),
		UpdateExpression: ex.Update(), ConditionExpression: ex.Condition(),
		ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
		ReturnValues: types.ReturnValueAllNew,
	})
	return conflict(err, what+" "+name)
}

func conflict(err error, what string) error {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("%s: %w", what, ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

func refused(tce *types.TransactionCanceledException, i int) bool {
	return len(tce.CancellationReasons) > i && aws.ToString(tce.CancellationReasons[i].Code) == "ConditionalCheckFailed"
}

func key0(pk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{spec.AttrPK: &types.AttributeValueMemberS{Value: pk}}
}

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// Public is sc as the API shows it.
func (sc *Stored) Public() *triagetype.Schedule { c := sc.Schedule; return &c }
