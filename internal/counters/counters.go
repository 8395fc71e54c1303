// Package counters keeps the numbers behind GET /stats, so that reading
// them costs the same with a thousand retained tasks as with a hundred
// million: tasks per status and effective priority, per type and status,
// completions and failures per 10 seconds, and queued tasks by the minute
// their wait began (from which the oldest queued age follows).
//
// The counters are derived from the table's DynamoDB stream, never written
// by the request paths: a counter item updated by every submit and claim
// would be the hottest key in the table. A stream consumer (a Lambda
// trigger in AWS, the Poller locally) folds a batch of changes into one
// transaction that adds the net change to each counter item it touches
// and, in the same transaction, records that the batch was applied. A
// batch delivered twice therefore counts once: the counters are exact,
// lagging the table by the stream's delay.
//
// The status, priority and type counts are of retained tasks: a task
// deleted by hand, by cleanup or by DynamoDB's TTL leaves the stream as a
// REMOVE record with its old image, which takes it off the count of the
// status it had, so after a cleanup /stats counts what the task list
// lists. The throughput buckets count events (a completion, a dead
// letter) in the 10 s they happened and are not taken back by a deletion.
//
// Items (pk): COUNTS#GLOBAL (status×priority and queued-since attributes),
// COUNTS#TYPE#<type> (one per type: the number of types does not bound
// anything, and no caller can fill an item), COUNTS#TP#<10 s bucket>
// (throughput, expiring after an hour), COUNTS#WAIT#<minute> (wait
// histograms per priority, expiring after an hour: waits.go),
// COUNTS#DEPTH#<minute> (queue depths sampled by the promoter: depth.go),
// and the batch guards.
//
// The same transactions count batch members (and workflow nodes) on their
// batch's counter shards, BATCH#<id>#<shard> (internal/store batch.go): a
// member's first finish is counted from its record, once, in the run that
// holds it, and the shards a run touched are handed to OnBatchShards's
// hook, which completes finished batches.
package counters

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// DynamoDB is the part of the DynamoDB client the counters use.
type DynamoDB interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

const (
	globalPK    = "COUNTS#GLOBAL"
	typePrefix  = "COUNTS#TYPE#"
	tpPrefix    = "COUNTS#TP#"
	guardPrefix = "COUNTS#GUARD#"

	// TypeClass is the by-due class whose entries list the type counters.
	TypeClass = "types"

	// Bucket is the width of a throughput bucket.
	Bucket = 10 * time.Second
	// bucketTTL is how long throughput buckets and batch guards are kept.
	bucketTTL = time.Hour
	guardTTL  = 48 * time.Hour

	// A guard item holds the last sequence number of the run it guards
	// twice: padded (guardSeq, see PadSeq), which orders runs in a
	// condition, and as the stream gave it (guardRawSeq), which is what a
	// restarted Poller hands back to GetShardIterator. The padding cannot
	// be undone: a stream's numbers may carry leading zeros of their own
	// (DynamoDB Local's are 21 digits, "000000000000000000199").
	guardSeq    = "seq"
	guardRawSeq = "raw_seq"

	// maxItems bounds the counter items of one transaction (DynamoDB takes
	// 100 actions; one is the guard).
	maxItems = 95
)

// Change is one stream record of a task item: its images before and after
// (nil for an insert or a removal) and its sequence number.
type Change struct {
	Seq      string
	Old, New *task.Task
	// Completed is set (and Old and New are nil) for the record of a
	// batch or workflow head that completed (see groupCompleted).
	Completed *GroupCompletion
}

// Keeper applies changes to the counters and reads them.
type Keeper struct {
	db      DynamoDB
	table   string
	shards  int
	now     func() time.Time
	reap    func(ctx context.Context, keys ...string) error
	pub     publishing // see Publish
	counted ShardsHook // see OnBatchShards
}

// ShardsHook is told the batch counter shards a run of changes added to
// (OnBatchShards).
type ShardsHook func(ctx context.Context, shards []store.ShardRef) error

