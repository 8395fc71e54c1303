package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/errgroup"

	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Batches (and workflows, which count their nodes as a batch does its
// members) keep their progress in sharded counters:
//
//	item      pk                   holds                                              by-due key
//	head      BATCH#<id>           kind, state, shard count, shards_done, sealed,    batches#<shard> / created#id,
//	                               callback request and id, counts when completed    while sealed and not completed
//	shard     BATCH#<id>#<s>       added, done, completed, dead_lettered, cancelled,  -
//	                               sealed, reported
//	add       BATCH#<id>#add#<a>   a request's members counted before they are     batches#<shard> / add#created#…,
//	                               written (memberadd.go)                           until settled
//
// A member is counted on its own shard (task.BatchShard, fixed at its
// creation) from the table's stream, exactly once. Its first finish is
// one plain conditional write (see update) that sets the terminal status
// and batch_counted together: the finish and the mark that it is to be
// counted are one fact, and a crash cannot separate them. The stream
// delivers that write's record at least once; internal/counters reads it
// with FirstFinish (the old image lacks batch_counted, the new one has
// it) and adds it to the shard in the transaction that records the run of
// records applied (its guard), so a run delivered twice counts once. A
// member retried from dead_letter keeps batch_counted and never counts
// again. A shard's done therefore lags the members' finishes by the
// stream's delay, and so does a batch's progress and its completion: once
// the counters have added a run, they hand its shards to internal/flow,
// which reports a sealed shard whose members are all done and completes
// the batch (and the promoter's sweep of sealed heads does the same after
// a crash in between).
//
// Hot keys: at 10,000 finishes a second (the table's design rate) over S
// shards, the stream consumer folds each run of records into one
// transactional update per shard it touches (2 write units, whatever the
// number of finishes it adds), so a shard takes at most one update per
// stream run: S = 32 keeps a batch's counting spread, and no finishing
// write touches a shard at all. The head is written once per shard (when
// the shard is done), so it takes S writes in the batch's life. Reading
// progress is one head read plus one batch read of S shards: O(S), not
// O(members).

// BatchShards is the shard count of a batch (workflows use fewer: see
// WorkflowShards).
const BatchShards = 32

// BatchHead is a batch's (or workflow's) head item.
type BatchHead struct {
	ID         string `dynamodbav:"batch_id"`
	Kind       string `dynamodbav:"kind"` // "batch" or "workflow"
	State      string `dynamodbav:"state"`
	Shards     int    `dynamodbav:"shards"`
	ShardsDone int    `dynamodbav:"shards_done"`
	// Sealed: no more members; the batch completes when all have finished.
	Sealed      bool       `dynamodbav:"sealed"`
	CreatedAt   time.Time  `dynamodbav:"created_at"`
	CompletedAt *time.Time `dynamodbav:"completed_at,omitempty"`
	// OnComplete is the callback task's request (JSON), CallbackID the
	// callback task's id, CallbackClaimed set by the one writer that
	// found every shard done and so creates it.
	OnComplete      string `dynamodbav:"on_complete,omitempty"`
	CallbackID      string `dynamodbav:"callback_id,omitempty"`
	CallbackClaimed bool   `dynamodbav:"callback_claimed,omitempty"`
	// Final counts, written when the batch completes.
	Total        int `dynamodbav:"total,omitempty"`
	Completed    int `dynamodbav:"completed,omitempty"`
	DeadLettered int `dynamodbav:"dead_lettered,omitempty"`
	Cancelled    int `dynamodbav:"cancelled,omitempty"`
	// Workflow fields: its name, node count, the hash of the request it
	// was made from (a retry with the same idempotency key must match).
	Name        string `dynamodbav:"name,omitempty"`
	Nodes       int    `dynamodbav:"nodes,omitempty"`
	RequestHash string `dynamodbav:"request_hash,omitempty"`
	// Held lists the nodes (task ids) that finished while the workflow
	// was pending (cancelled by hand before its commit): their children
	// are resolved by the commit, not by their own walk (HoldFinished).
	Held []string `dynamodbav:"held,stringset,omitempty"`
	// Version goes up on every state change of the head.
	Version int64 `dynamodbav:"version"`
}

// BatchShard is one counter shard of a batch.
type BatchShard struct {
	Added        int  `dynamodbav:"added"`
	Done         int  `dynamodbav:"done"`
	Completed    int  `dynamodbav:"completed"`
	DeadLettered int  `dynamodbav:"dead_lettered"`
	Cancelled    int  `dynamodbav:"cancelled"`
	Sealed       bool `dynamodbav:"sealed"`
	Reported     bool `dynamodbav:"reported"`
}

// SumShards adds up a batch's shard counts (Sealed and Reported are
// left false: they are per shard).
func SumShards(shards []BatchShard) BatchShard {
	var s BatchShard
	for _, x := range shards {
		s.Added += x.Added
		s.Done += x.Done
		s.Completed += x.Completed
		s.DeadLettered += x.DeadLettered
		s.Cancelled += x.Cancelled
	}
	return s
}

// Finished reports whether every member added to the sealed shard has
// finished.
func (s BatchShard) Finished() bool { return s.Sealed && s.Done >= s.Added }

// Sentinel errors of batches.
var (
	ErrBatchNotFound = errors.New("batch not found")
	ErrBatchSealed   = errors.New("batch is sealed")
	ErrBatchExists   = errors.New("batch exists")
	// ErrAddExpired refuses the record of a member counted by a member
	// add past its MemberAddDeadline: nothing is written.
	ErrAddExpired = errors.New("its member add's write deadline has passed")
)

const (
	batchPrefix    = spec.BatchKeyPrefix
	batchPartition = "batches#"
)

func batchKey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{spec.AttrPK: &types.AttributeValueMemberS{Value: batchPrefix + id}}
}

