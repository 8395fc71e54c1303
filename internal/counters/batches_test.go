package counters_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/counters"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// A run of stream records holding batch members' first finishes, applied
// three times through the Keeper with the app's hook (flow's
// ShardsCounted): the first delivery counts the members and then fails in
// the hook (a crash between the counters' write and the report), the
// second is skipped by the guard but runs the hook, which completes the
// batch and creates its callback, the third changes nothing. Each member
// is counted once; a record of a member that finished before (it keeps
// batch_counted) is not counted at all; one callback is created.
func TestBatchRunDeliveredTwiceCountsOnce(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	ctx := context.Background()
	h, err := a.Flow.CreateBatch(ctx, &triagetype.SubmitRequest{Type: "report", Payload: json.RawMessage(`{"r":1}`)}, task.KnownTypes{})
	if err != nil {
		t.Fatal(err)
	}
	var members []*task.Task
	for range 3 {
		r := task.Request{Type: "member", BatchID: h.ID}
		members = append(members, r.NewTask(time.Now().UTC(), 15*time.Minute))
	}
	for _, res := range a.Enqueuer.SubmitBatch(ctx, members) {
		if res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	if err := a.Flow.Seal(ctx, h.ID); err != nil {
		t.Fatal(err)
	}
	messages := queued(t, a)
	// The members' first finishes, as the stream gives them: the old and
	// the new image of each cancel.
	var changes []counters.Change
	for i, m := range members {
		old, err := a.Store.Get(ctx, m.ID)
		if err != nil {
			t.Fatal(err)
		}
		done, err := a.Store.Cancel(ctx, m.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !done.BatchCounted || old.BatchCounted {
			t.Fatalf("member %d: batch_counted %v before its cancel and %v after; want false, then true", i, old.BatchCounted, done.BatchCounted)
		}
		changes = append(changes, counters.Change{Seq: strconv.Itoa(1000 + i), Old: old, New: done})
	}
	// A later finish of a member counted before (retried from dead_letter).
	again, before := changes[0].New.Clone(), changes[0].New.Clone()
	before.Status, before.Version = triagetype.Queued, again.Version+1
	again.Version += 2
	changes = append(changes, counters.Change{Seq: "1003", Old: before, New: again})

	calls := 0
	a.Counters.OnBatchShards(func(ctx context.Context, refs []store.ShardRef) error {
		if calls++; calls == 1 {
			return errors.New("killed before the report")
		}
		return a.Flow.ShardsCounted(ctx, refs)
	})
	guard := func(first, _ string) counters.Guard { return counters.Guard{Key: "test:" + first} }
	if err := a.Counters.Apply(ctx, changes, guard); err == nil {
		t.Fatal("a failed hook did not fail the delivery")
	}
	if sum := shardSum(t, a, h.ID); sum.Done != 3 || sum.Cancelled != 3 {
		t.Fatalf("after the first delivery the shards hold %+v, want 3 done, 3 cancelled", sum)
	}
	if b, err := a.Flow.Batch(ctx, h.ID); err != nil || b.State != triagetype.BatchSealed {
		t.Fatalf("after a delivery whose hook failed: %+v, %v; want the batch sealed, not completed", b, err)
	}
	var first *triagetype.Batch
	for i := range 2 {
		if err := a.Counters.Apply(ctx, changes, guard); err != nil {
			t.Fatalf("delivery %d: %v", i+2, err)
		}
		if sum := shardSum(t, a, h.ID); sum.Done != 3 || sum.Cancelled != 3 {
			t.Fatalf("after delivery %d the shards hold %+v, want 3 done, 3 cancelled", i+2, sum)
		}
		b, err := a.Flow.Batch(ctx, h.ID)
		want := triagetype.BatchProgress{Total: 3, Done: 3, Cancelled: 3}
		if err != nil || b.State != triagetype.BatchCompleted || b.Progress != want || b.CallbackID == "" {
			t.Fatalf("after delivery %d: %+v, %v; want completed with %+v and a callback", i+2, b, err, want)
		}
		if first == nil {
			first = b
		} else if b.CallbackID != first.CallbackID || !b.CompletedAt.Equal(*first.CompletedAt) {
			t.Fatalf("the third delivery completed the batch again: %+v, then %+v", first, b)
		}
	}
	if calls != 3 {
		t.Fatalf("the hook ran %d times, want once per delivery (3)", calls)
	}
	cb, err := a.Store.Get(ctx, first.CallbackID)
	if err != nil || cb.Type != "report" || cb.Version != 1 {
		t.Fatalf("callback %+v, %v; want a report task written once", cb, err)
	}
	if n := queued(t, a); n != messages+1 {
		t.Fatalf("%d messages queued after the deliveries, %d before; want one more: the callback's", n, messages)
	}
}

// shardSum adds up every shard of batch id.
func shardSum(t *testing.T, a *app.App, id string) store.BatchShard {
	t.Helper()
	shards, err := a.Store.BatchShardsOf(context.Background(), id, store.BatchShards)
	if err != nil {
		t.Fatal(err)
	}
	return store.SumShards(shards)
}

// queued counts the messages on every priority queue.
func queued(t *testing.T, a *app.App) int {
	t.Helper()
	n := 0
	for _, p := range triagetype.Priorities() {
		d, err := a.Queues.Depth(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		n += d.Visible + d.InFlight + d.Delayed
	}
	return n
}

// countedDB counts the Keeper's transactions on the real client.
type countedDB struct {
	counters.DynamoDB
	transactions atomic.Int64
}

func (c *countedDB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.transactions.Add(1)
	return c.DynamoDB.TransactWriteItems(ctx, in, opts...)
}

// A Poller with a batching window applies the records of a burst of
// submits in one run per window the burst spans (plus one), as
// the Lambda trigger does, and counts them exactly; without one it would
// apply each read at once.
func TestPollerWindowGathersARun(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	db := &countedDB{DynamoDB: a.DynamoDB}
	k := counters.New(db, a.Config.Table, a.Store.Shards())
	p := &counters.Poller{Keeper: k, Tables: a.DynamoDB, Streams: dynamodbstreams.NewFromConfig(a.AWS), Every: 50 * time.Millisecond, Window: 1500 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	const n = 20
	began := time.Now()
	for range n {
		r := task.Request{Type: "echo"}
		if res := a.Enqueuer.SubmitBatch(ctx, []*task.Task{r.NewTask(time.Now().UTC(), 15*time.Minute)})[0]; res.Err != nil {
			t.Fatal(res.Err)
		}
		time.Sleep(20 * time.Millisecond) // separate writes, read by separate passes
	}
	// The burst's own length, not an assumed one, sets how many windows it
	// can straddle: one run per window it spans, plus one.
	burst := time.Since(began)
	most := int64(burst/p.Window) + 2
	deadline := time.Now().Add(30 * time.Second)
	for {
		snap, err := k.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := int64(0)
		for _, v := range snap.Tasks[triagetype.Queued] {
			got += v
		}
		if got == n {
			break
		}
		if got > n || time.Now().After(deadline) {
			t.Fatalf("%d queued tasks counted, want %d", got, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if runs := db.transactions.Load(); runs < 1 || runs > most {
		t.Fatalf("%d counter transactions for a burst of %d submits over %v, want 1 to %d (one run per window it spans)", runs, n, burst, most)
	}
}
