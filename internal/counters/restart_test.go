package counters_test

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/counters"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// warnings records the poller's warnings.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	msg := r.Message
	r.Attrs(func(a slog.Attr) bool { msg += " " + a.String(); return true })
	w.mu.Lock()
	w.msgs = append(w.msgs, msg)
	w.mu.Unlock()
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }
func (w *warnings) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.msgs)
}

// runPoller starts a counters poller for a that logs its warnings to w and
// returns its stop, which waits for it to end.
func runPoller(a *app.App, w *warnings) (stop func()) {
	p := a.CounterPoller()
	p.Logger = slog.New(w)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Run(ctx); close(done) }()
	return func() { cancel(); <-done }
}

// A poller started again on a stream it has read before (a restarted
// `triage dev` attached to running emulators) resumes after its
// checkpoint: it counts what changed while no poller ran, including the
// removals of a cleanup, so /stats matches the retained tasks. (DynamoDB
// Local's sequence numbers have leading zeros; a checkpoint given back
// without them was refused by GetShardIterator, and the counters stopped.
// A poller that started over from the shard's oldest record would stop
// too: its first batch holds records applied before, so its guard
// refuses the whole batch.) Checkpoints written before guards kept the
// number as given resume as well.
func TestPollerResumesFromItsCheckpoint(t *testing.T) {
	for _, c := range []struct {
		name   string
		legacy bool // the checkpoint holds only the padded number
	}{
		{name: "checkpoint as given"},
		{name: "checkpoint written before raw_seq", legacy: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := stacktest.New(t)
			a := env.App(t, nil)
			submit := func(n int) []*task.Task {
				var out []*task.Task
				for range n {
					r := task.Request{Type: "echo", Priority: triagetype.Low}
					tk, _, err := a.Enqueuer.Submit(context.Background(), r.NewTask(time.Now().UTC(), time.Minute))
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, tk)
				}
				return out
			}

			var w warnings
			t.Cleanup(func() {
				if t.Failed() {
					for _, m := range w.all() {
						t.Log("poller warning:", m)
					}
				}
			})
			stop := runPoller(a, &w)
			first := submit(5)
			settle(t, env, a, "before the restart")
			stop()
			if c.legacy {
				if n := dropRawSeq(t, env); n == 0 {
					t.Fatal("found no shard checkpoint to rewrite")
				}
			}

			// While no poller runs: more tasks, and three of the first
			// cancelled and cleaned up (REMOVE records).
			submit(4)
			for _, tk := range first[:3] {
				if _, err := a.Store.Cancel(context.Background(), tk.ID); err != nil {
					t.Fatal(err)
				}
			}
			if n, err := cleanupAll(t, a, time.Now().Add(time.Second)); err != nil || n != 3 {
				t.Fatalf("cleanup deleted %d tasks (%v), want 3", n, err)
			}

			stop = runPoller(a, &w)
			defer stop()
			got := settle(t, env, a, "after the restart and a cleanup")
			if !maps.Equal(got.tasks, map[string]int64{"queued#low": 6}) {
				t.Fatalf("after the restart the counters hold %v, want 6 queued low tasks", got.tasks)
			}
			if ms := w.all(); len(ms) > 0 {
				t.Errorf("the pollers warned %d times, first: %s", len(ms), ms[0])
			}
		})
	}
}

// dropRawSeq turns the table's shard checkpoints into the form written
// before guards kept the sequence number as given, and counts them.
func dropRawSeq(t *testing.T, env *stacktest.Env) int {
	t.Helper()
	out, err := env.DynamoDB.Scan(context.Background(), &dynamodb.ScanInput{
		TableName:                 &env.Spec.Table.Name,
		FilterExpression:          aws.String("begins_with(#pk, :guard)"),
		ExpressionAttributeNames:  map[string]string{"#pk": spec.AttrPK},
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":guard": &ddbtypes.AttributeValueMemberS{Value: "COUNTS#GUARD#shard:"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range out.Items {
		if _, err := env.DynamoDB.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
			TableName: &env.Spec.Table.Name, Key: map[string]ddbtypes.AttributeValue{spec.AttrPK: it[spec.AttrPK]},
			UpdateExpression: aws.String("REMOVE raw_seq"),
		}); err != nil {
			t.Fatal(err)
		}
	}
	return len(out.Items)
}

// losingStreams is the real stream client, except that its first lose
// GetRecords calls fail as DynamoDB Local failed one under load in a CI
// run: TrimmedDataAccessException, on an iterator that kept failing.
type losingStreams struct {
	counters.Streams
	mu   sync.Mutex
	lose int
	bad  map[string]bool // iterators that failed: they fail again
}

func (l *losingStreams) GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	l.mu.Lock()
	it := aws.ToString(in.ShardIterator)
	fail := l.bad[it]
	if !fail && l.lose > 0 {
		l.lose--
		l.bad[it], fail = true, true
	}
	l.mu.Unlock()
	if fail {
		return nil, &streamtypes.TrimmedDataAccessException{Message: aws.String("The operation attempted to read past the oldest stream record in a shard.")}
	}
	return l.Streams.GetRecords(ctx, in, opts...)
}

// A poller whose shard iterator can no longer be read (trimmed or
// expired) makes a new one from the shard's checkpoint instead of trying
// the same one forever: in one clean-clone CI run `triage dev` published
// no event for 90 s, its poller warning "read past the oldest stream
// record" every pass. The counters then match a recount: nothing is lost
// or counted twice.
func TestPollerReplacesALostIterator(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	var w warnings
	streams := &losingStreams{Streams: dynamodbstreams.NewFromConfig(a.AWS), lose: 2, bad: map[string]bool{}}
	p := &counters.Poller{Keeper: a.Counters, Tables: a.DynamoDB, Streams: streams, Every: 50 * time.Millisecond, Logger: slog.New(&w)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	for range 5 {
		r := task.Request{Type: "echo", Priority: triagetype.Low}
		if _, _, err := a.Enqueuer.Submit(context.Background(), r.NewTask(time.Now().UTC(), time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	got := settle(t, env, a, "after two lost iterators")
	if !maps.Equal(got.tasks, map[string]int64{"queued#low": 5}) {
		t.Fatalf("the counters hold %v, want 5 queued low tasks", got.tasks)
	}
	streams.mu.Lock()
	lost := len(streams.bad)
	streams.mu.Unlock()
	if lost != 2 {
		t.Fatalf("%d iterators failed, want 2 (the poller must have read past them)", lost)
	}
	if n := len(w.all()); n < 2 {
		t.Errorf("%d warnings, want one per lost iterator at least", n)
	}
}
