package eventsource_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"

	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/app/promoterapp"
	"github.com/triagehq/triage/internal/blob"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/eventsource"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/promote"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/triageconfig"
	"github.com/triagehq/triage/triagetype"
)

// requestCounter counts the AWS requests of every client built on a
// configuration it is added to, by "<service> <operation>".
type requestCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *requestCounter) add(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("countRequests",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			c.mu.Lock()
			c.n[awsmiddleware.GetServiceID(ctx)+" "+awsmiddleware.GetOperationName(ctx)]++
			c.mu.Unlock()
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
}

func (c *requestCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.n))
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

// dynamoWrites are the DynamoDB operations that bill write units.
var dynamoWrites = []string{"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}

// An idle stack (the local event source on the three queues, the consumer
// function behind it, and the promoter's minute tick) makes no DynamoDB
// write and starts no consumer over 60 s, counted on the SDK clients; its
// only requests are the pollers' long polls and the promoter's reads.
func TestIdleStackWritesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("watches an idle stack for 60 s")
	}
	ctx := context.Background()
	a, src, cnt := countedStack(t)
	p := promoterapp.New(a, promote.Options{Counts: a.Counters})
	// The promoter's first run sweeps everything (and again every
	// promote.FullSweepEvery); the runs between read the counters first.
	before := cnt.snapshot()
	if _, err := p.RunOnce(ctx); err != nil {
		t.Fatalf("promoter's full run: %v", err)
	}
	full := diffOf(before, cnt.snapshot())
	t.Logf("the promoter's full run: %v", full)
	before = cnt.snapshot()
	const idle = 60 * time.Second
	deadline := time.Now().Add(idle)
	ticks := 0
	for tick := 0; time.Now().Before(deadline); tick++ {
		if tick%2 == 0 { // the promoter's tick, twice as often as deployed
			if _, err := p.RunOnce(ctx); err != nil {
				t.Fatalf("promoter tick: %v", err)
			}
			ticks++
		}
		time.Sleep(15 * time.Second)
	}
	diff := diffOf(before, cnt.snapshot())
	t.Logf("requests over %v idle (%d promoter runs): %v; event source %+v", idle, ticks, diff, src.Stats())
	// Between full runs only the schedule ticker queries (its due index,
	// one query a shard): the task sweeps are skipped, as the counters
	// count no task.
	if n, most := diff["DynamoDB Query"], ticks*a.Store.Shards(); n > most || n*4 > full["DynamoDB Query"]*ticks {
		t.Errorf("%d DynamoDB queries by %d idle promoter runs after the full one (%d queries), want at most %d (the schedule ticker's)", n, ticks, full["DynamoDB Query"], most)
	}
	for _, op := range dynamoWrites {
		if n := diff["DynamoDB "+op]; n != 0 {
			t.Errorf("%d DynamoDB %s requests while idle, want none", n, op)
		}
	}
	if st := src.Stats(); st.Invocations != 0 || st.ColdStarts != 0 {
		t.Errorf("idle: %+v, want no invocation and no consumer started", st)
	}
	if diff["SQS ReceiveMessage"] == 0 {
		t.Errorf("no receive counted: the counter sees nothing, so its zeros prove nothing")
	}
}

// countedStack is a new stack's app on SDK clients that cnt counts, with
// the local event source running the consumer function (a handler for
// type "ok") on its queues.
func countedStack(t *testing.T) (*app.App, *eventsource.Source, *requestCounter) {
	t.Helper()
	env := stacktest.New(t)
	cfg, err := triageconfig.FromEnv(env.Getenv(nil))
	if err != nil {
		t.Fatal(err)
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cnt := &requestCounter{n: map[string]int{}}
	awsCfg.APIOptions = append(awsCfg.APIOptions, cnt.add)
	a, err := app.Assemble(context.Background(), cfg, nil, awsCfg, store.NewClient(awsCfg), sqs.NewFromConfig(awsCfg), blob.NewClient(awsCfg))
	if err != nil {
		t.Fatal(err)
	}
	src := source(env, a, stacktest.Registry("ok", handler.Func(func(context.Context, handler.Request) (json.RawMessage, error) {
		return json.RawMessage(`{}`), nil
	})))
	stacktest.Run(t, src)
	return a, src, cnt
}

// diffOf is after minus before, the requests made in between.
func diffOf(before, after map[string]int) map[string]int {
	diff := map[string]int{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			diff[k] = d
		}
	}
	return diff
}

// A task sent to an idle stack costs one invocation and no writes but its
// own: counted on the SDK clients, the submit's put, the claim and the
// completion. The invocation ends before it would register in the worker
// registry (dispatch's eventRegisterAfter), so it writes no worker item,
// no heartbeat and no deregistration. It never long-polls and returns
// once the queues were found empty: the consumer receives at most twice a
// queue, beside the source's own polls.
func TestLoneTaskRequests(t *testing.T) {
	a, src, cnt := countedStack(t)
	for src.Stats().Receives < 3 { // the pollers are up
		time.Sleep(50 * time.Millisecond)
	}
	var diff map[string]int
	var own int64
	// A first task warms the emulator's new table (DynamoDB Local's first
	// writes to it take hundreds of milliseconds, which AWS's do not).
	var st0 eventsource.Stats
	for i := range 2 {
		if i == 1 {
			st0 = src.Stats()
		}
		before, polls := cnt.snapshot(), src.Stats().Receives
		id := submit(t, a, "ok", triagetype.Medium)
		stacktest.WaitStatus(t, a.Store, id, triagetype.Completed, time.Minute)
		for src.Stats().Deleted < int64(i+1) { // the invocation returned
			time.Sleep(50 * time.Millisecond)
		}
		diff = diffOf(before, cnt.snapshot())
		own = int64(diff["SQS ReceiveMessage"]) - (src.Stats().Receives - polls)
	}
	st := src.Stats()
	t.Logf("requests for one task: %v; event source %+v, before it %+v", diff, st, st0)
	if st.Invocations-st0.Invocations != 1 || st.Billed <= st0.Billed {
		t.Errorf("event source %+v after %+v: want one invocation, its billed time counted", st, st0)
	}
	want := map[string]int{"PutItem": 1, "UpdateItem": 2, "DeleteItem": 0, "BatchWriteItem": 0, "TransactWriteItems": 0}
	for _, op := range dynamoWrites {
		if n := diff["DynamoDB "+op]; n != want[op] {
			t.Errorf("DynamoDB %s: %d requests, want %d", op, n, want[op])
		}
	}
	if own > 6 {
		t.Errorf("the consumer received %d times for one task, want at most 6 (a busy receive and one long poll a queue)", own)
	}
}