func shardKey(id string, s int) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{spec.AttrPK: &types.AttributeValueMemberS{Value: ShardRef{Batch: id, Shard: s}.PK()}}
}

// CreateBatch writes a batch's head and its shards (added[s] members
// already counted on shard s: a workflow's nodes, written by the caller).
// A head that exists is ErrBatchExists, and nothing is changed; shards
// that exist are left as they are (a retried workflow submit).
func (s *Store) CreateBatch(ctx context.Context, h *BatchHead, added []int) error {
	av, err := attributevalue.MarshalMap(h)
	if err != nil {
		return fmt.Errorf("marshal batch %s: %w", h.ID, err)
	}
	av[spec.AttrPK] = batchKey(h.ID)[spec.AttrPK]
	if err := s.putShards(ctx, h.ID, h.Shards, added); err != nil {
		return err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &s.table, Item: av,
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": spec.AttrPK},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("batch %s: %w", h.ID, ErrBatchExists)
	}
	if err != nil {
		return fmt.Errorf("create batch %s: %w", h.ID, err)
	}
	return nil
}

// putShards writes a batch's shards that do not exist yet, side by side.
func (s *Store) putShards(ctx context.Context, id string, n int, added []int) error {
	errs := make([]error, n) // every shard's, joined
	var g errgroup.Group
	g.SetLimit(16)
	for i := range n {
		g.Go(func() error {
			a := 0
			if i < len(added) {
				a = added[i]
			}
			av, err := attributevalue.MarshalMap(BatchShard{Added: a})
			if err != nil {
				errs[i] = err
				return nil
			}
			av[spec.AttrPK] = shardKey(id, i)[spec.AttrPK]
			_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
				TableName: &s.table, Item: av,
				ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
				ExpressionAttributeNames: map[string]string{"#pk": spec.AttrPK},
			})
			var ccf *types.ConditionalCheckFailedException
			if err != nil && !errors.As(err, &ccf) {
				errs[i] = fmt.Errorf("create shard %d of batch %s: %w", i, id, err)
			}
			return nil
		})
	}
	_ = g.Wait()
	return errors.Join(errs...)
}

