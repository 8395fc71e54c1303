package enqueue_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/enqueue"
	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

func TestMain(m *testing.M) {
	if os.Getenv(childAPIEnv) != "" {
		runChildAPI() // the crash test's victim process
		return
	}
	stacktest.Main(m)
}

// window is the direct window the API uses: a task due further away than
// this starts scheduled, with no message.
const window = 15 * time.Minute

type fixture struct {
	env    *stacktest.Env
	store  *store.Store
	queues *queue.Queues
	enq    *enqueue.Enqueuer
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	env := stacktest.New(t)
	f := &fixture{env: env, store: store.New(env.DynamoDB, env.Spec.Table.Name)}
	f.queues = f.resolve(t, nil)
	f.enq = enqueue.New(f.store, f.queues)
	return f
}

// resolve returns queues on f's env in which the priorities in broken name
// queues that do not exist, so every send to them fails.
func (f *fixture) resolve(t *testing.T, broken []triagetype.Priority) *queue.Queues {
	t.Helper()
	urls := maps.Clone(f.env.QueueURLs)
	for _, p := range broken {
		urls[p] += "-gone"
	}
	q, err := queue.Resolve(context.Background(), f.env.SQS, f.env.Spec, urls, f.env.DLQURLs)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func (f *fixture) get(t *testing.T, id string) *task.Task {
	t.Helper()
	tk, err := f.store.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return tk
}

// waitDepth polls p's counts until they equal want.
func (f *fixture) waitDepth(t *testing.T, p triagetype.Priority, want queue.Depth) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := f.queues.Depth(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Depth(%s) = %+v, want %+v", p, got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// noMessages checks that no queue holds any message.
func (f *fixture) noMessages(t *testing.T) {
	t.Helper()
	for _, p := range triagetype.Priorities() {
		f.waitDepth(t, p, queue.Depth{})
	}
}

// take receives exactly n messages from p's queue, deletes them, checks
// nothing else is visible there, and returns their decoded bodies.
func (f *fixture) take(t *testing.T, p triagetype.Priority, n int) []task.Message {
	t.Helper()
	ctx := context.Background()
	var got []task.Message
	deadline := time.Now().Add(15 * time.Second)
	for len(got) < n && time.Now().Before(deadline) {
		msgs, err := f.queues.Receive(ctx, p, queue.MaxBatch, time.Second, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			var tm task.Message
			if err := json.Unmarshal([]byte(m.Body), &tm); err != nil {
				t.Fatalf("message body %q: %v", m.Body, err)
			}
			got = append(got, tm)
			if err := f.queues.Delete(ctx, p, m.ReceiptHandle); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(got) != n {
		t.Fatalf("received %d messages from %s, want %d: %+v", len(got), p, n, got)
	}
	f.waitDepth(t, p, queue.Depth{})
	return got
}

func sortMessages(ms []task.Message) []task.Message {
	slices.SortFunc(ms, func(a, b task.Message) int {
		if c := strings.Compare(a.ID, b.ID); c != 0 {
			return c
		}
		return int(a.Version - b.Version)
	})
	return ms
}

func request(p triagetype.Priority) task.Request {
	return task.Request{Type: "echo", Payload: json.RawMessage(`{"n": 1}`), Priority: p}
}

// newTask builds the task r describes, as the API does.
func newTask(r task.Request, now time.Time) *task.Task { return r.NewTask(now, window) }

func TestBodyNamesTaskVersionAndEffectivePriority(t *testing.T) {
	tests := []struct {
		name string
		t    task.Task
		v    int64
		want string
	}{
		{"fresh task", task.Task{ID: "01A", Priority: triagetype.High, EffectivePriority: triagetype.High}, 1,
			`{"id":"01A","v":1,"p":"high"}`},
		{"promoted task carries its effective priority", task.Task{ID: "01B", Priority: triagetype.Low, EffectivePriority: triagetype.Medium}, 7,
			`{"id":"01B","v":7,"p":"medium"}`},
		{"version given, not the task's own", task.Task{ID: "01C", Priority: triagetype.Low, EffectivePriority: triagetype.Low, Version: 3}, 4,
			`{"id":"01C","v":4,"p":"low"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := enqueue.Body(&tc.t, tc.v)
			if got != tc.want {
				t.Fatalf("Body = %s, want %s", got, tc.want)
			}
			var m task.Message
			if err := json.Unmarshal([]byte(got), &m); err != nil || m != (msgFor(&tc.t, tc.v, tc.t.EffectivePriority)) {
				t.Fatalf("Body decodes to %+v, %v", m, err)
			}
		})
	}
}

func TestSubmitRecordsTaskAndSendsOneMessage(t *testing.T) {
	delay := func(s int) *int { return &s }
	past := time.Now().Add(-time.Hour)
	tests := []struct {
		name    string
		req     task.Request
		delayed bool // the message waits on the queue as delayed
	}{
		{name: "high", req: request(triagetype.High)},
		{name: "medium", req: request(triagetype.Medium)},
		{name: "low", req: request(triagetype.Low)},
		{name: "no priority means medium", req: task.Request{Type: "echo"}},
		{name: "run_at in the past goes at once", req: task.Request{Type: "echo", Priority: "low", RunAt: &past}},
		{name: "delay within the direct window is an SQS delay", req: task.Request{Type: "echo", Priority: "high", DelaySeconds: delay(600)}, delayed: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			tk := tc.req.NewTask(time.Now().UTC(), window)
			saved, created, err := f.enq.Submit(ctx, tk)
			if err != nil || !created {
				t.Fatalf("Submit = created %v, %v", created, err)
			}
			if saved.ID != tk.ID || saved.Status != triagetype.Queued {
				t.Fatalf("Submit returned %s in %s, want %s queued", saved.ID, saved.Status, tk.ID)
			}
			rec := f.get(t, tk.ID)
			if rec.Status != triagetype.Queued || rec.Version != 1 || rec.DispatchVersion != 1 || rec.EffectivePriority != tk.Priority || rec.Type != "echo" {
				t.Fatalf("record: status %s version %d dispatch %d effective %s type %s", rec.Status, rec.Version, rec.DispatchVersion, rec.EffectivePriority, rec.Type)
			}
			for _, p := range triagetype.Priorities() {
				switch {
				case p != tk.EffectivePriority:
					f.waitDepth(t, p, queue.Depth{})
				case tc.delayed:
					f.waitDepth(t, p, queue.Depth{Delayed: 1})
				default:
					msgs := f.take(t, p, 1)
					if want := (msgFor(tk, 1, p)); msgs[0] != want {
						t.Fatalf("message %+v, want %+v", msgs[0], want)
					}
				}
			}
		})
	}
}

func TestSubmitScheduledTaskSendsNoMessage(t *testing.T) {
	delay := func(s int) *int { return &s }
	later := time.Now().Add(3 * time.Hour)
	tests := []struct {
		name string
		req  task.Request
	}{
		{"run_at hours away", task.Request{Type: "echo", Priority: "high", RunAt: &later}},
		{"delay just past the window", task.Request{Type: "echo", Priority: "low", DelaySeconds: delay(int(window/time.Second) + 60)}},
	}
	f := newFixture(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tk := tc.req.NewTask(time.Now().UTC(), window)
			saved, created, err := f.enq.Submit(context.Background(), tk)
			if err != nil || !created {
				t.Fatalf("Submit = created %v, %v", created, err)
			}
			if saved.Status != triagetype.Scheduled {
				t.Fatalf("Submit returned status %s, want scheduled", saved.Status)
			}
			rec := f.get(t, tk.ID)
			if rec.Status != triagetype.Scheduled || rec.DispatchVersion != task.NoMessage || rec.RunAt == nil {
				t.Fatalf("record: status %s dispatch %d run_at %v; want scheduled, no message, run_at set", rec.Status, rec.DispatchVersion, rec.RunAt)
			}
			f.noMessages(t)
		})
	}
}

func TestSubmitIdempotencyKeyReturnsFirstTask(t *testing.T) {
	tests := []struct {
		name   string
		second task.Request
	}{
		{"same request again", task.Request{Type: "echo", Priority: "high", IdempotencyKey: "order-1"}},
		{"different priority and payload", task.Request{Type: "other", Priority: "low", Payload: json.RawMessage(`{"x":2}`), IdempotencyKey: "order-1"}},
		{"would be scheduled", task.Request{Type: "echo", Priority: "medium", DelaySeconds: new(int(3600)), IdempotencyKey: "order-1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			first := task.Request{Type: "echo", Priority: "high", Payload: json.RawMessage(`{"x":1}`), IdempotencyKey: "order-1"}
			a, created, err := f.enq.Submit(ctx, first.NewTask(time.Now().UTC(), window))
			if err != nil || !created {
				t.Fatalf("first Submit = created %v, %v", created, err)
			}
			b, created, err := f.enq.Submit(ctx, tc.second.NewTask(time.Now().UTC(), window))
			if err != nil || created {
				t.Fatalf("second Submit = created %v, %v; want the existing task", created, err)
			}
			if b.ID != a.ID || b.Type != "echo" || b.Priority != triagetype.High || string(b.Payload) != `{"x":1}` {
				t.Fatalf("second Submit returned %s %s %s %s, want the first task %s", b.ID, b.Type, b.Priority, b.Payload, a.ID)
			}
			// One message in all: the first task's.
			if msgs := f.take(t, triagetype.High, 1); msgs[0] != (msgFor(a, 1, triagetype.High)) {
				t.Fatalf("message %+v", msgs[0])
			}
			f.noMessages(t)
		})
	}
}

func TestSubmitUnsentTaskLeavesNothing(t *testing.T) {
	tests := []struct {
		name string
		key  string
	}{
		{"without idempotency key", ""},
		{"with idempotency key: the key is freed", "order-7"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			broken := enqueue.New(f.store, f.resolve(t, []triagetype.Priority{triagetype.Medium}))
			req := task.Request{Type: "echo", Priority: "medium", IdempotencyKey: tc.key}
			tk := req.NewTask(time.Now().UTC(), window)
			saved, created, err := broken.Submit(ctx, tk)
			if !errors.Is(err, enqueue.ErrNotSent) || saved != nil || created {
				t.Fatalf("Submit = %v, created %v, %v; want nil, false, ErrNotSent", saved, created, err)
			}
			if _, err := f.store.Get(ctx, tk.ID); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("Get after failed submit: %v, want ErrNotFound (the record is removed)", err)
			}
			// Submitting again through working queues starts clean.
			again := req.NewTask(time.Now().UTC(), window)
			saved, created, err = f.enq.Submit(ctx, again)
			if err != nil || !created || saved.ID != again.ID {
				t.Fatalf("resubmit = %v, created %v, %v; want a new task", saved, created, err)
			}
			f.take(t, triagetype.Medium, 1)
		})
	}
}

func TestSubmitBatch(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	now := time.Now().UTC()
	pre, _, err := f.enq.Submit(ctx, newTask(task.Request{Type: "echo", Priority: "medium", IdempotencyKey: "seen"}, now))
	if err != nil {
		t.Fatal(err)
	}
	f.take(t, triagetype.Medium, 1)

	var ts []*task.Task
	add := func(r task.Request) *task.Task {
		tk := r.NewTask(now, window)
		ts = append(ts, tk)
		return tk
	}
	want := map[triagetype.Priority][]task.Message{}
	for range 11 { // two send requests
		tk := add(request(triagetype.High))
		want[triagetype.High] = append(want[triagetype.High], msgFor(tk, 1, triagetype.High))
	}
	for range 2 {
		tk := add(request(triagetype.Low))
		want[triagetype.Low] = append(want[triagetype.Low], msgFor(tk, 1, triagetype.Low))
	}
	later := now.Add(2 * time.Hour)
	scheduled := add(task.Request{Type: "echo", Priority: "medium", RunAt: &later})
	dupFirst := add(task.Request{Type: "echo", Priority: "medium", IdempotencyKey: "twice"})
	want[triagetype.Medium] = append(want[triagetype.Medium], msgFor(dupFirst, 1, triagetype.Medium))
	dupSecond := add(task.Request{Type: "echo", Priority: "high", IdempotencyKey: "twice"})
	seen := add(task.Request{Type: "echo", Priority: "low", IdempotencyKey: "seen"})

	res := f.enq.SubmitBatch(ctx, ts)
	if len(res) != len(ts) {
		t.Fatalf("%d results for %d tasks", len(res), len(ts))
	}
	for i, r := range res {
		if r.Err != nil || r.Task == nil {
			t.Fatalf("result %d: %+v", i, r)
		}
		switch ts[i] {
		case dupSecond:
			if r.Created || r.Task.ID != dupFirst.ID {
				t.Errorf("second use of a key in the batch: created %v, task %s; want the first use's task %s", r.Created, r.Task.ID, dupFirst.ID)
			}
		case seen:
			if r.Created || r.Task.ID != pre.ID {
				t.Errorf("key used before the batch: created %v, task %s; want %s", r.Created, r.Task.ID, pre.ID)
			}
		default:
			if !r.Created || r.Task.ID != ts[i].ID {
				t.Errorf("result %d: created %v, task %s; want %s created (results in input order)", i, r.Created, r.Task.ID, ts[i].ID)
			}
		}
	}
	if rec := f.get(t, scheduled.ID); rec.Status != triagetype.Scheduled {
		t.Errorf("scheduled task recorded as %s", rec.Status)
	}
	for _, p := range triagetype.Priorities() {
		got := sortMessages(f.take(t, p, len(want[p])))
		if !slices.Equal(got, sortMessages(want[p])) {
			t.Errorf("%s messages %+v, want %+v", p, got, want[p])
		}
	}
}

// unsendable is a task id SQS refuses in a message body (U+FFFF is not an
// allowed character), so that one entry of a batch send fails.
func unsendable(tk *task.Task) *task.Task {
	tk.ID += "\uffff"
	return tk
}

func TestSubmitBatchDiscardsTasksWhoseSendFailed(t *testing.T) {
	tests := []struct {
		name   string
		broken []triagetype.Priority // priorities whose queue is missing
		// build returns the batch and which of its tasks must fail.
		build func(now time.Time) ([]*task.Task, []bool)
	}{
		{
			name: "queue missing: every task of that priority fails", broken: []triagetype.Priority{triagetype.Low},
			build: func(now time.Time) ([]*task.Task, []bool) {
				var ts []*task.Task
				var fail []bool
				for range 3 {
					ts, fail = append(ts, newTask(request(triagetype.High), now)), append(fail, false)
				}
				for range 12 { // two send requests, both refused
					ts, fail = append(ts, newTask(request(triagetype.Low), now)), append(fail, true)
				}
				return ts, fail
			},
		},
		{
			name: "one message refused in the second request: only its task fails",
			build: func(now time.Time) ([]*task.Task, []bool) {
				var ts []*task.Task
				var fail []bool
				for i := range 13 {
					tk := newTask(request(triagetype.Medium), now)
					if i == 11 {
						tk = unsendable(tk)
					}
					ts, fail = append(ts, tk), append(fail, i == 11)
				}
				return ts, fail
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			enq := enqueue.New(f.store, f.resolve(t, tc.broken))
			ts, fail := tc.build(time.Now().UTC())
			res := enq.SubmitBatch(ctx, ts)
			if len(res) != len(ts) {
				t.Fatalf("%d results for %d tasks", len(res), len(ts))
			}
			sent := map[triagetype.Priority][]task.Message{}
			for i, r := range res {
				if !fail[i] {
					if r.Err != nil || !r.Created || r.Task.ID != ts[i].ID {
						t.Errorf("task %d: %+v, want created", i, r)
					}
					p := ts[i].EffectivePriority
					sent[p] = append(sent[p], msgFor(ts[i], 1, p))
					continue
				}
				if !errors.Is(r.Err, enqueue.ErrNotSent) || r.Task != nil || r.Created {
					t.Errorf("task %d: %+v, want ErrNotSent and no task", i, r)
				}
				if _, err := f.store.Get(ctx, ts[i].ID); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("task %d: Get = %v, want ErrNotFound (record removed)", i, err)
				}
			}
			for _, p := range triagetype.Priorities() {
				if got := sortMessages(f.take(t, p, len(sent[p]))); !slices.Equal(got, sortMessages(sent[p])) {
					t.Errorf("%s messages %+v, want %+v", p, got, sent[p])
				}
			}
		})
	}
}

// A batch item whose idempotency key repeats an earlier item's gets that
// item's task; when that task could not be sent and was removed, the later
// item must fail too, not report a task that no longer exists.
func TestSubmitBatchRepeatedKeyOfUnsentTask(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	enq := enqueue.New(f.store, f.resolve(t, []triagetype.Priority{triagetype.Medium}))
	now := time.Now().UTC()
	first := newTask(task.Request{Type: "echo", Priority: "medium", IdempotencyKey: "k"}, now)
	again := newTask(task.Request{Type: "echo", Priority: "medium", IdempotencyKey: "k"}, now)
	res := enq.SubmitBatch(ctx, []*task.Task{first, again})
	for i, r := range res {
		if !errors.Is(r.Err, enqueue.ErrNotSent) || r.Task != nil || r.Created {
			t.Errorf("item %d: %+v, want ErrNotSent and no task", i, r)
		}
	}
	if _, err := f.store.Get(ctx, first.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get(first) = %v, want ErrNotFound", err)
	}
}

// setup builds a task in a given state for the re-dispatch tests, with its
// first message (if any) already consumed.
type setup func(t *testing.T, f *fixture) *task.Task

func queuedAt(p triagetype.Priority) setup {
	return func(t *testing.T, f *fixture) *task.Task {
		tk, _, err := f.enq.Submit(context.Background(), newTask(request(p), time.Now().UTC()))
		if err != nil {
			t.Fatal(err)
		}
		f.take(t, p, 1)
		return tk
	}
}

func then(s setup, to ...triagetype.Status) setup {
	return func(t *testing.T, f *fixture) *task.Task {
		tk := s(t, f)
		for _, st := range to {
			var err error
			if tk, err = f.store.Transition(context.Background(), tk, st, nil); err != nil {
				t.Fatalf("setup -> %s: %v", st, err)
			}
		}
		return tk
	}
}

func TestRedispatch(t *testing.T) {
	tests := []struct {
		name      string
		start     setup
		to        triagetype.Status
		p         triagetype.Priority
		delay     time.Duration
		apply     func(*task.Task)
		wantErr   error
		newEnqAt  bool // enqueued_at is stamped anew
		wantDelay bool // the message is delayed
	}{
		{name: "queued low promoted to high", start: queuedAt(triagetype.Low), to: triagetype.Queued, p: triagetype.High},
		{name: "dead letter re-queued", start: then(queuedAt(triagetype.Medium), triagetype.DeadLetter), to: triagetype.Queued, p: triagetype.Medium, newEnqAt: true},
		{
			name: "executing to retrying after a delay", start: then(queuedAt(triagetype.Low), triagetype.Executing),
			to: triagetype.Retrying, p: triagetype.Low, delay: 10 * time.Minute, wantDelay: true,
			apply: func(n *task.Task) { n.Error = &triagetype.TaskError{Message: "boom", Retriable: true} },
		},
		{name: "forbidden move: completed to queued", start: then(queuedAt(triagetype.High), triagetype.Executing, triagetype.Completed), to: triagetype.Queued, p: triagetype.High, wantErr: task.ErrInvalidTransition},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			cur := tc.start(t, f)
			before := time.Now()
			got, err := f.enq.Redispatch(ctx, cur, tc.to, tc.p, tc.delay, tc.apply)
			rec := f.get(t, cur.ID)
			// The message goes out first, carrying the version the record
			// gets if the write succeeds.
			msg := msgFor(cur, cur.Version+1, tc.p)
			if tc.wantDelay {
				f.waitDepth(t, tc.p, queue.Depth{Delayed: 1})
			} else if msgs := f.take(t, tc.p, 1); msgs[0] != msg {
				t.Fatalf("message %+v, want %+v", msgs[0], msg)
			}
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || got != nil || !strings.Contains(err.Error(), cur.ID) {
					t.Fatalf("Redispatch = %v, %v; want nil and an error naming the task and wrapping %v", got, err, tc.wantErr)
				}
				// The record did not move, so the message just sent is stale.
				if rec.Version != cur.Version || rec.Status != cur.Status || rec.DispatchVersion == msg.Version {
					t.Fatalf("record after failed redispatch: %s v%d dispatch %d; want unchanged %s v%d and the message (v%d) stale",
						rec.Status, rec.Version, rec.DispatchVersion, cur.Status, cur.Version, msg.Version)
				}
				return
			}
			if err != nil {
				t.Fatalf("Redispatch: %v", err)
			}
			if got.Status != tc.to || got.Version != msg.Version || got.DispatchVersion != msg.Version || got.EffectivePriority != tc.p || got.Priority != cur.Priority {
				t.Fatalf("returned %s v%d dispatch %d effective %s priority %s", got.Status, got.Version, got.DispatchVersion, got.EffectivePriority, got.Priority)
			}
			if rec.Status != got.Status || rec.Version != got.Version || rec.DispatchVersion != msg.Version {
				t.Fatalf("record %s v%d dispatch %d, want what Redispatch returned", rec.Status, rec.Version, rec.DispatchVersion)
			}
			switch {
			case tc.newEnqAt:
				if rec.EnqueuedAt == nil || rec.EnqueuedAt.Before(before.Add(-time.Second)) {
					t.Fatalf("enqueued_at %v, want stamped at the re-dispatch (after %v)", rec.EnqueuedAt, before)
				}
			case cur.EnqueuedAt == nil || rec.EnqueuedAt == nil || !rec.EnqueuedAt.Equal(*cur.EnqueuedAt):
				t.Fatalf("enqueued_at %v, want kept at %v", rec.EnqueuedAt, cur.EnqueuedAt)
			}
			if tc.apply != nil && (rec.Error == nil || rec.Error.Message != "boom") {
				t.Fatalf("apply's edit was not saved: error %+v", rec.Error)
			}
		})
	}
}

// A re-dispatch from a snapshot someone else has moved past loses the write;
// the message it already sent is stale by the record's dispatch version.
func TestRedispatchStaleSnapshotLeavesStaleMessage(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	snap := queuedAt(triagetype.Low)(t, f)
	claimed, err := f.store.Transition(ctx, snap, triagetype.Executing, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.enq.Redispatch(ctx, snap, triagetype.Queued, triagetype.Medium, 0, nil)
	var ce *store.ConflictError
	if !errors.Is(err, store.ErrConflict) || !errors.As(err, &ce) || ce.Current == nil || ce.Current.Version != claimed.Version {
		t.Fatalf("Redispatch err = %v, want a *store.ConflictError showing version %d", err, claimed.Version)
	}
	msg := f.take(t, triagetype.Medium, 1)[0]
	rec := f.get(t, snap.ID)
	if rec.Status != triagetype.Executing || rec.EffectivePriority != triagetype.Low {
		t.Fatalf("record %s at %s, want it left executing at low", rec.Status, rec.EffectivePriority)
	}
	if msg.Version == rec.DispatchVersion {
		t.Fatalf("message v%d matches the record's dispatch version %d: it would be run", msg.Version, rec.DispatchVersion)
	}
}

func TestRedispatchBatch(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()

	t.Run("nothing to move", func(t *testing.T) {
		moved, err := f.enq.RedispatchBatch(ctx, triagetype.Queued, triagetype.High, nil)
		if err != nil || moved != nil {
			t.Fatalf("RedispatchBatch(nil) = %v, %v", moved, err)
		}
		f.noMessages(t)
	})

	const n = 12 // two send requests
	var moves []enqueue.Move
	for range n {
		tk := queuedAt(triagetype.Low)(t, f)
		moves = append(moves, enqueue.Move{Task: tk})
	}

	t.Run("every send refused: nothing moves", func(t *testing.T) {
		broken := enqueue.New(f.store, f.resolve(t, []triagetype.Priority{triagetype.Medium}))
		moved, err := broken.RedispatchBatch(ctx, triagetype.Queued, triagetype.Medium, moves)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%d sends failed", n)) || len(moved) != 0 {
			t.Fatalf("RedispatchBatch = %d moved, %v; want none moved and %d failed sends", len(moved), err, n)
		}
		for _, m := range moves {
			if rec := f.get(t, m.Task.ID); rec.Version != m.Task.Version || rec.EffectivePriority != triagetype.Low {
				t.Fatalf("task %s moved to %s v%d though its send failed", rec.ID, rec.EffectivePriority, rec.Version)
			}
		}
		f.noMessages(t)
	})

	t.Run("one stale snapshot: the rest move", func(t *testing.T) {
		stale := moves[4].Task
		if _, err := f.store.Transition(ctx, stale, triagetype.Cancelled, nil); err != nil {
			t.Fatal(err)
		}
		moves[7].Apply = func(n *task.Task) { n.TraceID = "applied" }
		moved, err := f.enq.RedispatchBatch(ctx, triagetype.Queued, triagetype.Medium, moves)
		if !errors.Is(err, store.ErrConflict) {
			t.Fatalf("RedispatchBatch err = %v, want ErrConflict for the stale snapshot", err)
		}
		if len(moved) != n-1 {
			t.Fatalf("%d tasks moved, want %d", len(moved), n-1)
		}
		live := 0
		for _, m := range f.take(t, triagetype.Medium, n) {
			rec := f.get(t, m.ID)
			if m.Version != rec.DispatchVersion {
				if m.ID != stale.ID {
					t.Errorf("message for %s is stale (v%d, dispatch %d)", m.ID, m.Version, rec.DispatchVersion)
				}
				continue
			}
			live++
			if rec.Status != triagetype.Queued || rec.EffectivePriority != triagetype.Medium {
				t.Errorf("task %s is %s at %s, want queued at medium", rec.ID, rec.Status, rec.EffectivePriority)
			}
		}
		if live != n-1 {
			t.Fatalf("%d live messages, want %d", live, n-1)
		}
		if rec := f.get(t, moves[7].Task.ID); rec.TraceID != "applied" {
			t.Fatalf("Move.Apply not applied: trace id %q", rec.TraceID)
		}
		if rec := f.get(t, stale.ID); rec.Status != triagetype.Cancelled {
			t.Fatalf("stale task is %s, want it left cancelled", rec.Status)
		}
	})

	t.Run("one send refused: only that task stays", func(t *testing.T) {
		good := queuedAt(triagetype.Low)(t, f)
		bad := unsendable(newTask(request(triagetype.Low), time.Now().UTC()))
		if _, _, err := f.store.Create(ctx, bad); err != nil {
			t.Fatal(err)
		}
		moved, err := f.enq.RedispatchBatch(ctx, triagetype.Queued, triagetype.High, []enqueue.Move{{Task: bad}, {Task: good}})
		if err == nil || !strings.Contains(err.Error(), "1 sends failed") {
			t.Fatalf("RedispatchBatch err = %v, want 1 failed send", err)
		}
		if len(moved) != 1 || moved[0].ID != good.ID || moved[0].EffectivePriority != triagetype.High {
			t.Fatalf("moved %+v, want only %s, now at high", moved, good.ID)
		}
		if rec := f.get(t, bad.ID); rec.Version != bad.Version || rec.EffectivePriority != triagetype.Low {
			t.Fatalf("task with the refused send moved to %s v%d", rec.EffectivePriority, rec.Version)
		}
		if msgs := f.take(t, triagetype.High, 1); msgs[0] != (msgFor(good, good.Version+1, triagetype.High)) {
			t.Fatalf("message %+v", msgs[0])
		}
	})
}

func TestRetry(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	history := []triagetype.Attempt{{Attempt: 1, WorkerID: "w1", StartedAt: now.Add(-time.Minute), FinishedAt: now.Add(-50 * time.Second), Error: "boom"}}
	// create writes a task straight into status st, as if it had got there.
	create := func(t *testing.T, st triagetype.Status) *task.Task {
		t.Helper()
		done := now.Add(-10 * time.Second)
		enq := now.Add(-time.Hour)
		tk := &task.Task{
			ID: task.NewID(now), Type: "echo", Priority: triagetype.Low, EffectivePriority: triagetype.High, Status: st,
			Attempts: 3, MaxAttempts: 3, TimeoutSeconds: 30, CreatedAt: now.Add(-time.Hour), EnqueuedAt: &enq,
			WaitingSince: done, Version: 9, DispatchVersion: 8, History: history,
		}
		if st.Terminal() {
			tk.CompletedAt, tk.StartedAt, tk.ExpiresAt = &done, &done, now.Add(time.Hour).Unix()
			tk.Error = &triagetype.TaskError{Message: "boom", Retriable: false}
			tk.CancelRequested = true
		}
		if _, _, err := f.store.Create(ctx, tk); err != nil {
			t.Fatal(err)
		}
		return tk
	}

	t.Run("dead_letter goes back to queued, reset, on its original priority", func(t *testing.T) {
		dead := create(t, triagetype.DeadLetter)
		got, err := f.enq.Retry(ctx, f.store.Get, dead.ID)
		if err != nil {
			t.Fatalf("Retry: %v", err)
		}
		rec := f.get(t, dead.ID)
		for _, tk := range []*task.Task{got, rec} {
			switch {
			case tk.Status != triagetype.Queued, tk.Version != 10, tk.DispatchVersion != 10:
				t.Fatalf("after retry: %s v%d dispatch %d; want queued v10 dispatch 10", tk.Status, tk.Version, tk.DispatchVersion)
			case tk.EffectivePriority != triagetype.Low || tk.Priority != triagetype.Low:
				t.Fatalf("after retry at %s (priority %s), want back at its own priority low", tk.EffectivePriority, tk.Priority)
			case tk.Attempts != 0 || tk.Error != nil || tk.Result != nil || tk.CompletedAt != nil || tk.StartedAt != nil || tk.RetryAt != nil || tk.ExpiresAt != 0 || tk.CancelRequested:
				t.Fatalf("after retry not reset: %+v", tk)
			case len(tk.History) != 1 || tk.History[0].Error != "boom":
				t.Fatalf("history %+v, want the old attempt kept", tk.History)
			case tk.EnqueuedAt == nil || !tk.EnqueuedAt.After(now.Add(-time.Minute)):
				t.Fatalf("enqueued_at %v, want stamped at the retry", tk.EnqueuedAt)
			}
		}
		if msgs := f.take(t, triagetype.Low, 1); msgs[0] != (msgFor(dead, 10, triagetype.Low)) {
			t.Fatalf("message %+v", msgs[0])
		}
		f.noMessages(t)
	})

	for _, st := range []triagetype.Status{triagetype.Scheduled, triagetype.Queued, triagetype.Executing, triagetype.Retrying, triagetype.Completed, triagetype.Cancelled} {
		t.Run(string(st)+" is refused", func(t *testing.T) {
			tk := create(t, st)
			got, err := f.enq.Retry(ctx, f.store.Get, tk.ID)
			var se *store.StateError
			if !errors.Is(err, store.ErrWrongState) || !errors.As(err, &se) || se.Status != st || se.ID != tk.ID || se.Op != "retry" {
				t.Fatalf("Retry err = %v, want a *store.StateError for %s", err, st)
			}
			if got == nil || got.ID != tk.ID || got.Status != st {
				t.Fatalf("Retry returned %+v, want the task as it is", got)
			}
			if rec := f.get(t, tk.ID); rec.Version != tk.Version {
				t.Fatalf("record changed to v%d", rec.Version)
			}
			f.noMessages(t)
		})
	}

	t.Run("unknown task", func(t *testing.T) {
		got, err := f.enq.Retry(ctx, f.store.Get, "no-such-task")
		if !errors.Is(err, store.ErrNotFound) || got != nil {
			t.Fatalf("Retry = %v, %v; want ErrNotFound", got, err)
		}
	})

	t.Run("changed between read and write: read again and retry", func(t *testing.T) {
		dead := create(t, triagetype.DeadLetter)
		reads := 0
		// The first read hands out a snapshot that another writer then
		// moves past (still dead_letter, one version up).
		get := func(ctx context.Context, id string) (*task.Task, error) {
			reads++
			tk, err := f.store.Get(ctx, id)
			if err == nil && reads == 1 {
				_, err = f.store.Touch(ctx, tk, func(n *task.Task) { n.TraceID = "touched" })
			}
			return tk, err
		}
		got, err := f.enq.Retry(ctx, get, dead.ID)
		if err != nil || reads != 2 {
			t.Fatalf("Retry = %v after %d reads; want success on the second read", err, reads)
		}
		if got.Status != triagetype.Queued || got.Version != 11 || got.DispatchVersion != 11 || got.TraceID != "touched" {
			t.Fatalf("after retry: %s v%d dispatch %d trace %q", got.Status, got.Version, got.DispatchVersion, got.TraceID)
		}
		// The lost attempt's message (v10) is stale; the live one is v11.
		msgs := sortMessages(f.take(t, triagetype.Low, 2))
		if msgs[0].Version != 10 || msgs[1].Version != 11 {
			t.Fatalf("messages %+v, want a stale v10 and the live v11", msgs)
		}
	})

	t.Run("keeps changing: gives up with ErrConflict", func(t *testing.T) {
		dead := create(t, triagetype.DeadLetter)
		reads := 0
		get := func(ctx context.Context, id string) (*task.Task, error) {
			reads++
			tk, err := f.store.Get(ctx, id)
			if err == nil {
				_, err = f.store.Touch(ctx, tk, func(n *task.Task) { n.TraceID = fmt.Sprint("touch-", reads) })
			}
			return tk, err
		}
		got, err := f.enq.Retry(ctx, get, dead.ID)
		if !errors.Is(err, store.ErrConflict) || got != nil || reads != 5 {
			t.Fatalf("Retry = %v, %v after %d reads; want ErrConflict after 5", got, err, reads)
		}
		if rec := f.get(t, dead.ID); rec.Status != triagetype.DeadLetter {
			t.Fatalf("record is %s, want still dead_letter", rec.Status)
		}
		// Each lost attempt left a stale message behind.
		for _, m := range f.take(t, triagetype.Low, 5) {
			if rec := f.get(t, m.ID); m.Version == rec.DispatchVersion {
				t.Fatalf("message v%d matches dispatch version %d", m.Version, rec.DispatchVersion)
			}
		}
	})
}

// msgFor is the message of t at version v on priority p's queue.
func msgFor(t *task.Task, v int64, p triagetype.Priority) task.Message {
	m := task.MessageFor(t, v)
	m.Priority = p
	return m
}
