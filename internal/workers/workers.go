// Package workers is the registry of consumer instances: each instance (a
// long-running worker, `triage dev`'s consumer, or one invocation of the
// consumer function) registers when it starts, heartbeats while it runs,
// says when it drains, and removes itself when it stops. GET /workers and
// the workers section of /stats read it.
//
// # Keys and costs
//
// Each instance is one item in the task table under its own key,
// WORKER#<id>, so a heartbeat never contends with another instance's: a
// heartbeat is one UpdateItem of a small item (1 write unit with short
// fairness keys; its per-key figures are bounded, see Running), every
// DefaultHeartbeat (10 s): 360 write units an hour per instance, plus one
// PutItem to register and one DeleteItem to leave.
//
// Listing must not read the tasks. The item carries the by-created index's
// attributes with a partition value no task uses, "w#<shard>" (tasks use
// "c#<shard>"; the shard is a hash of the worker id over the table's
// shards), and a sort key of its start time and id. Those never change
// after registration and by-created projects only the tasks' priority,
// which a worker item lacks, so a heartbeat writes nothing to the index:
// the index entry is written once at registration and removed once when
// the item goes. List queries the worker partition of every shard (keys
// only, a few hundred bytes a worker) and reads the items it names with
// BatchGetItem, eventually consistent: half a read unit per worker. A
// listing is O(workers), never O(tasks).
//
// # Liveness
//
// An instance is dead once DeadAfterBeats (3) of its heartbeat intervals
// pass without a heartbeat: with the default 10 s, a killed worker shows
// dead at most 30 s after it died (its last heartbeat came at most one
// interval before, so at most 40 s after that). The interval is stored on
// the item, so a reader needs no settings. Every write sets expires_at
// (the table's TTL attribute) to DeadRetention past the moment the
// instance would turn dead: a dead instance stays listed that long, then
// List skips it and DynamoDB's TTL deletes the item, so instances that
// crash never fill the table. Times are the writer's clock; the clocks of
// writer and reader are assumed to agree to well within an interval.
package workers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/errgroup"

	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/triagetype"
)

// DefaultHeartbeat is how often an instance heartbeats: a third of the
// default task lease (triageconfig.DefaultLease, 30 s), as a task's own
// heartbeat is. It sets both the write cost (3,600 s / 10 s = 360 writes
// an hour per instance) and how soon a killed one shows dead
// (DeadAfterBeats of it).
const DefaultHeartbeat = 10 * time.Second

// DeadRetention is how long a dead instance stays listed (as dead) before
// its item expires.
const DeadRetention = 5 * time.Minute

// DeadAfterBeats is how many missed heartbeats make an instance dead.
const DeadAfterBeats = triagetype.DeadAfterBeats

// keyPrefix starts every worker item's key.
const keyPrefix = "WORKER#"

// partitionPrefix starts the worker entries' by-created partition values;
// tasks' start with "c#", so the two never share a key.
const partitionPrefix = "w#"

// ErrNotRegistered is returned by Heartbeat when the instance has no item
// (it expired, or was never written): the caller registers again.
var ErrNotRegistered = errors.New("worker is not registered")

// DB is the part of the DynamoDB client the registry uses.
type DB interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

// Instance is what an instance says about itself when it registers.
type Instance struct {
	ID       string
	Kind     string // triagetype.WorkerKind*
	Capacity int    // tasks it runs at once
	// Every is its heartbeat interval (DefaultHeartbeat when zero).
	Every time.Duration
	// Types are the task types it has handlers for (HandledTypes): a
	// consumer without a handler for a type hands its tasks back, attempt
	// unspent, while a live instance advertises it.
	Types []string
	// Running, when set, reports the tasks it runs per fairness key; each
	// heartbeat writes it (bounded: see TopRunning).
	Running func() Running
	// RegisterAfter, when positive, is how long the instance runs before
	// its beacon writes anything: one stopped sooner writes nothing at
	// all. An event-started consumer invocation sets it, so an invocation
	// that runs a lone task and returns within it costs no registry write
	// (a put and a delete of the item and its index entry: 4 write units),
	// while one that keeps working is listed from then on.
	RegisterAfter time.Duration
	// Busy is the slots taken when it registers: zero at a start, what a
	// delayed registration (RegisterAfter) finds running. The Beacon sets
	// it; heartbeats report busy slots from then on.
	Busy int
}

// Registry reads and writes the worker items of one table.
type Registry struct {
	db     DB
	table  string
	shards int
	now    func() time.Time
}

// Option configures a Registry.
type Option func(*Registry)

// WithClock sets the registry's clock (tests).
func WithClock(now func() time.Time) Option { return func(r *Registry) { r.now = now } }

// New returns the registry in table, spreading the worker index entries
// over shards partitions (the table's TRIAGE_SHARDS; 0 takes
// spec.DefaultShards).
func New(db DB, table string, shards int, opts ...Option) *Registry {
	if shards <= 0 {
		shards = spec.DefaultShards
	}
	r := &Registry{db: db, table: table, shards: shards, now: time.Now}
	for _, o := range opts {
		o(r)
	}
	return r
}