// OnBatchShards sets what Apply does after it has counted batch members'
// first finishes (store.FirstFinish) on their shards: fn gets the shards
// the changes touched, once their counts are applied, whether by this
// delivery or by an earlier one (a crash could have come between the
// apply and fn), so that a finished shard is reported and its batch
// completed (internal/flow). An error from fn fails the delivery, which
// the stream then delivers again: fn runs at least once per run of
// changes and must be idempotent. Call it once, while assembling.
func (k *Keeper) OnBatchShards(fn ShardsHook) { k.counted = fn }

// New returns a Keeper for table, listing type counters over shards by-due
// partitions (the store's shard count).
func New(db DynamoDB, table string, shards int) *Keeper {
	if shards <= 0 {
		shards = spec.DefaultShards
	}
	return &Keeper{db: db, table: table, shards: shards, now: time.Now}
}

// delta is the net change of a run of changes, per counter item.
type delta struct {
	global map[string]int64            // attribute -> change
	types  map[string]map[string]int64 // type -> attribute -> change
	tp     map[int64]map[string]int64  // bucket -> completed|failed -> change
	waits  map[int64]map[string]int64  // minute -> wait bucket attribute -> change (waits.go)
	// batch member finishes per counter shard: done and the outcome's attribute
	batches map[store.ShardRef]map[string]int64
}

func newDelta() *delta {
	return &delta{global: map[string]int64{}, types: map[string]map[string]int64{}, tp: map[int64]map[string]int64{},
		waits: map[int64]map[string]int64{}, batches: map[store.ShardRef]map[string]int64{}}
}

func statusAttr(st triagetype.Status, p triagetype.Priority) string {
	return "s#" + string(st) + "#" + string(p)
}
func queuedAttr(p triagetype.Priority, at time.Time) string {
	return "q#" + string(p) + "#" + strconv.FormatInt(at.Unix()/60, 10)
}

func (d *delta) count(t *task.Task, sign int64) {
	d.global[statusAttr(t.Status, t.EffectivePriority)] += sign
	if d.types[t.Type] == nil {
		d.types[t.Type] = map[string]int64{}
	}
	d.types[t.Type]["s#"+string(t.Status)] += sign
	if t.Status == triagetype.Queued {
		d.global[queuedAttr(t.EffectivePriority, t.AgingFrom())] += sign
	}
}

func (d *delta) add(c Change) {
	if ref, outcome, ok := store.FirstFinish(c.Old, c.New); ok {
		if d.batches[ref] == nil {
			d.batches[ref] = map[string]int64{}
		}
		d.batches[ref]["done"]++
		d.batches[ref][outcome]++
	}
	if minute, attr, ok := claimWait(c); ok {
		if d.waits[minute] == nil {
			d.waits[minute] = map[string]int64{}
		}
		d.waits[minute][attr]++
	}
	if c.Old != nil {
		d.count(c.Old, -1)
	}
	if c.New != nil {
		d.count(c.New, +1)
		if st := c.New.Status; (st == triagetype.Completed || st == triagetype.DeadLetter) && (c.Old == nil || c.Old.Status != st) {
			at := c.New.WaitingSince
			if c.New.CompletedAt != nil {
				at = *c.New.CompletedAt
			}
			b := at.Unix() / int64(Bucket/time.Second)
			if d.tp[b] == nil {
				d.tp[b] = map[string]int64{}
			}
			kind := "completed"
			if st == triagetype.DeadLetter {
				kind = "failed"
			}
			d.tp[b][kind]++
		}
	}
}

func byShard(a, b store.ShardRef) int {
	return cmp.Or(strings.Compare(a.Batch, b.Batch), cmp.Compare(a.Shard, b.Shard))
}

// items counts the counter items d touches (net changes only).
func (d *delta) items() int {
	n := len(d.tp) + len(d.waits) + len(d.batches)
	if nonZero(d.global) {
		n++
	}
	for _, m := range d.types {
		if nonZero(m) {
			n++
		}
	}
	return n
}