// Batch reads a batch's head (strongly consistent).
func (s *Store) Batch(ctx context.Context, id string) (*BatchHead, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: batchKey(id), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("read batch %s: %w", id, err)
	}
	if len(out.Item) == 0 {
		return nil, fmt.Errorf("batch %s: %w", id, ErrBatchNotFound)
	}
	var h BatchHead
	if err := attributevalue.UnmarshalMap(out.Item, &h); err != nil {
		return nil, fmt.Errorf("unmarshal batch %s: %w", id, err)
	}
	return &h, nil
}

// BatchShardsOf reads every shard of batch id (n of them), strongly consistent.
func (s *Store) BatchShardsOf(ctx context.Context, id string, n int) ([]BatchShard, error) {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return s.BatchShardsAt(ctx, id, idx)
}

// BatchShardsAt reads shards idx of batch id, strongly consistent, in
// batch reads of up to 100: out[j] is shard idx[j] (zero if it does not
// exist).
func (s *Store) BatchShardsAt(ctx context.Context, id string, idx []int) ([]BatchShard, error) {
	out := make([]BatchShard, len(idx))
	at := make(map[int][]int, len(idx)) // shard -> its places in idx
	for j, i := range idx {
		at[i] = append(at[i], j)
	}
	for start := 0; start < len(idx); start += 100 {
		var keys []map[string]types.AttributeValue
		seen := map[int]bool{}
		for _, i := range idx[start:min(start+100, len(idx))] {
			if !seen[i] {
				seen[i] = true
				keys = append(keys, shardKey(id, i))
			}
		}
		req := map[string]types.KeysAndAttributes{s.table: {Keys: keys, ConsistentRead: aws.Bool(true)}}
		for attempt := 0; len(req) > 0; attempt++ {
			if attempt > 8 {
				return nil, fmt.Errorf("read shards of batch %s: DynamoDB kept some unprocessed", id)
			}
			if attempt > 0 {
				time.Sleep(time.Duration(attempt*attempt) * 10 * time.Millisecond)
			}
			res, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, fmt.Errorf("read shards of batch %s: %w", id, err)
			}
			for _, it := range res.Responses[s.table] {
				pk := attrString(it[spec.AttrPK])
				i, err := strconv.Atoi(pk[len(batchPrefix+id+"#"):])
				if err != nil {
					continue
				}
				var sh BatchShard
				if err := attributevalue.UnmarshalMap(it, &sh); err != nil {
					return nil, fmt.Errorf("unmarshal shard %d of batch %s: %w", i, id, err)
				}
				for _, j := range at[i] {
					out[j] = sh
				}
			}
			req = res.UnprocessedKeys
		}
	}
	return out, nil
}

// SealHead marks batch id sealed and gives it a by-due entry, so the
// promoter's sweep finds it until it completes.
func (s *Store) SealHead(ctx context.Context, id string, state string) (*BatchHead, error) {
	h, err := s.Batch(ctx, id)
	if err != nil {
		return nil, err
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: batchKey(id),
		UpdateExpression:    aws.String("SET #sealed = :t, #st = :st, #dpk = :dpk, #dsk = :dsk ADD #v :one"),
		ConditionExpression: aws.String("attribute_exists(#pk) AND #st <> :done AND #st <> :abandoned"),
		ExpressionAttributeNames: map[string]string{
			"#pk": spec.AttrPK, "#st": "state", "#dpk": spec.AttrDuePK, "#dsk": spec.AttrDueSK, "#sealed": "sealed", "#v": "version",
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":t":         &types.AttributeValueMemberBOOL{Value: true},
			":st":        &types.AttributeValueMemberS{Value: state},
			":done":      &types.AttributeValueMemberS{Value: "completed"},
			":abandoned": &types.AttributeValueMemberS{Value: triagetype.WorkflowAbandoned},
			":dpk":       &types.AttributeValueMemberS{Value: batchPartition + strconv.Itoa(s.shardOf(id))},
			":dsk":       &types.AttributeValueMemberS{Value: SortableTime(h.CreatedAt) + "#" + id},
			":one":       &types.AttributeValueMemberN{Value: "1"},
		},
		ReturnValues: types.ReturnValueAllNew,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return s.Batch(ctx, id) // completed or abandoned already
	}
	if err != nil {
		return nil, fmt.Errorf("seal batch %s: %w", id, err)
	}
	var nh BatchHead
	if err := attributevalue.UnmarshalMap(out.Attributes, &nh); err != nil {
		return nil, err
	}
	return &nh, nil
}

