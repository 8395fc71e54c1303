package worker_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/metrics/metricstest"
	"github.com/triagehq/triage/triageconfig"
	"github.com/triagehq/triage/triagetype"
	"github.com/triagehq/triage/worker"
	"github.com/triagehq/triage/worker/workerprom"
)

// With TRIAGE_METRICS_ADDR set and workerprom enabled, Run serves the
// consumer's metrics at /metrics while it runs, and stops serving when it
// returns (a durable step counted among them). Without workerprom, a set address is a start-up error naming
// the variable and the package to enable, not a silent absence.
func TestRunServesMetrics(t *testing.T) {
	env := stacktest.New(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	opt := envOptions(t, env.Getenv(map[string]string{triageconfig.EnvMetricsAddr: addr}))
	plain := worker.New(opt)
	plain.Handle("greet", func(context.Context, *worker.Task) (any, error) { return "hi", nil })
	if err := plain.Run(context.Background()); err == nil || !strings.Contains(err.Error(), triageconfig.EnvMetricsAddr) || !strings.Contains(err.Error(), "workerprom.Enable") {
		t.Fatalf("Run with %s and no metrics server = %v; want the start-up error", triageconfig.EnvMetricsAddr, err)
	}

	w := worker.New(opt)
	workerprom.Enable(w)
	w.Handle("greet", func(ctx context.Context, tk *worker.Task) (any, error) {
		return worker.Step(ctx, tk, "compose", func(context.Context) (string, error) { return "hi", nil })
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	id := submit(t, env, "greet", `{}`)
	stacktest.WaitStatus(t, env.App(t, nil).Store, id, triagetype.Completed, 30*time.Second)

	// The consumer counts a completion just after it records it, so the
	// scrape may come between the two: scrape until it is counted (a
	// loaded CI machine once saw completed 0 here).
	const completed = `triage_tasks_completed_total{priority="high",type="greet"}`
	var got map[string]float64
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		got, err = metricstest.ParseProm(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got[completed] > 0 || time.Now().After(deadline) {
			break
		}
	}
	for k, v := range map[string]float64{
		`triage_tasks_started_total{priority="high",type="greet"}`: 1,
		completed: 1,
		`triage_task_run_seconds_count{type="greet"}`:              1,
		`triage_consumer_slots_capacity`:                           8,
		`triage_steps_total{kind="run",outcome="ok",type="greet"}`: 1,
	} {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := http.Get("http://" + addr + "/metrics"); err == nil {
		t.Error("/metrics still served after Run returned")
	}
}
