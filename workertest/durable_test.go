package workertest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/worker"
	"github.com/triagehq/triage/workertest"
)

// A handler with steps, a sleep and a signal wait, run attempt by attempt
// as the consumer would: each step's function runs once, the sleep and
// the wait suspend, and a reordered step is non-determinism.
func TestDurableSteps(t *testing.T) {
	ctx := context.Background()
	runs := map[string]int{}
	reorder := false
	w := worker.New(worker.Options{})
	err := w.Handle("saga", func(ctx context.Context, tk *worker.Task) (any, error) {
		names := []string{"charge", "reserve"}
		if reorder {
			names = []string{"reserve", "charge"}
		}
		var got []int
		for i, n := range names {
			v, err := worker.Step(ctx, tk, n, func(context.Context) (int, error) { runs[n]++; return i + 1, nil })
			if err != nil {
				return nil, err
			}
			got = append(got, v)
		}
		if err := worker.Sleep(ctx, tk, time.Hour); err != nil {
			return nil, err
		}
		ok, err := worker.WaitSignal[bool](ctx, tk, "approval", 24*time.Hour)
		if errors.Is(err, worker.ErrSignalTimeout) {
			return map[string]any{"steps": got, "approved": "timeout"}, nil
		}
		if err != nil {
			return nil, err
		}
		return map[string]any{"steps": got, "approved": ok}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rn := workertest.New(w)
	start := time.Now()
	res, err := rn.WorkTask(ctx, t, "saga", nil, nil)
	if err != nil || res.Outcome != workertest.Suspended || res.Signal != "" || res.WakeAt.Sub(start) < 59*time.Minute {
		t.Fatalf("first attempt: %+v, %v; want a sleep of an hour", res, err)
	}
	later := func() time.Time { return start.Add(2 * time.Hour) }
	res, err = rn.WorkTask(ctx, t, "saga", nil, &workertest.WorkOptions{Steps: res.Steps, Now: later})
	if err != nil || res.Outcome != workertest.Suspended || res.Signal != "approval" {
		t.Fatalf("after the sleep: %+v, %v; want a wait for approval", res, err)
	}
	steps := res.Steps
	res, err = rn.WorkTask(ctx, t, "saga", nil, &workertest.WorkOptions{Steps: steps, Now: later, Signals: map[string]any{"approval": true}})
	if err != nil || res.Outcome != workertest.Completed || string(res.Result) != `{"approved":true,"steps":[1,2]}` {
		t.Fatalf("signalled: %+v, %v", res, err)
	}
	if runs["charge"] != 1 || runs["reserve"] != 1 {
		t.Fatalf("step runs %v; want each once", runs)
	}
	if n := len(res.Steps); n != 4 || res.Steps[3].Outcome() != "signalled" {
		t.Fatalf("steps %+v", res.Steps)
	}
	// The timeout, measured from the first wait.
	res, err = rn.WorkTask(ctx, t, "saga", nil, &workertest.WorkOptions{Steps: steps, Now: func() time.Time { return start.Add(27 * time.Hour) }})
	if err != nil || string(res.Result) != `{"approved":"timeout","steps":[1,2]}` {
		t.Fatalf("timed out: %+v, %v", res, err)
	}
	reorder = true
	res, err = rn.WorkTask(ctx, t, "saga", nil, &workertest.WorkOptions{Steps: steps, Now: later})
	if res.Outcome != workertest.DeadLettered || !errors.Is(err, worker.ErrNonDeterminism) {
		t.Fatalf("reordered: %+v, %v; want non-determinism", res, err)
	}
	if runs["charge"] != 1 || runs["reserve"] != 1 {
		t.Fatalf("step runs %v after the reorder; want none more", runs)
	}
}

// A child step submits its child once and waits; the child's outcome,
// given by step name, is its result or a *worker.ChildFailedError.
func TestChildSteps(t *testing.T) {
	ctx := context.Background()
	w := worker.New(worker.Options{})
	err := w.Handle("parent", func(ctx context.Context, tk *worker.Task) (any, error) {
		req, err := triage.NewRequest("square", map[string]int{"n": 7})
		if err != nil {
			return nil, worker.Permanent(err)
		}
		v, err := worker.Child[int](ctx, tk, "square", req)
		var failed *worker.ChildFailedError
		if errors.As(err, &failed) {
			return "failed: " + failed.Message, nil
		}
		return v, err
	})
	if err != nil {
		t.Fatal(err)
	}
	rn := workertest.New(w)
	res, err := rn.WorkTask(ctx, t, "parent", nil, nil)
	if err != nil || res.Outcome != workertest.Suspended || res.Signal != "child:square" || res.Children["square"].Type != "square" {
		t.Fatalf("first attempt: %+v, %v; want a wait for the child it submitted", res, err)
	}
	steps := res.Steps
	res, err = rn.WorkTask(ctx, t, "parent", nil, &workertest.WorkOptions{Steps: steps, Children: map[string]any{"square": 49}})
	if err != nil || string(res.Result) != "49" || len(res.Children) != 0 {
		t.Fatalf("child done: %+v, %v; want 49 and no second submit", res, err)
	}
	res, err = rn.WorkTask(ctx, t, "parent", nil, &workertest.WorkOptions{Steps: steps, Children: map[string]any{
		"square": &worker.ChildFailedError{Status: triage.DeadLetter, Message: "negative"}}})
	if err != nil || string(res.Result) != `"failed: negative"` {
		t.Fatalf("child failed: %+v, %v", res, err)
	}
}