// pendingUnsealed is the condition of a workflow head still pending and
// not sealed (committed): what AbandonHead and HoldFinished both require,
// so neither acts on a committed workflow.
const pendingUnsealed = "#st = :pending AND (attribute_not_exists(#sealed) OR #sealed = :f)"

// AbandonHead moves workflow id from pending to abandoned, unless it was
// sealed (committed) meanwhile: one conditional write, which SealHead's
// own condition answers, so a workflow is either committed or abandoned,
// never both. It reports whether this call abandoned it.
func (s *Store) AbandonHead(ctx context.Context, id string) (bool, error) {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: batchKey(id),
		UpdateExpression:         aws.String("SET #st = :ab ADD #v :one"),
		ConditionExpression:      aws.String(pendingUnsealed),
		ExpressionAttributeNames: map[string]string{"#st": "state", "#sealed": "sealed", "#v": "version"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":ab":      &types.AttributeValueMemberS{Value: triagetype.WorkflowAbandoned},
			":pending": &types.AttributeValueMemberS{Value: triagetype.WorkflowPending},
			":f":       &types.AttributeValueMemberBOOL{Value: false},
			":one":     &types.AttributeValueMemberN{Value: "1"},
		},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("abandon workflow %s: %w", id, err)
	}
	return true, nil
}

// SealShard marks shard i of batch id sealed and returns it.
func (s *Store) SealShard(ctx context.Context, id string, i int) (BatchShard, error) {
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: shardKey(id, i),
		UpdateExpression:          aws.String("SET #sealed = :t"),
		ConditionExpression:       aws.String("attribute_exists(#pk)"),
		ExpressionAttributeNames:  map[string]string{"#pk": spec.AttrPK, "#sealed": "sealed"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":t": &types.AttributeValueMemberBOOL{Value: true}},
		ReturnValues:              types.ReturnValueAllNew,
	})
	if err != nil {
		return BatchShard{}, fmt.Errorf("seal shard %d of batch %s: %w", i, id, err)
	}
	var sh BatchShard
	err = attributevalue.UnmarshalMap(out.Attributes, &sh)
	return sh, err
}

// ReportShard records, once, that shard i of batch id is finished: one
// transaction marks the shard reported (conditional on it being sealed,
// every added member done, and not reported before) and adds one to the
// head's shards_done. It reports whether this call did it.
func (s *Store) ReportShard(ctx context.Context, id string, i int) (bool, error) {
	err := s.transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Update: &types.Update{
			TableName: &s.table, Key: shardKey(id, i),
			UpdateExpression:          aws.String("SET #rep = :t"),
			ConditionExpression:       aws.String("#sealed = :t AND #done >= #added AND (attribute_not_exists(#rep) OR #rep = :f)"),
			ExpressionAttributeNames:  map[string]string{"#rep": "reported", "#sealed": "sealed", "#done": "done", "#added": "added"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":t": &types.AttributeValueMemberBOOL{Value: true}, ":f": &types.AttributeValueMemberBOOL{Value: false}},
		}},
		{Update: &types.Update{
			TableName: &s.table, Key: batchKey(id),
			UpdateExpression:          aws.String("ADD #sd :one"),
			ExpressionAttributeNames:  map[string]string{"#sd": "shards_done"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}},
		}},
	}})
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("report shard %d of batch %s: %w", i, id, err)
	}
	return true, nil
}