func nonZero(m map[string]int64) bool {
	for _, v := range m {
		if v != 0 {
			return true
		}
	}
	return false
}

// Guard makes a batch's transaction apply at most once.
type Guard struct {
	// Key names the guard item; Seq is compared with what it holds.
	Key string
	// AfterSeq applies the batch only if the guard item's sequence number
	// is below first (a shard checkpoint: records arrive in order). When
	// false, the batch applies only if the guard item does not exist yet
	// (a batch marker).
	AfterSeq bool
}

// ErrApplied means the batch was applied before; nothing was written.
var ErrApplied = errors.New("counters: batch already applied")

// Reap sets what Apply does with the blob store objects of removed tasks
// (deleted by hand, by cleanup, or by DynamoDB's TTL): the stream is the
// one place every removal shows, so the objects' deletion rides on the
// counters' consumer. del runs on every delivery, before the counters are
// applied (a retried batch deletes again, which is harmless), so a failed
// deletion fails the batch and is retried with it.
func (k *Keeper) Reap(del func(ctx context.Context, keys ...string) error) { k.reap = del }

// Apply folds changes into the counters, in transactions of at most
// maxItems counter items each. guard(first, last) names the guard of the
// run of changes from sequence number first to last. Changes of a run that
// was applied before are skipped. Then, with a publisher set (Publish),
// the changes are published, whether their counters were applied now or
// by an earlier delivery. Before that, the batch shards the changes
// counted members on are handed to the OnBatchShards hook under the same
// rule.
func (k *Keeper) Apply(ctx context.Context, changes []Change, guard func(first, last string) Guard) error {
	if k.reap != nil {
		var keys []string
		for _, c := range changes {
			if c.New == nil && c.Old != nil {
				keys = append(keys, store.BlobKeys(c.Old)...)
			}
		}
		if len(keys) > 0 {
			if err := k.reap(ctx, keys...); err != nil {
				return fmt.Errorf("remove the objects of removed tasks: %w", err)
			}
		}
	}
	d, first := newDelta(), ""
	flush := func(last string) error {
		if first == "" {
			return nil
		}
		err := k.write(ctx, d, guard(first, last), first, last)
		d, first = newDelta(), ""
		if errors.Is(err, ErrApplied) {
			return nil
		}
		return err
	}
	touched := map[store.ShardRef]bool{}
	for i, c := range changes {
		probe := newDelta()
		probe.add(c)
		if d.items()+probe.items() > maxItems {
			if err := flush(changes[i-1].Seq); err != nil {
				return err
			}
		}
		if first == "" {
			first = c.Seq
		}
		d.add(c)
		for ref := range probe.batches {
			touched[ref] = true
		}
	}
	if len(changes) == 0 {
		return nil
	}
	if err := flush(changes[len(changes)-1].Seq); err != nil {
		return err
	}
	if k.counted != nil && len(touched) > 0 {
		refs := slices.SortedFunc(maps.Keys(touched), byShard)
		if err := k.counted(ctx, refs); err != nil {
			return fmt.Errorf("report the batch shards counted: %w", err)
		}
	}
	return k.publish(ctx, changes)
}

// PadSeq left-pads a stream sequence number (a decimal string of up to 40
// digits) so that string order is numeric order.
func PadSeq(seq string) string {
	if len(seq) >= 40 {
		return seq
	}
	return strings.Repeat("0", 40-len(seq)) + seq
}

