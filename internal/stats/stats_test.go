package stats_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"testing"
	"time"

	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/triagehq/triage/internal/counters"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/internal/stats"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

func TestMain(m *testing.M) { stacktest.Main(m) }

// seed is one task of a known workload: since is how long before now it
// entered its status.
type seed struct {
	typ    string
	prio   triagetype.Priority
	status triagetype.Status
	since  time.Duration
}

// A known workload, written straight to the table, gives exact figures
// once the stream-kept counters catch up: statuses, types, throughput over
// the last minute, and the oldest queued age as the upper bound the
// counters' minute buckets give.
func TestCollectCountsAKnownWorkload(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	stacktest.RunCounters(t, a)
	ctx := context.Background()
	now := time.Now().UTC()
	seeds := []seed{
		{"echo", triagetype.High, triagetype.Completed, 10 * time.Second},
		{"echo", triagetype.High, triagetype.Completed, 20 * time.Second},
		{"echo", triagetype.Medium, triagetype.Completed, 5 * time.Minute}, // outside the last minute
		{"fail", triagetype.Low, triagetype.DeadLetter, 30 * time.Second},
		{"fail", triagetype.Low, triagetype.DeadLetter, 40 * time.Second},
		{"echo", triagetype.Low, triagetype.Queued, 7 * time.Minute},
		{"echo", triagetype.Low, triagetype.Queued, time.Minute},
		{"echo", triagetype.High, triagetype.Queued, 3 * time.Second},
		{"sleep", triagetype.Medium, triagetype.Executing, 2 * time.Second},
		{"sleep", triagetype.Medium, triagetype.Retrying, 2 * time.Second},
		{"later", triagetype.Low, triagetype.Scheduled, time.Second},
		{"echo", triagetype.Medium, triagetype.Cancelled, time.Hour},
	}
	for _, sd := range seeds {
		at := now.Add(-sd.since)
		tk := &task.Task{
			ID: task.NewID(at), Type: sd.typ, Priority: sd.prio, EffectivePriority: sd.prio, Status: sd.status,
			MaxAttempts: 3, TimeoutSeconds: 30, CreatedAt: at.Add(-time.Minute), WaitingSince: at, Version: 1, DispatchVersion: 1,
		}
		switch sd.status {
		case triagetype.Completed, triagetype.DeadLetter, triagetype.Cancelled:
			tk.CompletedAt = &at
		case triagetype.Scheduled:
			later := now.Add(time.Hour)
			tk.RunAt, tk.DispatchVersion = &later, task.NoMessage
		case triagetype.Retrying:
			soon := now.Add(time.Minute)
			tk.RetryAt = &soon
		}
		if _, _, err := a.Store.Create(ctx, tk); err != nil {
			t.Fatal(err)
		}
	}
	var st stats.Stats
	deadline := time.Now().Add(20 * time.Second)
	for {
		var err error
		if st, err = stats.Collect(ctx, a.Counters, a.Queues, now); err != nil {
			t.Fatal(err)
		}
		total := 0
		for _, n := range st.Statuses {
			total += n
		}
		if total == len(seeds) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	wantStatuses := map[triagetype.Status]int{triagetype.Completed: 3, triagetype.DeadLetter: 2, triagetype.Queued: 3, triagetype.Executing: 1, triagetype.Retrying: 1, triagetype.Scheduled: 1, triagetype.Cancelled: 1}
	for _, s := range triagetype.Statuses() {
		if st.Statuses[s] != wantStatuses[s] {
			t.Errorf("status %s: %d, want %d (all: %v)", s, st.Statuses[s], wantStatuses[s], st.Statuses)
		}
	}
	wantTypes := map[string]map[triagetype.Status]int{
		"echo":  {triagetype.Completed: 3, triagetype.Queued: 3, triagetype.Cancelled: 1},
		"fail":  {triagetype.DeadLetter: 2},
		"sleep": {triagetype.Executing: 1, triagetype.Retrying: 1},
		"later": {triagetype.Scheduled: 1},
	}
	if !maps.EqualFunc(st.Types, wantTypes, func(a, b map[triagetype.Status]int) bool { return maps.Equal(a, b) }) {
		t.Errorf("types %v, want %v", st.Types, wantTypes)
	}
	if st.Throughput != (stats.Throughput{CompletedLastMinute: 2, FailedLastMinute: 2}) {
		t.Errorf("throughput %+v, want 2 completed and 2 failed in the last minute", st.Throughput)
	}
	// Oldest queued low task: its wait began 7 min ago; the counters keep
	// the minute, so the age is an upper bound within 60 s, and Collect
	// rounds it up to a whole second, so the bound's end is included.
	if got := st.Queues[triagetype.Low].OldestAgeSeconds; got < 420 || got > 480 {
		t.Errorf("oldest low age %.0f s, want in [420, 480]", got)
	}
	if got := st.Queues[triagetype.High].OldestAgeSeconds; got < 3 || got > 63 {
		t.Errorf("oldest high age %.0f s, want in [3, 63]", got)
	}
	if got := st.Queues[triagetype.Medium].OldestAgeSeconds; got != 0 {
		t.Errorf("oldest medium age %.0f s, want 0: none queued", got)
	}
}

// The counters' wait percentiles reach /stats per priority, in seconds.
func TestCollectShowsWaitPercentiles(t *testing.T) {
	env := stacktest.New(t)
	q, err := queue.Resolve(context.Background(), env.SQS, env.Spec, env.QueueURLs, env.DLQURLs)
	if err != nil {
		t.Fatal(err)
	}
	snap := counters.Snapshot{Waits: map[triagetype.Priority]counters.WaitStats{triagetype.High: {Count: 40, P50: 16 * time.Millisecond, P99: 2048 * time.Millisecond}}}
	st, err := stats.Collect(context.Background(), fixedCounters{snap}, q, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if h := st.Queues[triagetype.High]; h.Waits != 40 || h.WaitP50Seconds != 0.016 || h.WaitP99Seconds != 2.048 {
		t.Fatalf("high queue %+v, want 40 waits, p50 0.016 s, p99 2.048 s", h)
	}
	if l := st.Queues[triagetype.Low]; l.Waits != 0 || l.WaitP50Seconds != 0 || l.WaitP99Seconds != 0 {
		t.Fatalf("low queue %+v, want no waits", l)
	}
}

type fixedCounters struct{ snap counters.Snapshot }

func (f fixedCounters) Read(context.Context) (counters.Snapshot, error) { return f.snap, nil }

type failingCounters struct{ err error }

func (f failingCounters) Read(context.Context) (counters.Snapshot, error) {
	return counters.Snapshot{}, f.err
}

func TestCollectReturnsCounterAndQueueErrors(t *testing.T) {
	env := stacktest.New(t)
	ctx := context.Background()
	q, err := queue.Resolve(ctx, env.SQS, env.Spec, env.QueueURLs, env.DLQURLs)
	if err != nil {
		t.Fatal(err)
	}
	gone := map[triagetype.Priority]string{}
	for p, u := range env.QueueURLs {
		gone[p] = u + "-gone"
	}
	missingQueues, err := queue.Resolve(ctx, env.SQS, env.Spec, gone, env.DLQURLs)
	if err != nil {
		t.Fatal(err)
	}
	okCounters := counters.New(env.DynamoDB, env.Spec.Table.Name, store.New(env.DynamoDB, env.Spec.Table.Name).Shards())
	missingTable := counters.New(env.DynamoDB, env.Spec.Table.Name+"-gone", 1)
	tests := []struct {
		name     string
		counters stats.Counters
		queues   stats.Queues
		as       any
	}{
		{"queues missing", okCounters, missingQueues, new(*sqstypes.QueueDoesNotExist)},
		{"table missing", missingTable, q, new(*ddbtypes.ResourceNotFoundException)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := stats.Collect(ctx, tc.counters, tc.queues, time.Now())
			if err == nil || !errors.As(err, tc.as) {
				t.Fatalf("Collect err = %v, want one wrapping %T", err, tc.as)
			}
		})
	}
	boom := errors.New("boom")
	if _, err := stats.Collect(ctx, failingCounters{boom}, q, time.Now()); !errors.Is(err, boom) {
		t.Fatalf("Collect err = %v, want boom", err)
	}
}

// GET /stats serves Stats as JSON; these names are the API's.
func TestStatsJSONFieldNames(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	st := stats.Stats{
		Queues: map[triagetype.Priority]stats.Queue{triagetype.High: {Depth: 1, InFlight: 2, Delayed: 3, DLQDepth: 4, OldestAgeSeconds: 5.5},
			triagetype.Low: {Waits: 10, WaitP50Seconds: 0.016, WaitP99Seconds: 16.384}},
		Statuses:    map[triagetype.Status]int{triagetype.DeadLetter: 6},
		Types:       map[string]map[triagetype.Status]int{"echo": {triagetype.Completed: 7}},
		Throughput:  stats.Throughput{CompletedLastMinute: 8, FailedLastMinute: 9},
		GeneratedAt: at,
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"queues":{"high":{"depth":1,"in_flight":2,"delayed":3,"dlq_depth":4,"oldest_age_seconds":5.5},` +
		`"low":{"depth":0,"in_flight":0,"delayed":0,"dlq_depth":0,"oldest_age_seconds":0,"waits":10,"wait_p50_seconds":0.016,"wait_p99_seconds":16.384}},` +
		`"statuses":{"dead_letter":6},"types":{"echo":{"completed":7}},` +
		`"throughput":{"completed_last_minute":8,"failed_last_minute":9},"generated_at":"2026-01-02T03:04:05Z"}`
	if string(b) != want {
		t.Fatalf("JSON =\n%s\nwant\n%s", b, want)
	}
}
