package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triageconfig"
	"github.com/triagehq/triage/triagetype"
	"github.com/triagehq/triage/worker"
)

func TestMain(m *testing.M) { stacktest.Main(m) }

var quiet = slog.New(slog.NewJSONHandler(io.Discard, nil))

func submit(t *testing.T, env *stacktest.Env, typ, payload string) string {
	t.Helper()
	a := env.App(t, nil)
	r := task.Request{Type: typ, Priority: "high", Payload: json.RawMessage(payload)}
	tk, _, err := a.Enqueuer.Submit(context.Background(), r.NewTask(a.Store.Now(), 0))
	if err != nil {
		t.Fatal(err)
	}
	return tk.ID
}

// TestGoHandlers runs a worker with three Go handlers on the emulators:
// a result, a retriable failure that succeeds on its second attempt, and a
// permanent failure.
func TestGoHandlers(t *testing.T) {
	env := stacktest.New(t)
	var mu sync.Mutex
	seen := map[string][]int{} // task type -> attempts seen
	note := func(tk *worker.Task) {
		mu.Lock()
		defer mu.Unlock()
		seen[tk.Type] = append(seen[tk.Type], tk.Attempt)
	}
	w := worker.New(envOptions(t, env.Getenv(nil)))
	w.Handle("area", func(ctx context.Context, tk *worker.Task) (any, error) {
		note(tk)
		var in struct{ W, H int }
		if err := tk.Decode(&in); err != nil {
			return nil, worker.Permanent(err)
		}
		return map[string]int{"area": in.W * in.H}, nil
	})
	w.Handle("flaky", func(ctx context.Context, tk *worker.Task) (any, error) {
		note(tk)
		if tk.Attempt < 2 {
			return nil, errors.New("upstream unavailable")
		}
		return json.RawMessage(fmt.Sprintf(`{"attempt":%d}`, tk.Attempt)), nil
	})
	w.Handle("charge", func(ctx context.Context, tk *worker.Task) (any, error) {
		note(tk)
		return nil, worker.Permanent(errors.New("card declined"))
	})

	area := submit(t, env, "area", `{"W":6,"H":7}`)
	flaky := submit(t, env, "flaky", `{}`)
	charge := submit(t, env, "charge", `{}`)
	badInput := submit(t, env, "area", `[1,2]`)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run returned %v after cancel, want nil", err)
		}
	}()

	st := env.App(t, nil).Store
	if got := stacktest.WaitStatus(t, st, area, triagetype.Completed, 20*time.Second); string(got.Result) != `{"area":42}` {
		t.Errorf("area result %s, want {\"area\":42}", got.Result)
	}
	if got := stacktest.WaitStatus(t, st, flaky, triagetype.Completed, 30*time.Second); string(got.Result) != `{"attempt":2}` || got.Attempts != 2 {
		t.Errorf("flaky: result %s after %d attempts, want {\"attempt\":2} after 2", got.Result, got.Attempts)
	}
	for id, want := range map[string]string{charge: "card declined", badInput: "decode payload"} {
		got := stacktest.WaitStatus(t, st, id, triagetype.DeadLetter, 20*time.Second)
		if got.Attempts != 1 || got.Error == nil || got.Error.Retriable || !strings.Contains(got.Error.Message, want) {
			t.Errorf("task %s: attempts %d error %+v, want 1 attempt and a permanent %q", id, got.Attempts, got.Error, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(seen["flaky"]) != "[1 2]" || fmt.Sprint(seen["charge"]) != "[1]" {
		t.Errorf("attempts seen by handlers: %v", seen)
	}
}

// TestLambdaHandler invokes the Lambda entry point once, with a deadline
// that leaves a few seconds of polling before the reserve.
func TestLambdaHandler(t *testing.T) {
	env := stacktest.New(t)
	w := worker.New(envOptions(t, env.Getenv(nil)))
	w.Handle("greet", func(ctx context.Context, tk *worker.Task) (any, error) {
		var in struct{ Name string }
		if err := tk.Decode(&in); err != nil {
			return nil, worker.Permanent(err)
		}
		return "hello " + in.Name, nil
	})
	h, err := w.LambdaHandler(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	id := submit(t, env, "greet", `{"Name":"ada"}`)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second+4*time.Second)
	defer cancel()
	resp, err := h(ctx, worker.LambdaEvent{Other: events.EventBridgeEvent{DetailType: "Scheduled Event", Source: "aws.events"}})
	if err != nil || resp.SQS != nil || resp.Summary.WorkerID == "" {
		t.Fatalf("invocation: %+v, %v", resp, err)
	}
	got, err := env.App(t, nil).Store.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != triagetype.Completed || string(got.Result) != `"hello ada"` {
		t.Fatalf("after one invocation the task is %s with result %s", got.Status, got.Result)
	}
}

func TestConfigurationErrors(t *testing.T) {
	env := stacktest.New(t)
	noop := func(context.Context, *worker.Task) (any, error) { return nil, nil }
	tests := []struct {
		name     string
		extra    map[string]string
		register bool
		want     string
	}{
		{"nothing registered", nil, false, "no handlers"},
		{"Go handler and route for one type", map[string]string{"TRIAGE_ROUTES": "job=https://127.0.0.1:9/hook", "TRIAGE_WEBHOOK_SECRET": "s"}, true, `"job"`},
		{"bad setting", map[string]string{"TRIAGE_WEIGHTS": "high=lots"}, true, "TRIAGE_WEIGHTS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opt := worker.Options{Logger: quiet} // nil Config: the process environment
			if tt.name == "bad setting" {
				for k, v := range tt.extra {
					t.Setenv(k, v)
				}
			} else {
				opt = envOptions(t, env.Getenv(tt.extra))
			}
			w := worker.New(opt)
			if tt.register {
				w.Handle("job", noop)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := w.Run(ctx)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Run = %v, want an error mentioning %s", err, tt.want)
			}
			if tt.name == "nothing registered" && !errors.Is(err, worker.ErrNoHandlers) {
				t.Fatalf("Run = %v, want ErrNoHandlers", err)
			}
		})
	}
}

// envOptions configures a worker from getenv, as a deployed one is from
// its environment.
func envOptions(t *testing.T, getenv func(string) string) worker.Options {
	t.Helper()
	cfg, err := triageconfig.Decode(getenv)
	if err != nil {
		t.Fatal(err)
	}
	return worker.Options{Config: &cfg, Logger: quiet}
}