// record is a worker item.
type record struct {
	PK          string    `dynamodbav:"pk"`
	CreatedPK   string    `dynamodbav:"cpk"`
	CreatedSK   string    `dynamodbav:"csk"`
	ID          string    `dynamodbav:"worker"`
	Kind        string    `dynamodbav:"kind"`
	State       string    `dynamodbav:"worker_state"`
	StartedAt   time.Time `dynamodbav:"started_at"`
	HeartbeatAt time.Time `dynamodbav:"heartbeat_at"`
	EveryMS     int64     `dynamodbav:"heartbeat_ms"`
	Capacity    int       `dynamodbav:"capacity"`
	Busy        int       `dynamodbav:"busy"`
	ExpiresAt   int64     `dynamodbav:"expires_at"`
	Types       []string  `dynamodbav:"types,omitempty"` // written at registration only
	// Written by heartbeats when the instance reports them (Running).
	Keys      map[string]int `dynamodbav:"keys,omitempty"`
	KeysOther int            `dynamodbav:"keys_other,omitempty"`
	TypeKeys  map[string]int `dynamodbav:"type_keys,omitempty"`
	Started   map[string]int `dynamodbav:"key_starts,omitempty"`
	Finished  map[string]int `dynamodbav:"key_finishes,omitempty"`
}

func key(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{spec.AttrPK: &types.AttributeValueMemberS{Value: keyPrefix + id}}
}

func partition(shard int) string { return partitionPrefix + strconv.Itoa(shard) }

// expiry is the TTL of an item heartbeated at at with interval every.
func expiry(at time.Time, every time.Duration) int64 {
	return at.Add(DeadAfterBeats*every + DeadRetention).Unix()
}

func every(in Instance) time.Duration {
	if in.Every > 0 {
		return in.Every
	}
	return DefaultHeartbeat
}

// Register writes in's item, active, started and heartbeated now. It
// replaces an item of the same id (a warm Lambda sandbox reuses its id
// for its next invocation).
func (r *Registry) Register(ctx context.Context, in Instance) error {
	if in.ID == "" {
		return errors.New("register worker: empty id")
	}
	now := r.now().UTC()
	ev := every(in)
	rec := record{
		PK: keyPrefix + in.ID, CreatedPK: partition(store.Shard(in.ID, r.shards)),
		CreatedSK: store.SortableTime(now) + "#" + in.ID,
		ID:        in.ID, Kind: in.Kind, State: string(triagetype.WorkerActive),
		StartedAt: now, HeartbeatAt: now, EveryMS: ev.Milliseconds(),
		Capacity: in.Capacity, Busy: in.Busy, ExpiresAt: expiry(now, ev), Types: in.Types,
	}
	item, err := attributevalue.MarshalMap(rec)
	if err != nil {
		return fmt.Errorf("register worker %s: %w", in.ID, err)
	}
	if _, err := r.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &r.table, Item: item}); err != nil {
		return fmt.Errorf("register worker %s: %w", in.ID, err)
	}
	return nil
}

// Heartbeat records that the instance is alive now with busy slots taken,
// in state (active or draining), and pushes its expiry on. It writes only
// attributes outside every index key and projection, so it costs the one
// item write. An instance with no item gets ErrNotRegistered and writes
// nothing: an update must never create a worker item without its index
// entry.
func (r *Registry) Heartbeat(ctx context.Context, in Instance, busy int, state triagetype.WorkerState) error {
	now := r.now().UTC()
	upd := expression.Set(expression.Name("heartbeat_at"), expression.Value(now)).
		Set(expression.Name("busy"), expression.Value(busy)).
		Set(expression.Name("worker_state"), expression.Value(string(state))).
		Set(expression.Name(spec.AttrTTL), expression.Value(expiry(now, every(in))))
	if in.Running != nil {
		ru := in.Running()
		upd = upd.Set(expression.Name("keys"), expression.Value(nonNil(ru.Keys))).
			Set(expression.Name("keys_other"), expression.Value(ru.Other)).
			Set(expression.Name("type_keys"), expression.Value(nonNil(ru.TypeKeys))).
			Set(expression.Name("key_starts"), expression.Value(nonNil(ru.Started))).
			Set(expression.Name("key_finishes"), expression.Value(nonNil(ru.Finished)))
	}
	expr, err := expression.NewBuilder().WithUpdate(upd).
		WithCondition(expression.AttributeExists(expression.Name(spec.AttrPK))).Build()
	if err != nil {
		return fmt.Errorf("heartbeat worker %s: %w", in.ID, err)
	}
	_, err = r.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &r.table, Key: key(in.ID),
		UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("heartbeat worker %s: %w", in.ID, ErrNotRegistered)
	}
	if err != nil {
		return fmt.Errorf("heartbeat worker %s: %w", in.ID, err)
	}
	return nil
}

// Deregister removes the instance's item: a clean stop leaves nothing to
// list.
func (r *Registry) Deregister(ctx context.Context, id string) error {
	if _, err := r.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &r.table, Key: key(id)}); err != nil {
		return fmt.Errorf("deregister worker %s: %w", id, err)
	}
	return nil
}

