package stats_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/internal/stats"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/localstack/stacktest"
)

func TestMain(m *testing.M) { stacktest.Main(m) }

// fixture is one env with a store whose clock stands still at now, so ages
// and the one-minute throughput window are exact.
type fixture struct {
	env    *stacktest.Env
	now    time.Time
	store  *store.Store
	queues *queue.Queues
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	env := stacktest.New(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	q, err := queue.Resolve(context.Background(), env.SQS, env.Spec, env.QueueURLs, env.DLQURLs)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{
		env: env, now: now, queues: q,
		store: store.New(env.DynamoDB, env.Spec.Table.Name, store.WithClock(func() time.Time { return now })),
	}
}

// seed describes one task of a known workload. since is how long before
// now it entered its status; enqueued is how long before now it was first
// queued (negative: never, so EnqueuedAt stays unset).
type seed struct {
	typ      string
	prio     task.Priority
	status   task.Status
	since    time.Duration
	enqueued time.Duration
}

func (f *fixture) create(t *testing.T, s seed) *task.Task {
	t.Helper()
	created := f.now.Add(-s.since - time.Minute)
	tk := &task.Task{
		ID: task.NewID(created), Type: s.typ, Priority: s.prio, EffectivePriority: s.prio,
		Status: s.status, MaxAttempts: 3, TimeoutSeconds: 30,
		CreatedAt: created, WaitingSince: f.now.Add(-s.since), Version: 1, DispatchVersion: 1,
	}
	if s.enqueued >= 0 {
		at := f.now.Add(-s.enqueued)
		tk.EnqueuedAt = &at
	}
	switch s.status {
	case task.Scheduled:
		at := f.now.Add(time.Hour)
		tk.RunAt, tk.DispatchVersion = &at, task.NoMessage
	case task.Retrying:
		at := f.now.Add(30 * time.Second)
		tk.RetryAt = &at
	}
	if _, created, err := f.store.Create(context.Background(), tk); err != nil || !created {
		t.Fatalf("create %+v: created %v, %v", s, created, err)
	}
	return tk
}

// collect polls Collect until the queue figures are want (SQS counts are
// approximate), and returns the last stats.
func (f *fixture) collect(t *testing.T, want map[task.Priority]stats.Queue) stats.Stats {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := stats.Collect(context.Background(), f.store, f.queues)
		if err != nil {
			t.Fatalf("Collect: %v", err)
		}
		if maps.Equal(st.Queues, want) || time.Now().After(deadline) {
			return st
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestCollectEmpty(t *testing.T) {
	f := newFixture(t)
	zero := map[task.Priority]stats.Queue{task.High: {}, task.Medium: {}, task.Low: {}}
	st := f.collect(t, zero)
	if !maps.Equal(st.Queues, zero) {
		t.Errorf("Queues = %+v, want all three priorities at zero", st.Queues)
	}
	wantStatuses := map[task.Status]int{}
	for _, s := range task.Statuses() {
		wantStatuses[s] = 0
	}
	if !maps.Equal(st.Statuses, wantStatuses) {
		t.Errorf("Statuses = %v, want every status at 0", st.Statuses)
	}
	if len(st.Types) != 0 || st.Throughput != (stats.Throughput{}) {
		t.Errorf("Types = %v, Throughput = %+v; want none", st.Types, st.Throughput)
	}
	if !st.GeneratedAt.Equal(f.now) || st.GeneratedAt.Location() != time.UTC {
		t.Errorf("GeneratedAt = %v, want the store's clock %v in UTC", st.GeneratedAt, f.now)
	}
}

func TestCollectCountsAKnownWorkload(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s := time.Second
	workload := []seed{
		// high: three queued (oldest queued 300 s ago), one executing,
		// two completed within the minute, one dead-lettered before it.
		{"email", task.High, task.Queued, 300 * s, 300 * s},
		{"email", task.High, task.Queued, 100 * s, 100 * s},
		{"resize", task.High, task.Queued, 5 * s, 5 * s},
		{"resize", task.High, task.Executing, 20 * s, 40 * s},
		{"email", task.High, task.Completed, 10 * s, 50 * s},
		{"resize", task.High, task.Completed, 50 * s, 90 * s},
		{"email", task.High, task.DeadLetter, 2 * time.Minute, 3 * time.Minute},
		// medium: nothing queued; scheduled, retrying, old completed,
		// cancelled, and one dead-lettered within the minute.
		{"email", task.Medium, task.Scheduled, 10 * s, -1},
		{"resize", task.Medium, task.Scheduled, 20 * s, -1},
		{"email", task.Medium, task.Retrying, 15 * s, 60 * s},
		{"email", task.Medium, task.Completed, 3 * time.Minute, 4 * time.Minute},
		{"resize", task.Medium, task.Cancelled, 30 * s, 40 * s},
		{"resize", task.Medium, task.Cancelled, 90 * s, -1},
		{"email", task.Medium, task.DeadLetter, 20 * s, 80 * s},
		// low: one queued task that never recorded enqueued_at (its age
		// falls back to created_at), one completed and one dead-lettered
		// within the minute.
		{"report", task.Low, task.Queued, 42 * s, -1},
		{"report", task.Low, task.Completed, 59 * s, 70 * s},
		{"report", task.Low, task.DeadLetter, 30 * s, 45 * s},
	}
	var lowQueued *task.Task
	for _, sd := range workload {
		tk := f.create(t, sd)
		if sd.prio == task.Low && sd.status == task.Queued {
			lowQueued = tk
		}
	}
	// A type whose only task was deleted is still registered, but has no counts.
	ghost := f.create(t, seed{"ghost", task.Low, task.Completed, 10 * time.Minute, 11 * time.Minute})
	if err := f.store.Delete(ctx, ghost); err != nil {
		t.Fatal(err)
	}

	// Messages: high 2 visible + 1 in flight; medium 1 delayed; low 2 in the DLQ.
	for i := range 3 {
		if _, err := f.queues.Send(ctx, task.High, fmt.Sprint("h", i), 0); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := f.queues.Receive(ctx, task.High, 1, time.Second, time.Minute); err != nil || len(got) != 1 {
		t.Fatalf("Receive = %d, %v", len(got), err)
	}
	if _, err := f.queues.Send(ctx, task.Medium, "m", 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := f.queues.SendDLQ(ctx, task.Low, fmt.Sprint("dead", i), "test"); err != nil {
			t.Fatal(err)
		}
	}

	wantQueues := map[task.Priority]stats.Queue{
		task.High:   {Depth: 2, InFlight: 1, OldestAgeSeconds: 300},
		task.Medium: {Delayed: 1},
		task.Low:    {DLQDepth: 2, OldestAgeSeconds: 42}, // waiting 42 s, though created a minute before
	}
	if got := f.now.Sub(lowQueued.CreatedAt).Seconds(); got != 102 {
		t.Fatalf("fixture: low queued task created %v s ago, want 102", got)
	}
	st := f.collect(t, wantQueues)

	if !maps.Equal(st.Queues, wantQueues) {
		t.Errorf("Queues =\n%+v\nwant\n%+v", st.Queues, wantQueues)
	}
	wantStatuses := map[task.Status]int{
		task.Scheduled: 2, task.Queued: 4, task.Executing: 1, task.Retrying: 1,
		task.Completed: 4, task.Cancelled: 2, task.DeadLetter: 3,
	}
	if !maps.Equal(st.Statuses, wantStatuses) {
		t.Errorf("Statuses = %v, want %v", st.Statuses, wantStatuses)
	}
	wantTypes := map[string]map[task.Status]int{
		"email":  {task.Queued: 2, task.Completed: 2, task.DeadLetter: 2, task.Scheduled: 1, task.Retrying: 1},
		"resize": {task.Queued: 1, task.Executing: 1, task.Completed: 1, task.Scheduled: 1, task.Cancelled: 2},
		"report": {task.Queued: 1, task.Completed: 1, task.DeadLetter: 1},
	}
	if got := slices.Sorted(maps.Keys(st.Types)); !slices.Equal(got, []string{"email", "report", "resize"}) {
		t.Errorf("types %v, want email, report, resize (ghost has no tasks left)", got)
	}
	for typ, want := range wantTypes {
		if !maps.Equal(st.Types[typ], want) {
			t.Errorf("Types[%s] = %v, want %v", typ, st.Types[typ], want)
		}
	}
	// Within the last minute: completed 10 s, 50 s (high) and 59 s (low)
	// ago, not 3 min; dead-lettered 20 s (medium) and 30 s (low) ago, not 2 min.
	if want := (stats.Throughput{CompletedLastMinute: 3, FailedLastMinute: 2}); st.Throughput != want {
		t.Errorf("Throughput = %+v, want %+v", st.Throughput, want)
	}
}

// The oldest age follows the oldest queued task as tasks leave the queue.
func TestCollectOldestAgeTracksTheHeadOfTheQueue(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	var queued []*task.Task
	for _, ago := range []time.Duration{400 * time.Second, 250 * time.Second, 7 * time.Second} {
		queued = append(queued, f.create(t, seed{"echo", task.Medium, task.Queued, ago, ago}))
	}
	zero := map[task.Priority]stats.Queue{task.High: {}, task.Low: {}}
	for i, want := range []float64{400, 250, 7, 0} {
		if i > 0 {
			// The oldest one starts running.
			if _, err := f.store.Transition(ctx, queued[i-1], task.Executing, nil); err != nil {
				t.Fatal(err)
			}
		}
		wantQueues := maps.Clone(zero)
		wantQueues[task.Medium] = stats.Queue{OldestAgeSeconds: want}
		st := f.collect(t, wantQueues)
		if got := st.Queues[task.Medium].OldestAgeSeconds; got != want {
			t.Fatalf("after %d started: medium oldest age %v s, want %v s", i, got, want)
		}
		if st.Statuses[task.Queued] != 3-i || st.Statuses[task.Executing] != i {
			t.Fatalf("after %d started: %d queued, %d executing", i, st.Statuses[task.Queued], st.Statuses[task.Executing])
		}
	}
}

func TestCollectReturnsStoreAndQueueErrors(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	gone := map[task.Priority]string{}
	for p, u := range f.env.QueueURLs {
		gone[p] = u + "-gone"
	}
	missingQueues, err := queue.Resolve(ctx, f.env.SQS, f.env.Spec, gone, f.env.DLQURLs)
	if err != nil {
		t.Fatal(err)
	}
	missingTable := store.New(f.env.DynamoDB, f.env.Spec.Table.Name+"-gone")
	tests := []struct {
		name   string
		store  stats.Store
		queues stats.Queues
		as     any
	}{
		{"queues missing", f.store, missingQueues, new(*sqstypes.QueueDoesNotExist)},
		{"table missing", missingTable, f.queues, new(*ddbtypes.ResourceNotFoundException)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := stats.Collect(ctx, tc.store, tc.queues)
			if err == nil || !errors.As(err, tc.as) {
				t.Fatalf("Collect err = %v, want one wrapping %T", err, tc.as)
			}
		})
	}
}

// GET /stats serves Stats as JSON; these names are the API's.
func TestStatsJSONFieldNames(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	st := stats.Stats{
		Queues:      map[task.Priority]stats.Queue{task.High: {Depth: 1, InFlight: 2, Delayed: 3, DLQDepth: 4, OldestAgeSeconds: 5.5}},
		Statuses:    map[task.Status]int{task.DeadLetter: 6},
		Types:       map[string]map[task.Status]int{"echo": {task.Completed: 7}},
		Throughput:  stats.Throughput{CompletedLastMinute: 8, FailedLastMinute: 9},
		GeneratedAt: at,
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"queues":{"high":{"depth":1,"in_flight":2,"delayed":3,"dlq_depth":4,"oldest_age_seconds":5.5}},` +
		`"statuses":{"dead_letter":6},"types":{"echo":{"completed":7}},` +
		`"throughput":{"completed_last_minute":8,"failed_last_minute":9},"generated_at":"2026-01-02T03:04:05Z"}`
	if string(b) != want {
		t.Fatalf("JSON =\n%s\nwant\n%s", b, want)
	}
}
