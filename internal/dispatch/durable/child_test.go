package durable_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/internal/durable"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triageconfig"
	"github.com/triagehq/triage/triagetype"
	"github.com/triagehq/triage/worker"
)

// Child tasks awaited durably: a parent submits a child once, waits for
// it holding nothing, and gets its result; a retry of the parent replays
// the child step (no second child); a child already submitted by an
// attempt that died before recording it is adopted, not doubled; and a
// child that fails permanently reaches the parent as a *ChildFailedError.
func TestChildTasks(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	w := newWorker(t, env, map[string]string{triageconfig.EnvRetryBackoff: "high=1s:1s,medium=1s:1s,low=1s:1s"})
	var mu sync.Mutex
	childRuns := map[string]int{} // child task id -> runs
	parentAttempts := map[string]int{}
	must(t, w.Handle("square", func(ctx context.Context, tk *worker.Task) (any, error) {
		var in struct{ N int }
		if err := tk.Decode(&in); err != nil {
			return nil, worker.Permanent(err)
		}
		mu.Lock()
		childRuns[tk.ID]++
		mu.Unlock()
		time.Sleep(500 * time.Millisecond) // the parent parks meanwhile
		if in.N < 0 {
			return nil, worker.Permanent(errors.New("negative"))
		}
		return in.N * in.N, nil
	}))
	must(t, w.Handle("parent", func(ctx context.Context, tk *worker.Task) (any, error) {
		var in struct{ N int }
		if err := tk.Decode(&in); err != nil {
			return nil, worker.Permanent(err)
		}
		mu.Lock()
		parentAttempts[tk.ID]++
		mu.Unlock()
		req, err := triage.NewRequest("square", map[string]int{"n": in.N}, triage.WithPriority(triage.High))
		if err != nil {
			return nil, worker.Permanent(err)
		}
		sq, err := worker.Child[int](ctx, tk, "square", req)
		var failed *worker.ChildFailedError
		if errors.As(err, &failed) {
			return fmt.Sprintf("child %s is %s: %s", failed.ID, failed.Status, failed.Message), nil
		}
		if err != nil {
			return nil, err
		}
		if tk.Attempt == 1 {
			return nil, errors.New("fail once after the child completed") // the retry replays the child step
		}
		return sq, nil
	}))
	start(t, w)
	ctx := context.Background()

	t.Run("result, retried parent", func(t *testing.T) {
		p := submit(t, a, "parent", map[string]int{"n": 7})
		done := stacktest.WaitStatus(t, a.Store, p.ID, triagetype.Completed, 40*time.Second)
		if string(done.Result) != "49" || done.Attempts != 2 {
			t.Fatalf("result %s attempts %d; want 49 after 2 attempts", done.Result, done.Attempts)
		}
		child, err := a.Store.ByIdempotencyKey(ctx, durable.ChildKey(p.ID, "square"))
		must(t, err)
		mu.Lock()
		defer mu.Unlock()
		if len(childRuns) != 1 || childRuns[child.ID] != 1 || child.Status != triagetype.Completed {
			t.Fatalf("children run %v; want one, %s, once (status %s)", childRuns, child.ID, child.Status)
		}
		if len(done.Steps) != 2 || string(done.Steps[0].Result) != `"`+child.ID+`"` || done.Steps[1].Outcome() != "signalled" {
			t.Fatalf("steps %+v", done.Steps)
		}
		clear(childRuns)
	})

	t.Run("child submitted before a crash is adopted", func(t *testing.T) {
		sr, err := triage.NewRequest("parent", map[string]int{"n": 3}, triage.WithPriority(triage.High))
		must(t, err)
		tr := task.Request(sr)
		p := tr.NewTask(a.Store.Now(), 0)
		// What an attempt that died between the submit and its record left.
		early := submit(t, a, "square", map[string]int{"n": 3}, triage.WithIdempotencyKey(durable.ChildKey(p.ID, "square")))
		if _, _, err := a.Enqueuer.Submit(ctx, p); err != nil {
			t.Fatal(err)
		}
		done := stacktest.WaitStatus(t, a.Store, p.ID, triagetype.Completed, 40*time.Second)
		if string(done.Result) != "9" || string(done.Steps[0].Result) != `"`+early.ID+`"` {
			t.Fatalf("result %s steps %+v; want 9 from child %s", done.Result, done.Steps, early.ID)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(childRuns) != 1 || childRuns[early.ID] != 1 {
			t.Fatalf("children run %v; want only %s, once", childRuns, early.ID)
		}
		clear(childRuns)
	})

	t.Run("child fails permanently", func(t *testing.T) {
		mu.Lock()
		clear(childRuns)
		mu.Unlock()
		p := submit(t, a, "parent", map[string]int{"n": -1})
		done := stacktest.WaitStatus(t, a.Store, p.ID, triagetype.Completed, 40*time.Second)
		child, err := a.Store.ByIdempotencyKey(ctx, durable.ChildKey(p.ID, "square"))
		must(t, err)
		want := fmt.Sprintf(`"child %s is dead_letter: `, child.ID)
		if !strings.HasPrefix(string(done.Result), want) || !strings.Contains(string(done.Result), "negative") || done.Attempts != 1 {
			t.Fatalf("result %s attempts %d; want %s in one attempt", done.Result, done.Attempts, want)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(childRuns) != 1 || parentAttempts[p.ID] != 2 {
			t.Fatalf("children run %v, parent ran %d times; want one child, the parent run twice (park, resume)", childRuns, parentAttempts[p.ID])
		}
	})
}