// batchGetMax is the most keys one BatchGetItem takes.
const batchGetMax = 100

// List returns every registered instance that is alive or died within
// DeadRetention, oldest first, each with the state it has now: dead once
// DeadAfterBeats heartbeat intervals passed without a heartbeat.
func (r *Registry) List(ctx context.Context) ([]triagetype.WorkerInfo, error) {
	pks, err := r.keys(ctx)
	if err != nil {
		return nil, err
	}
	now := r.now()
	out := make([]triagetype.WorkerInfo, 0, len(pks))
	for chunk := range slices.Chunk(pks, batchGetMax) {
		recs, err := r.batchGet(ctx, chunk)
		if err != nil {
			return nil, err
		}
		for _, rec := range recs {
			if rec.ExpiresAt <= now.Unix() {
				continue // expired: TTL deletes it in its own time
			}
			out = append(out, rec.worker(now))
		}
	}
	slices.SortFunc(out, func(a, b triagetype.WorkerInfo) int {
		if c := a.StartedAt.Compare(b.StartedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// worker is rec as GET /workers shows it at now.
func (rec record) worker(now time.Time) triagetype.WorkerInfo {
	ev := time.Duration(rec.EveryMS) * time.Millisecond
	w := triagetype.WorkerInfo{
		ID: rec.ID, Kind: rec.Kind, State: triagetype.WorkerState(rec.State),
		StartedAt: rec.StartedAt, LastHeartbeatAt: rec.HeartbeatAt,
		HeartbeatSeconds: ev.Seconds(), Capacity: rec.Capacity, Busy: rec.Busy,
		Types: rec.Types, Keys: rec.Keys, KeysOther: rec.KeysOther, TypeKeys: rec.TypeKeys,
		KeyStarts: rec.Started, KeyFinishes: rec.Finished,
	}
	if len(w.KeyStarts) == 0 {
		w.KeyStarts = nil
	}
	if len(w.KeyFinishes) == 0 {
		w.KeyFinishes = nil
	}
	if len(w.Keys) == 0 {
		w.Keys = nil
	}
	if len(w.TypeKeys) == 0 {
		w.TypeKeys = nil
	}
	if now.Sub(rec.HeartbeatAt) > DeadAfterBeats*ev {
		w.State = triagetype.WorkerDead
	}
	return w
}

// keys reads the worker partition of every shard, side by side, and
// returns the item keys found.
func (r *Registry) keys(ctx context.Context) ([]string, error) {
	var (
		mu   sync.Mutex
		pks  []string
		errs = make([]error, r.shards) // every shard's, joined
		g    errgroup.Group
	)
	g.SetLimit(16)
	for s := range r.shards {
		g.Go(func() error {
			got, err := r.shardKeys(ctx, s)
			mu.Lock()
			pks = append(pks, got...)
			mu.Unlock()
			errs[s] = err
			return nil
		})
	}
	_ = g.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return pks, nil
}

func (r *Registry) shardKeys(ctx context.Context, shard int) ([]string, error) {
	kc := expression.Key(spec.AttrCreatedPK).Equal(expression.Value(partition(shard)))
	expr, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		return nil, err
	}
	in := &dynamodb.QueryInput{
		TableName: &r.table, IndexName: aws.String(spec.IndexByCreated),
		KeyConditionExpression: expr.KeyCondition(), ExpressionAttributeNames: expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	}
	var pks []string
	for {
		out, err := r.db.Query(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("list workers, shard %d: %w", shard, err)
		}
		for _, it := range out.Items {
			if pk, ok := it[spec.AttrPK].(*types.AttributeValueMemberS); ok && strings.HasPrefix(pk.Value, keyPrefix) {
				pks = append(pks, pk.Value)
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return pks, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// batchGet reads the worker items with these keys (at most batchGetMax),
// retrying the keys DynamoDB leaves unprocessed. An item gone since the
// index was read is skipped.
func (r *Registry) batchGet(ctx context.Context, pks []string) ([]record, error) {
	keys := make([]map[string]types.AttributeValue, len(pks))
	for i, pk := range pks {
		keys[i] = map[string]types.AttributeValue{spec.AttrPK: &types.AttributeValueMemberS{Value: pk}}
	}
	req := map[string]types.KeysAndAttributes{r.table: {Keys: keys}}
	var recs []record
	for attempt := 0; len(req) > 0; attempt++ {
		if attempt > 0 {
			if attempt > 8 {
				return nil, fmt.Errorf("list workers: %d keys still unprocessed after %d tries", len(req[r.table].Keys), attempt)
			}
			select {
			case <-time.After(time.Duration(attempt) * 50 * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		out, err := r.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
		if err != nil {
			return nil, fmt.Errorf("list workers: %w", err)
		}
		for _, it := range out.Responses[r.table] {
			var rec record
			if err := attributevalue.UnmarshalMap(it, &rec); err != nil {
				return nil, fmt.Errorf("list workers: decode %v: %w", it[spec.AttrPK], err)
			}
			recs = append(recs, rec)
		}
		req = out.UnprocessedKeys
	}
	return recs, nil
}