// ClaimCallback is the one conditional write that decides who completes
// batch id: it succeeds for exactly one caller, once every shard reported.
func (s *Store) ClaimCallback(ctx context.Context, id string, shards int) (bool, error) {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: batchKey(id),
		UpdateExpression:          aws.String("SET #cc = :t"),
		ConditionExpression:       aws.String("#sd >= :n AND (attribute_not_exists(#cc) OR #cc = :f)"),
		ExpressionAttributeNames:  map[string]string{"#cc": "callback_claimed", "#sd": "shards_done"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":t": &types.AttributeValueMemberBOOL{Value: true}, ":f": &types.AttributeValueMemberBOOL{Value: false}, ":n": &types.AttributeValueMemberN{Value: strconv.Itoa(shards)}},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("claim the callback of batch %s: %w", id, err)
	}
	return true, nil
}

// CompleteBatch records batch id's final counts and callback, and takes it
// out of the sweep's index. It reports whether this call completed it.
func (s *Store) CompleteBatch(ctx context.Context, id string, final BatchShard, callbackID string) (bool, error) {
	now := s.now().UTC()
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: batchKey(id),
		UpdateExpression:    aws.String("SET #st = :done, #cat = :at, #total = :total, #c = :c, #d = :d, #x = :x, #cb = :cb REMOVE #dpk, #dsk ADD #v :one"),
		ConditionExpression: aws.String("#st <> :done"),
		ExpressionAttributeNames: map[string]string{"#st": "state", "#dpk": spec.AttrDuePK, "#dsk": spec.AttrDueSK, "#cat": "completed_at",
			"#total": "total", "#c": "completed", "#d": "dead_lettered", "#x": "cancelled", "#cb": "callback_id", "#v": "version"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":done":  &types.AttributeValueMemberS{Value: "completed"},
			":at":    &types.AttributeValueMemberS{Value: now.Format(time.RFC3339Nano)},
			":total": &types.AttributeValueMemberN{Value: strconv.Itoa(final.Added)},
			":c":     &types.AttributeValueMemberN{Value: strconv.Itoa(final.Completed)},
			":d":     &types.AttributeValueMemberN{Value: strconv.Itoa(final.DeadLettered)},
			":x":     &types.AttributeValueMemberN{Value: strconv.Itoa(final.Cancelled)},
			":cb":    &types.AttributeValueMemberS{Value: callbackID},
			":one":   &types.AttributeValueMemberN{Value: "1"},
		},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("complete batch %s: %w", id, err)
	}
	return true, nil
}

// OpenBatches returns, from one shard of the sweep's index after the sort
// key after, up to limit entries: the ids of sealed batches not completed
// yet, and the member adds not settled yet (memberadd.go: they share the
// partition, so the sweep reads both with one query), and where to resume
// ("" at the end).
func (s *Store) OpenBatches(ctx context.Context, shard int, after string, limit int32) ([]string, []AddRef, string, error) {
	in := &dynamodb.QueryInput{
		TableName: &s.table, IndexName: aws.String(spec.IndexByDue),
		KeyConditionExpression:    aws.String("#pk = :pk"),
		ExpressionAttributeNames:  map[string]string{"#pk": spec.AttrDuePK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: batchPartition + strconv.Itoa(shard)}},
		Limit:                     aws.Int32(limit),
	}
	if after != "" {
		pk, ok := sweepEntryPK(after)
		if !ok {
			return nil, nil, "", fmt.Errorf("bad batch sweep mark %q", after)
		}
		in.ExclusiveStartKey = map[string]types.AttributeValue{
			spec.AttrPK:    &types.AttributeValueMemberS{Value: pk},
			spec.AttrDuePK: &types.AttributeValueMemberS{Value: batchPartition + strconv.Itoa(shard)},
			spec.AttrDueSK: &types.AttributeValueMemberS{Value: after},
		}
	}
	out, err := s.db.Query(ctx, in)
	if err != nil {
		return nil, nil, "", fmt.Errorf("read open batches: %w", err)
	}
	var ids []string
	var adds []AddRef
	last := ""
	for _, it := range out.Items {
		sk := attrString(it[spec.AttrDueSK])
		if a, ok := parseAddEntry(sk); ok {
			adds = append(adds, a)
			last = sk
		} else if _, id, ok := cutLast(sk, "#"); ok {
			ids = append(ids, id)
			last = sk
		}
	}
	if len(out.LastEvaluatedKey) == 0 {
		last = ""
	}
	return ids, adds, last, nil
}

