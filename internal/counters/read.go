package counters

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/triagetype"
)

// MaxTypes bounds the types a Snapshot reads, so /stats stays one small
// read however many types were ever submitted.
const MaxTypes = 100

// Snapshot is the counters at one moment.
type Snapshot struct {
	// Tasks counts retained tasks by status and effective priority: a
	// deleted task (by hand, cleanup or TTL) is no longer counted.
	Tasks map[triagetype.Status]map[triagetype.Priority]int64
	// Types counts retained tasks by type and status: the first MaxTypes
	// types by name; TypesTruncated says there are more.
	Types          map[string]map[triagetype.Status]int64
	TypesTruncated bool
	// Completed and Failed count the tasks that completed or were
	// dead-lettered in the last minute (to the 10 s bucket), whether or
	// not they are still retained.
	Completed, Failed int64
	// OldestQueued is, per effective priority, the minute in which the
	// longest-waiting queued task's wait began (absent: none queued).
	OldestQueued map[triagetype.Priority]time.Time
	// Waits are, per original priority, the waits of the tasks that
	// started in the last WaitWindow (absent: none started): see waits.go.
	Waits map[triagetype.Priority]WaitStats
}

// Read returns the counters: one read of the global item, the throughput
// buckets of the last minute with the wait histograms of the last
// WaitWindow (one BatchGetItem of 11 keys), and the type counters (the by-due "types"
// entries of every shard, then the items), independent of how many tasks
// are retained.
func (k *Keeper) Read(ctx context.Context) (Snapshot, error) {
	snap := Snapshot{Tasks: map[triagetype.Status]map[triagetype.Priority]int64{}, Types: map[string]map[triagetype.Status]int64{}, OldestQueued: map[triagetype.Priority]time.Time{}}
	g, err := k.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &k.table, Key: pkKey(globalPK), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return snap, fmt.Errorf("read counters: %w", err)
	}
	for a, v := range g.Item {
		n := number(v)
		switch parts := strings.Split(a, "#"); {
		case len(parts) == 3 && parts[0] == "s" && n != 0:
			st, p := triagetype.Status(parts[1]), triagetype.Priority(parts[2])
			if snap.Tasks[st] == nil {
				snap.Tasks[st] = map[triagetype.Priority]int64{}
			}
			snap.Tasks[st][p] += n
		case len(parts) == 3 && parts[0] == "q" && n > 0:
			minute, err := strconv.ParseInt(parts[2], 10, 64)
			if err != nil {
				continue
			}
			p, at := triagetype.Priority(parts[1]), time.Unix(minute*60, 0).UTC()
			if old, ok := snap.OldestQueued[p]; !ok || at.Before(old) {
				snap.OldestQueued[p] = at
			}
		}
	}

	now := k.now()
	var keys []map[string]types.AttributeValue
	from := now.Add(-time.Minute).Unix() / int64(Bucket/time.Second)
	for b := from + 1; b <= now.Unix()/int64(Bucket/time.Second); b++ {
		keys = append(keys, pkKey(tpPrefix+strconv.FormatInt(b, 10)))
	}
	// The wait window's minute items ride in the same BatchGetItem.
	keys = append(keys, waitKeys(now)...)
	items, err := k.batchGet(ctx, keys)
	if err != nil {
		return snap, err
	}
	hs := map[triagetype.Priority]*histogram{}
	for _, it := range items {
		if strings.HasPrefix(attrS(it[spec.AttrPK]), waitPrefix) {
			addWaits(hs, it)
			continue
		}
		snap.Completed += number(it["completed"])
		snap.Failed += number(it["failed"])
	}
	snap.Waits = waitStats(hs)

	names, truncated, err := k.typeNames(ctx)
	if err != nil {
		return snap, err
	}
	snap.TypesTruncated = truncated
	keys = keys[:0]
	for _, n := range names {
		keys = append(keys, pkKey(typePrefix+n))
	}
	items, err = k.batchGet(ctx, keys)
	if err != nil {
		return snap, err
	}
	for _, it := range items {
		name := attrS(it["type"])
		counts := map[triagetype.Status]int64{}
		for a, v := range it {
			if st, ok := strings.CutPrefix(a, "s#"); ok && number(v) != 0 {
				counts[triagetype.Status(st)] = number(v)
			}
		}
		if name != "" && len(counts) > 0 {
			snap.Types[name] = counts
		}
	}
	return snap, nil
}