func (k *Keeper) write(ctx context.Context, d *delta, g Guard, first, last string) error {
	now := k.now()
	key := func(pk string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{spec.AttrPK: &types.AttributeValueMemberS{Value: pk}}
	}
	guard := &types.Update{
		TableName: &k.table, Key: key(guardPrefix + g.Key),
		UpdateExpression:         aws.String("SET #seq = :last, #raw = :raw, #ttl = :ttl"),
		ExpressionAttributeNames: map[string]string{"#seq": guardSeq, "#raw": guardRawSeq, "#ttl": spec.AttrTTL},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":last": &types.AttributeValueMemberS{Value: PadSeq(last)},
			":raw":  &types.AttributeValueMemberS{Value: last},
			":ttl":  &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(guardTTL).Unix(), 10)},
		},
		ConditionExpression: aws.String("attribute_not_exists(#seq)"),
	}
	if g.AfterSeq {
		guard.ConditionExpression = aws.String("attribute_not_exists(#seq) OR #seq < :first")
		guard.ExpressionAttributeValues[":first"] = &types.AttributeValueMemberS{Value: PadSeq(first)}
	}
	actions := []types.TransactWriteItem{{Update: guard}}
	if u := addUpdate(k.table, key(globalPK), d.global, nil); u != nil {
		actions = append(actions, types.TransactWriteItem{Update: u})
	}
	for _, typ := range slices.Sorted(maps.Keys(d.types)) {
		set := map[string]types.AttributeValue{
			spec.AttrDuePK: &types.AttributeValueMemberS{Value: TypeClass + "#" + strconv.Itoa(store.Shard(typ, k.shards))},
			spec.AttrDueSK: &types.AttributeValueMemberS{Value: typ},
			"type":         &types.AttributeValueMemberS{Value: typ},
		}
		if u := addUpdate(k.table, key(typePrefix+typ), d.types[typ], set); u != nil {
			actions = append(actions, types.TransactWriteItem{Update: u})
		}
	}
	for _, b := range slices.Sorted(maps.Keys(d.tp)) {
		exp := time.Unix(b*int64(Bucket/time.Second), 0).Add(bucketTTL).Unix()
		set := map[string]types.AttributeValue{spec.AttrTTL: &types.AttributeValueMemberN{Value: strconv.FormatInt(exp, 10)}}
		if u := addUpdate(k.table, key(tpPrefix+strconv.FormatInt(b, 10)), d.tp[b], set); u != nil {
			actions = append(actions, types.TransactWriteItem{Update: u})
		}
	}
	for _, ref := range slices.SortedFunc(maps.Keys(d.batches), byShard) {
		if u := addUpdate(k.table, key(ref.PK()), d.batches[ref], nil); u != nil {
			actions = append(actions, types.TransactWriteItem{Update: u})
		}
	}
	for _, m := range slices.Sorted(maps.Keys(d.waits)) {
		exp := time.Unix((m+1)*60, 0).Add(bucketTTL).Unix()
		set := map[string]types.AttributeValue{spec.AttrTTL: &types.AttributeValueMemberN{Value: strconv.FormatInt(exp, 10)}}
		if u := addUpdate(k.table, key(waitPrefix+strconv.FormatInt(m, 10)), d.waits[m], set); u != nil {
			actions = append(actions, types.TransactWriteItem{Update: u})
		}
	}
	if len(actions) == 1 {
		// Nothing counted changed (heartbeats, say): no need to remember the batch.
		return nil
	}
	err := k.transact(ctx, actions)
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) && len(tce.CancellationReasons) > 0 && aws.ToString(tce.CancellationReasons[0].Code) == "ConditionalCheckFailed" {
		return ErrApplied
	}
	if err != nil {
		return fmt.Errorf("apply counter changes: %w", err)
	}
	k.dropEmptyQueued(ctx, d.global)
	return nil
}

// conflictRetries bounds transact's retries of a transaction cancelled by
// a conflict with another one on the same counter item.
const conflictRetries = 4

// transact writes actions in one transaction. Two deliveries in flight
// at once (the stream's shards are read in parallel) touch the same
// counter items (the global counts, a type's, a batch's shards), and
// DynamoDB cancels one of two transactions that meet on an item
// (TransactionConflict): that one is retried (store.TransactRetrying)
// instead of failing the whole delivery back to the stream. The guard
// keeps a retry exact whatever landed before.
func (k *Keeper) transact(ctx context.Context, actions []types.TransactWriteItem) error {
	return store.TransactRetrying(ctx, k.db, &dynamodb.TransactWriteItemsInput{TransactItems: actions}, conflictRetries+1)
}