// sweepEntryPK is the table key of the item whose entry in the batch
// sweep's partition has sort key sk: a head's (created#id) or a member
// add's (addEntryPrefix...).
func sweepEntryPK(sk string) (string, bool) {
	if a, ok := parseAddEntry(sk); ok {
		return attrString(addKey(a.Batch, a.ID)[spec.AttrPK]), true
	}
	_, id, ok := cutLast(sk, "#")
	return batchPrefix + id, ok
}

func cutLast(s, sep string) (string, string, bool) {
	for i := len(s) - len(sep); i >= 0; i-- {
		if s[i:i+len(sep)] == sep {
			return s[:i], s[i+len(sep):], true
		}
	}
	return "", "", false
}

// ShardRef names one counter shard of a batch (or workflow).
type ShardRef struct {
	Batch string
	Shard int
}

// PK is the shard item's partition key, BATCH#<batch>#<shard>.
func (r ShardRef) PK() string { return batchPrefix + r.Batch + "#" + strconv.Itoa(r.Shard) }

// FirstFinish reads a stream record of a task item (its images before
// and after; old nil for an insert) as the rule of update writes it: a
// batch member's first finish is the one write that sets batch_counted
// along with a terminal status. ok is true for that record only, with the
// member's shard and the shard attribute its outcome adds to (completed,
// dead_lettered or cancelled, besides done). Every later write of the
// member keeps batch_counted, so no other record of it counts.
func FirstFinish(old, new *task.Task) (ref ShardRef, outcome string, ok bool) {
	if new == nil || !new.BatchCounted || new.BatchID == "" || !new.Status.Terminal() || old != nil && old.BatchCounted {
		return ShardRef{}, "", false
	}
	outcome = "completed"
	switch new.Status {
	case triagetype.DeadLetter:
		outcome = "dead_lettered"
	case triagetype.Cancelled:
		outcome = "cancelled"
	}
	return ShardRef{Batch: new.BatchID, Shard: new.BatchShard}, outcome, true
}