// typeNames lists up to MaxTypes type names, by name, from the by-due
// "types" partitions (one query per shard, in parallel).
func (k *Keeper) typeNames(ctx context.Context) ([]string, bool, error) {
	var mu sync.Mutex
	var names []string
	var firstErr error
	truncated := false
	var wg sync.WaitGroup
	for sh := range k.shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := k.db.Query(ctx, &dynamodb.QueryInput{
				TableName: &k.table, IndexName: aws.String(spec.IndexByDue),
				KeyConditionExpression:    aws.String("#pk = :pk"),
				ExpressionAttributeNames:  map[string]string{"#pk": spec.AttrDuePK},
				ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: TypeClass + "#" + strconv.Itoa(sh)}},
				Limit:                     aws.Int32(MaxTypes),
			})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = fmt.Errorf("list type counters: %w", err)
				}
				return
			}
			truncated = truncated || len(out.LastEvaluatedKey) > 0
			for _, it := range out.Items {
				names = append(names, attrS(it[spec.AttrDueSK]))
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, false, firstErr
	}
	sort.Strings(names)
	if len(names) > MaxTypes {
		names, truncated = names[:MaxTypes], true
	}
	return names, truncated, nil
}

func (k *Keeper) batchGet(ctx context.Context, keys []map[string]types.AttributeValue) ([]map[string]types.AttributeValue, error) {
	var out []map[string]types.AttributeValue
	for start := 0; start < len(keys); start += 100 {
		req := map[string]types.KeysAndAttributes{k.table: {Keys: keys[start:min(start+100, len(keys))], ConsistentRead: aws.Bool(true)}}
		for attempt := 0; len(req) > 0; attempt++ {
			if attempt > 8 {
				return nil, fmt.Errorf("read counters: DynamoDB kept some keys unprocessed")
			}
			if attempt > 0 {
				time.Sleep(time.Duration(attempt*attempt) * 10 * time.Millisecond)
			}
			res, err := k.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, fmt.Errorf("read counters: %w", err)
			}
			out = append(out, res.Responses[k.table]...)
			req = res.UnprocessedKeys
		}
	}
	return out, nil
}

func pkKey(pk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{spec.AttrPK: &types.AttributeValueMemberS{Value: pk}}
}

func number(v types.AttributeValue) int64 {
	if n, ok := v.(*types.AttributeValueMemberN); ok {
		x, _ := strconv.ParseInt(n.Value, 10, 64)
		return x
	}
	return 0
}

func attrS(v types.AttributeValue) string {
	if s, ok := v.(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

// Minute is one minute's completions and dead letters, and the queue
// depths the promoter sampled in it (absent for a minute without a sample).
type Minute struct {
	Start     time.Time                     `json:"start"`
	Completed int64                         `json:"completed"`
	Failed    int64                         `json:"failed"`
	Depth     map[triagetype.Priority]Depth `json:"depth,omitempty"`
}

// MaxHistory is the most minutes History reaches back: the throughput
// buckets live for bucketTTL.
const MaxHistory = int(bucketTTL / time.Minute)

// History returns the completions and dead letters of each of the last
// minutes whole minutes and the current one (oldest first), from the
// throughput buckets, with each minute's sampled queue depths (depth.go):
// 7 small items a minute read by BatchGetItem (an hour is 5 requests of
// up to 100 keys), however many tasks ran or are retained. minutes is
// capped at MaxHistory.
func (k *Keeper) History(ctx context.Context, minutes int) ([]Minute, error) {
	minutes = max(1, min(minutes, MaxHistory))
	per := int64(time.Minute / Bucket)
	nowMin := k.now().Unix() / 60
	first := nowMin - int64(minutes)
	out := make([]Minute, 0, minutes+1)
	var keys []map[string]types.AttributeValue
	for m := first; m <= nowMin; m++ {
		out = append(out, Minute{Start: time.Unix(m*60, 0).UTC()})
		for b := m * per; b < (m+1)*per; b++ {
			keys = append(keys, pkKey(tpPrefix+strconv.FormatInt(b, 10)))
		}
		keys = append(keys, pkKey(depthPrefix+strconv.FormatInt(m, 10)))
	}
	items, err := k.batchGet(ctx, keys)
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		pk := attrS(it[spec.AttrPK])
		if ms, ok := strings.CutPrefix(pk, depthPrefix); ok {
			if m, err := strconv.ParseInt(ms, 10, 64); err == nil && m >= first && m-first < int64(len(out)) {
				out[m-first].Depth = depthOf(it)
			}
			continue
		}
		b, err := strconv.ParseInt(strings.TrimPrefix(pk, tpPrefix), 10, 64)
		if err != nil {
			continue
		}
		if i := b/per - first; i >= 0 && i < int64(len(out)) {
			out[i].Completed += number(it["completed"])
			out[i].Failed += number(it["failed"])
		}
	}
	return out, nil
}
