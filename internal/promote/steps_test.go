package promote_test

import (
	"context"
	"maps"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/enqueue"
	"github.com/triagehq/triage/internal/promote"
	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// taskWrites counts the write requests made on task items and the write
// units DynamoDB reports for them.
type taskWrites struct {
	store.DynamoDB
	mu     sync.Mutex
	writes int
	units  float64 // on the table, not its indexes (the step is not projected)
	other  int     // transactions and puts on task items
}

func isTask(key map[string]ddbtypes.AttributeValue) bool {
	pk, _ := key[spec.AttrPK].(*ddbtypes.AttributeValueMemberS)
	return pk != nil && strings.HasPrefix(pk.Value, spec.TaskKeyPrefix)
}

func (c *taskWrites) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	in.ReturnConsumedCapacity = ddbtypes.ReturnConsumedCapacityIndexes
	out, err := c.DynamoDB.UpdateItem(ctx, in, opts...)
	if isTask(in.Key) {
		c.mu.Lock()
		c.writes++
		if err == nil && out.ConsumedCapacity != nil && out.ConsumedCapacity.Table != nil {
			c.units += aws.ToFloat64(out.ConsumedCapacity.Table.CapacityUnits)
		}
		c.mu.Unlock()
	}
	return out, err
}

func (c *taskWrites) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if isTask(in.Item) {
		c.mu.Lock()
		c.other++
		c.mu.Unlock()
	}
	return c.DynamoDB.PutItem(ctx, in, opts...)
}

func (c *taskWrites) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.mu.Lock()
	c.other++
	c.mu.Unlock()
	return c.DynamoDB.TransactWriteItems(ctx, in, opts...)
}

// rawItem reads a task's item as stored.
func rawItem(t *testing.T, env *stacktest.Env, id string) map[string]ddbtypes.AttributeValue {
	t.Helper()
	out, err := env.DynamoDB.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &env.Spec.Table.Name,
		Key: map[string]ddbtypes.AttributeValue{spec.AttrPK: &ddbtypes.AttributeValueMemberS{Value: spec.TaskKeyPrefix + id}}, ConsistentRead: aws.Bool(true)})
	if err != nil || out.Item == nil {
		t.Fatalf("read task %s: %v", id, err)
	}
	return out.Item
}

// A promoted task keeps each step (from, to, at, waited) on its record,
// written by the one UpdateItem that promotes it: no request of its own,
// and, for a task with a small payload, not one write unit more than the
// promotion costs without it.
func TestPromotionStepsRideOnThePromotingUpdate(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	payload := []byte(`{"order":"` + strings.Repeat("x", 200) + `"}`)
	low := submitReq(t, a, task.Request{Type: "lo", Priority: "low", Payload: payload}, time.Minute)

	// The promoter on a store whose task writes are counted.
	db := &taskWrites{DynamoDB: env.DynamoDB}
	st := store.New(db, env.Spec.Table.Name, store.WithShards(a.Store.Shards()), store.WithBlobs(a.Blobs))
	p := promote.New(st, enqueue.New(st, a.Queues), a.Queues, promote.Options{LowAfter: time.Second, MediumAfter: time.Second})

	var units []float64
	var sizes []int
	for i, want := range []triagetype.Priority{triagetype.Medium, triagetype.High} {
		time.Sleep(1100 * time.Millisecond)
		before := rawItem(t, env, low.ID)
		db.mu.Lock()
		db.writes, db.units, db.other = 0, 0, 0
		db.mu.Unlock()
		start := time.Now()
		rep, err := p.RunOnce(context.Background())
		if err != nil || rep.Promoted[want] != 1 {
			t.Fatalf("run %d: %+v %v, want one task promoted to %s", i+1, rep, err, want)
		}
		after := rawItem(t, env, low.ID)
		steps := store.ItemSize(map[string]ddbtypes.AttributeValue{"promotions": after["promotions"]})
		bare := maps.Clone(after)
		delete(bare, "promotions")
		db.mu.Lock()
		if db.writes != 1 || db.other != 0 {
			t.Fatalf("promotion %d made %d UpdateItems and %d other writes on task items, want exactly one UpdateItem", i+1, db.writes, db.other)
		}
		// What the same update costs without the steps: the larger image, in 1 KB units.
		bareBefore := maps.Clone(before)
		delete(bareBefore, "promotions")
		without := math.Ceil(float64(max(store.ItemSize(bareBefore), store.ItemSize(bare))) / 1024)
		if db.units != without {
			t.Errorf("promotion %d: %v write units reported, want %v as without the steps (item %d -> %d bytes, %d of them the steps)",
				i+1, db.units, without, store.ItemSize(before), store.ItemSize(after), steps)
		}
		units = append(units, db.units)
		db.mu.Unlock()
		sizes = append(sizes, steps)
		if limit := 14 + 36*(i+1); steps > limit {
			t.Errorf("%d steps take %d bytes of the record, over the documented %d", i+1, steps, limit)
		}
		got, err := a.Store.Get(context.Background(), low.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Promotions) != i+1 {
			t.Fatalf("after promotion %d the task records %d steps: %+v", i+1, len(got.Promotions), got.Promotions)
		}
		s := got.Promotions[i]
		if s.To != want || s.From != map[triagetype.Priority]triagetype.Priority{triagetype.Medium: triagetype.Low, triagetype.High: triagetype.Medium}[want] {
			t.Fatalf("step %d: %+v", i+1, s)
		}
		if s.At.Before(start.Add(-time.Second).Truncate(time.Second)) || s.At.After(time.Now()) || s.WaitedMS < 1000 {
			t.Fatalf("step %d at %v waited %d ms; the run started %v, the threshold is 1 s", i+1, s.At, s.WaitedMS, start)
		}
		if pub := got.Public(); len(pub.Promotions) != i+1 || pub.Promotions[i] != s {
			t.Fatalf("public task shows %+v", pub.Promotions)
		}
	}
	t.Logf("promotion write units on the table %v; the steps took %v bytes of the record", units, sizes)
}