// createMember records a new batch member: its task, its idempotency key
// if it has one, and one more member on its counter shard, in one
// transaction conditional on the shard existing and not being sealed. A
// batch that does not exist or is sealed is a *task.FieldError naming
// batch_id. It costs 2 write units per item on top of the plain create
// (transactional writes are billed twice): about 2 + 2 for the shard.
// It is the path of a member alone in its request, or with an idempotency
// key; a request's other members were counted by a member add before
// (t.MemberAdd: memberadd.go) and are plain creates.
func (s *Store) createMember(ctx context.Context, t *task.Task) (*task.Task, bool, error) {
	t.BatchShard = Shard(t.ID, BatchShards)
	av, err := s.item(t)
	if err != nil {
		return nil, false, err
	}
	items := []types.TransactWriteItem{
		{Put: &types.Put{TableName: &s.table, Item: av,
			ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
			ExpressionAttributeNames: map[string]string{"#pk": spec.AttrPK}}},
		{Update: &types.Update{TableName: &s.table, Key: shardKey(t.BatchID, t.BatchShard),
			UpdateExpression:          aws.String("ADD #added :one"),
			ConditionExpression:       aws.String("attribute_exists(#pk) AND #sealed = :f"),
			ExpressionAttributeNames:  map[string]string{"#pk": spec.AttrPK, "#added": "added", "#sealed": "sealed"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}, ":f": &types.AttributeValueMemberBOOL{Value: false}}}},
	}
	if t.IdempotencyKey != "" {
		now := s.now()
		items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: &s.table,
			Item: map[string]types.AttributeValue{
				spec.AttrPK:  &types.AttributeValueMemberS{Value: idemPK(t.IdempotencyKey)},
				"task_id":    &types.AttributeValueMemberS{Value: t.ID},
				spec.AttrTTL: &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(IdempotencyWindow).Unix(), 10)},
			},
			ConditionExpression:       aws.String("attribute_not_exists(#pk) OR #ttl < :now"),
			ExpressionAttributeNames:  map[string]string{"#pk": spec.AttrPK, "#ttl": spec.AttrTTL},
			ExpressionAttributeValues: map[string]types.AttributeValue{":now": &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Unix(), 10)}},
		}})
	}
	err = s.transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if err == nil {
		s.logCreated(ctx, t)
		return t, true, nil
	}
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return nil, false, fmt.Errorf("create batch member %s: %w", t.ID, err)
	}
	refused := func(i int) bool {
		return len(tce.CancellationReasons) > i && aws.ToString(tce.CancellationReasons[i].Code) == "ConditionalCheckFailed"
	}
	switch {
	case refused(2):
		existing, err := s.ByIdempotencyKey(ctx, t.IdempotencyKey)
		return existing, false, err
	case refused(0):
		existing, err := s.Get(ctx, t.ID)
		return existing, false, err
	case refused(1):
		return nil, false, &task.FieldError{Field: "batch_id", Message: fmt.Sprintf("batch %s does not exist or is sealed", t.BatchID)}
	}
	return nil, false, fmt.Errorf("create batch member %s: %w", t.ID, err)
}

// transact runs a transaction with TransactRetrying's retries, up to 10
// attempts.
func (s *Store) transact(ctx context.Context, in *dynamodb.TransactWriteItemsInput) error {
	return TransactRetrying(ctx, s.db, in, 10)
}

// Transactor writes transactions (a *dynamodb.Client).
type Transactor interface {
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

// TransactRetrying runs a transaction, retrying (up to attempts in all,
// with a growing jittered wait) while DynamoDB cancels it only for a
// conflict with another transaction on the same item (TransactionConflict:
// two finishes counted on one shard at once, two stream deliveries on one
// counter item) or fails it as an internal error (DynamoDB Local's lock
// timeout under contention). Any other answer, a refused condition
// included, is returned as it is. The store and the counters both use it.
func TransactRetrying(ctx context.Context, db Transactor, in *dynamodb.TransactWriteItemsInput, attempts int) error {
	var err error
	for attempt := range attempts {
		if attempt > 0 {
			wait := time.Duration(5*(1<<min(attempt, 6))) * time.Millisecond
			wait = wait/2 + time.Duration(rand.Int64N(int64(wait/2)+1))
			select {
			case <-ctx.Done():
				return err
			case <-time.After(wait):
			}
		}
		_, err = db.TransactWriteItems(ctx, in)
		if err == nil || !retriableTransaction(err) {
			return err
		}
	}
	return err
}

func retriableTransaction(err error) bool {
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		conflict := false
		for _, r := range tce.CancellationReasons {
			switch aws.ToString(r.Code) {
			case "ConditionalCheckFailed":
				return false
			case "TransactionConflict":
				conflict = true
			}
		}
		return conflict
	}
	var ise *types.InternalServerError
	var tip *types.TransactionInProgressException
	return errors.As(err, &ise) || errors.As(err, &tip)
}