// addUpdate builds "ADD a :a, b :b SET ..." for the non-zero changes, with
// set values written only where missing; nil when nothing changes.
func addUpdate(table string, key map[string]types.AttributeValue, add map[string]int64, set map[string]types.AttributeValue) *types.Update {
	names := map[string]string{}
	values := map[string]types.AttributeValue{}
	var adds, sets []string
	i := 0
	for _, a := range slices.Sorted(maps.Keys(add)) {
		if add[a] == 0 {
			continue
		}
		n, v := fmt.Sprintf("#a%d", i), fmt.Sprintf(":a%d", i)
		names[n], values[v] = a, &types.AttributeValueMemberN{Value: strconv.FormatInt(add[a], 10)}
		adds = append(adds, n+" "+v)
		i++
	}
	if len(adds) == 0 {
		return nil
	}
	for j, a := range slices.Sorted(maps.Keys(set)) {
		n, v := fmt.Sprintf("#s%d", j), fmt.Sprintf(":s%d", j)
		names[n], values[v] = a, set[a]
		sets = append(sets, fmt.Sprintf("%s = if_not_exists(%s, %s)", n, n, v))
	}
	expr := "ADD " + strings.Join(adds, ", ")
	if len(sets) > 0 {
		expr += " SET " + strings.Join(sets, ", ")
	}
	return &types.Update{TableName: &table, Key: key, UpdateExpression: &expr, ExpressionAttributeNames: names, ExpressionAttributeValues: values}
}

// dropEmptyQueued removes queued-since attributes that reached zero, so
// the global item holds only minutes in which some queued task's wait
// began. A failure leaves a harmless zero for a later batch to remove.
func (k *Keeper) dropEmptyQueued(ctx context.Context, changed map[string]int64) {
	for a, v := range changed {
		if v >= 0 || !strings.HasPrefix(a, "q#") {
			continue
		}
		_, _ = k.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 &k.table,
			Key:                       map[string]types.AttributeValue{spec.AttrPK: &types.AttributeValueMemberS{Value: globalPK}},
			UpdateExpression:          aws.String("REMOVE #a"),
			ConditionExpression:       aws.String("#a = :zero"),
			ExpressionAttributeNames:  map[string]string{"#a": a},
			ExpressionAttributeValues: map[string]types.AttributeValue{":zero": &types.AttributeValueMemberN{Value: "0"}},
		})
	}
}

// TaskFromImage decodes a stream image; ok is false for items that are not
// tasks (idempotency keys, controls, the counters themselves).
func TaskFromImage(img map[string]types.AttributeValue) (*task.Task, bool, error) {
	pk, _ := img[spec.AttrPK].(*types.AttributeValueMemberS)
	if pk == nil || !strings.HasPrefix(pk.Value, spec.TaskKeyPrefix) {
		return nil, false, nil
	}
	t, err := store.Unmarshal(img)
	if err != nil {
		return nil, false, fmt.Errorf("decode task image: %w", err)
	}
	return t, true, nil
}

// changeOf builds the Change of one stream record from its images (nil or
// empty when absent); ok is false when neither image is a task.
func changeOf(seq string, old, new map[string]types.AttributeValue) (Change, bool, error) {
	c := Change{Seq: seq}
	var err error
	var oldOK, newOK bool
	if len(old) > 0 {
		if c.Old, oldOK, err = TaskFromImage(old); err != nil {
			return c, false, fmt.Errorf("stream record %s: %w", seq, err)
		}
	}
	if len(new) > 0 {
		if c.New, newOK, err = TaskFromImage(new); err != nil {
			return c, false, fmt.Errorf("stream record %s: %w", seq, err)
		}
	}
	if !oldOK && !newOK {
		if g := groupCompleted(old, new); g != nil {
			c.Completed = g
			return c, true, nil
		}
	}
	return c, oldOK || newOK, nil
}
