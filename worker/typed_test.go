package worker_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/triageconfig"
	"github.com/triagehq/triage/triagetype"
	"github.com/triagehq/triage/worker"
)

type resize struct {
	URL   string `json:"url"`
	Width int    `json:"width"`
}

func (resize) Kind() string { return "resize" }

type invoice struct {
	Order string `json:"order"`
}

// Two typed workers (one kind from its type, one given), middleware around
// every attempt, and the outcomes Snooze and Cancel, on the emulators.
func TestTypedWorkersMiddlewareAndOutcomes(t *testing.T) {
	env := stacktest.New(t)
	cfg, err := triageconfig.Decode(env.Getenv(nil))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Concurrency, cfg.ReservedHigh = 4, 1
	w := worker.New(worker.Options{Config: &cfg, Logger: quiet})
	var mu sync.Mutex
	var trail []string
	snoozes := 0
	w.Use(func(ctx context.Context, tk *worker.Task, next func(context.Context) error) error {
		err := next(ctx)
		mu.Lock()
		trail = append(trail, tk.Type+":"+outcome(err))
		mu.Unlock()
		return err
	})
	if err := worker.AddWorker(w, func(ctx context.Context, j *worker.Job[resize]) (any, error) {
		mu.Lock()
		defer mu.Unlock()
		if snoozes == 0 { // the upload is not there yet
			snoozes++
			return nil, worker.Snooze(time.Second)
		}
		return map[string]any{"url": j.Args.URL, "width": j.Args.Width}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := worker.AddWorkerKind(w, "invoice", func(ctx context.Context, j *worker.Job[invoice]) (any, error) {
		return nil, worker.Cancel(errors.New("order " + j.Args.Order + " was refunded"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := worker.AddWorker(w, func(context.Context, *worker.Job[resize]) (any, error) { return nil, nil }); !errors.Is(err, worker.ErrDuplicate) {
		t.Fatalf("a second resize worker = %v, want ErrDuplicate", err)
	}
	if err := w.Handle("bad#type", nil); err == nil {
		t.Fatal("a type the API refuses was registered")
	}

	img := submit(t, env, "resize", `{"url":"s3://b/cat.png","width":64}`)
	inv := submit(t, env, "invoice", `{"order":"A-7"}`)
	garbled := submit(t, env, "resize", `{"width":"wide"}`)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done }()

	st := env.App(t, nil).Store
	got := stacktest.WaitStatus(t, st, img, triagetype.Completed, 30*time.Second)
	if got.Attempts != 1 || string(got.Result) != `{"url":"s3://b/cat.png","width":64}` {
		t.Errorf("resize: attempts %d result %s; want 1 attempt (the snooze is free)", got.Attempts, got.Result)
	}
	c := stacktest.WaitStatus(t, st, inv, triagetype.Cancelled, 20*time.Second)
	if c.Error == nil || c.Error.Message != "order A-7 was refunded" {
		t.Errorf("invoice: error %+v", c.Error)
	}
	d := stacktest.WaitStatus(t, st, garbled, triagetype.DeadLetter, 20*time.Second)
	if d.Error == nil || d.Error.Retriable || !strings.Contains(d.Error.Message, "decode payload") {
		t.Errorf("garbled payload: error %+v, want a permanent decode error", d.Error)
	}
	mu.Lock()
	defer mu.Unlock()
	counts := map[string]int{}
	for _, s := range trail {
		counts[s]++
	}
	if counts["resize:snooze"] != 1 || counts["resize:ok"] != 1 || counts["invoice:cancel"] != 1 || counts["resize:permanent"] != 1 {
		t.Errorf("middleware saw %v", trail)
	}
}

func outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, worker.ErrCancel):
		return "cancel"
	case errors.Is(err, worker.ErrPermanent):
		return "permanent"
	case strings.HasPrefix(err.Error(), "snoozed"):
		return "snooze"
	}
	return "error"
}

func TestConfigIsChecked(t *testing.T) {
	env := stacktest.New(t)
	for _, c := range []struct {
		edit func(*triageconfig.Config)
		want string
	}{
		{func(c *triageconfig.Config) { c.Weights = map[triage.Priority]int{"urgent": 1} }, "urgent"},
		{func(c *triageconfig.Config) { c.Weights = map[triage.Priority]int{"high": 0, "medium": 0, "low": 0} }, "positive"},
		{func(c *triageconfig.Config) { c.Concurrency, c.ReservedHigh = 2, 2 }, "less than Concurrency"},
		{func(c *triageconfig.Config) { c.Concurrency = -1 }, "Concurrency (TRIAGE_CONCURRENCY): must be at least 1"},
		{func(c *triageconfig.Config) {
			c.RetryBackoff = map[triage.Priority]triageconfig.Backoff{"low": {Base: time.Minute, Max: time.Second}}
		}, "RetryBackoff"},
	} {
		cfg, err := triageconfig.Decode(env.Getenv(nil))
		if err != nil {
			t.Fatal(err)
		}
		c.edit(&cfg)
		w := worker.New(worker.Options{Config: &cfg, Logger: quiet})
		_ = w.Handle("job", func(context.Context, *worker.Task) (any, error) { return nil, nil })
		err = w.Run(context.Background())
		var fe *triageconfig.Error
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &fe) {
			t.Errorf("Run = %v, want a FieldError mentioning %q", err, c.want)
		}
	}
}
