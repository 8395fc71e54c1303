package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/localstack/stacktest"
)

func TestMain(m *testing.M) { stacktest.Main(m) }

func newTask(typ string, p task.Priority) *task.Task {
	now := time.Now().UTC()
	return &task.Task{
		ID: task.NewID(now), Type: typ, Payload: json.RawMessage(`{"x":1}`),
		Priority: p, EffectivePriority: p, Status: task.Queued,
		MaxAttempts: 3, TimeoutSeconds: 30, CreatedAt: now, WaitingSince: now,
		Version: 1, DispatchVersion: 1,
	}
}

func TestCreateGetTransition(t *testing.T) {
	env := stacktest.New(t)
	ctx := context.Background()
	s := store.New(env.DynamoDB, env.Spec.Table.Name)

	tk := newTask("echo", task.Low)
	if _, created, err := s.Create(ctx, tk); err != nil || !created {
		t.Fatalf("Create = %v, %v", created, err)
	}
	got, err := s.Get(ctx, tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != task.Queued || got.Version != 1 || string(got.Payload) != `{"x":1}` {
		t.Fatalf("got %+v", got)
	}

	claimed, err := s.Transition(ctx, got, task.Executing, func(n *task.Task) { n.Attempts++; n.WorkerID = "w1" })
	if err != nil {
		t.Fatal(err)
	}
	if claimed.Version != 2 || claimed.Attempts != 1 || claimed.WorkerID != "w1" {
		t.Fatalf("claimed %+v", claimed)
	}

	// A second writer holding the old snapshot loses, and learns the current state.
	_, err = s.Transition(ctx, got, task.Executing, nil)
	var ce *store.ConflictError
	if !errors.Is(err, store.ErrConflict) || !errors.As(err, &ce) || ce.Current == nil || ce.Current.Version != 2 {
		t.Fatalf("stale transition err = %v", err)
	}

	// A forbidden move is refused before any write.
	if _, err := s.Transition(ctx, claimed, task.Scheduled, nil); !errors.Is(err, task.ErrInvalidTransition) {
		t.Fatalf("executing->scheduled err = %v", err)
	}

	done, err := s.Transition(ctx, claimed, task.Completed, func(n *task.Task) {
		n.Result = json.RawMessage(`{"ok":true}`)
		n.WorkerID = ""
	})
	if err != nil {
		t.Fatal(err)
	}
	if done.ExpiresAt < time.Now().Add(6*24*time.Hour).Unix() || done.WorkerID != "" {
		t.Fatalf("completed task: expires_at %d, worker %q", done.ExpiresAt, done.WorkerID)
	}

	if _, err := s.Get(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get(nope) err = %v", err)
	}
}

func TestIdempotentCreateRace(t *testing.T) {
	env := stacktest.New(t)
	ctx := context.Background()
	s := store.New(env.DynamoDB, env.Spec.Table.Name)

	const n = 20
	var wg sync.WaitGroup
	ids := make([]string, n)
	created := make([]bool, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk := newTask("echo", task.High)
			tk.IdempotencyKey = "order-42"
			var saved *task.Task
			saved, created[i], errs[i] = s.Create(ctx, tk)
			if saved != nil {
				ids[i] = saved.ID
			}
		}()
	}
	wg.Wait()
	nCreated := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("submit %d: %v", i, errs[i])
		}
		if created[i] {
			nCreated++
		}
		if ids[i] != ids[0] {
			t.Fatalf("submit %d returned task %s, submit 0 returned %s", i, ids[i], ids[0])
		}
	}
	if nCreated != 1 {
		t.Fatalf("%d submits created a task, want exactly 1", nCreated)
	}
}

func TestWaitingQueryOrder(t *testing.T) {
	env := stacktest.New(t)
	ctx := context.Background()
	s := store.New(env.DynamoDB, env.Spec.Table.Name)
	var want []string
	for range 5 {
		tk := newTask("echo", task.Low)
		if _, _, err := s.Create(ctx, tk); err != nil {
			t.Fatal(err)
		}
		want = append(want, tk.ID)
		time.Sleep(2 * time.Millisecond)
	}
	if _, _, err := s.Create(ctx, newTask("echo", task.High)); err != nil {
		t.Fatal(err)
	}
	page, err := s.Waiting(ctx, store.WaitingQuery{Status: task.Queued, Priority: task.Low, Before: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Tasks) != len(want) {
		t.Fatalf("got %d low queued tasks, want %d", len(page.Tasks), len(want))
	}
	for i, tk := range page.Tasks {
		if tk.ID != want[i] {
			t.Fatalf("position %d: %s, want %s (oldest first)", i, tk.ID, want[i])
		}
	}
	n, err := s.CountWaiting(ctx, task.Queued, task.High)
	if err != nil || n != 1 {
		t.Fatalf("CountWaiting(high) = %d, %v", n, err)
	}
}
