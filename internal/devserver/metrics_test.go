package devserver_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/devserver"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/metrics/metricstest"
)

// TestMetricsAfterWorkload runs `triage dev`, submits a known workload
// through its API (completions at two priorities, a retried failure, a
// permanent failure, a cancel of a running task), waits for every task to
// finish, and scrapes /metrics: every count is exact.
func TestMetricsAfterWorkload(t *testing.T) {
	t.Parallel() // mostly waiting; its own prefix on the shared emulators
	env := stacktest.New(t)
	vars := map[string]string{"TRIAGE_ADDR": "127.0.0.1:0", "TRIAGE_TOKEN": "dev-test", "TRIAGE_PREFIX": env.Prefix, "TRIAGE_PROMOTE_INTERVAL": "1s"}
	base := startDev(t, vars)
	do := func(method, path, body string) (int, map[string]any) {
		t.Helper()
		return apiCall(t, base, method, path, body)
	}
	submit := func(body string) string {
		t.Helper()
		code, out := do("POST", "/api/v1/tasks", body)
		if code != http.StatusCreated {
			t.Fatalf("submit %s = %d %v", body, code, out)
		}
		return out["id"].(string)
	}
	waitFor := func(id string, want ...string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		var got map[string]any
		for time.Now().Before(deadline) {
			if _, got = do("GET", "/api/v1/tasks/"+id, ""); got != nil {
				for _, w := range want {
					if got["status"] == w {
						return
					}
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("task %s: %v, want status %v", id, got["status"], want)
	}

	var ids []string
	for range 3 {
		ids = append(ids, submit(`{"type":"echo","payload":{"x":1},"priority":"high"}`))
	}
	for range 2 {
		ids = append(ids, submit(`{"type":"echo","payload":{"x":2},"priority":"low"}`))
	}
	retried := submit(`{"type":"fail","payload":{"times":1},"priority":"medium"}`)
	dead := submit(`{"type":"fail","payload":{"times":1,"permanent":true},"priority":"medium"}`)
	long := submit(`{"type":"sleep","payload":{"ms":60000},"priority":"medium"}`)
	// An idempotent repeat is not a new submit.
	for range 2 {
		if code, out := do("POST", "/api/v1/tasks", `{"type":"noop","priority":"low","idempotency_key":"once"}`); code != 201 && code != 200 {
			t.Fatalf("noop submit = %d %v", code, out)
		} else {
			ids = append(ids, out["id"].(string))
		}
	}
	waitFor(long, "executing")
	if code, out := do("POST", "/api/v1/tasks/"+long+"/cancel", ""); code != 200 && code != 202 {
		t.Fatalf("cancel = %d %v", code, out)
	}
	for _, id := range ids {
		waitFor(id, "completed")
	}
	waitFor(retried, "completed")
	waitFor(dead, "dead_letter")
	waitFor(long, "cancelled")
	// The queue gauges are sampled every second from the stream-kept
	// counters, which run about a second behind; on a loaded machine more
	// (the low queue's oldest age was still 39 s two seconds after the
	// last task once). Scrape until a sample after the last task shows the
	// low queue empty, then check everything.
	scrape := func() map[string]float64 {
		t.Helper()
		resp, err := http.Get(base + devserver.MetricsPath) // no token: loopback only
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET /metrics = %d", resp.StatusCode)
		}
		got, err := metricstest.ParseProm(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	// The queue gauges are sampled: wait until they show the low queue
	// drained and the dead task's DLQ message, which is sent after its
	// record is written dead.
	const lowAge = `triage_queue_oldest_age_seconds{priority="low"}`
	const mediumDLQ = `triage_dlq_depth{priority="medium"}`
	got := scrape()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); got = scrape() {
		if v, ok := got[lowAge]; ok && v == 0 && got[mediumDLQ] == 1 {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	want := map[string]float64{
		`triage_tasks_submitted_total{priority="high",type="echo"}`:       3,
		`triage_tasks_submitted_total{priority="low",type="echo"}`:        2,
		`triage_tasks_submitted_total{priority="medium",type="fail"}`:     2,
		`triage_tasks_submitted_total{priority="medium",type="sleep"}`:    1,
		`triage_tasks_submitted_total{priority="low",type="noop"}`:        1,
		`triage_tasks_started_total{priority="high",type="echo"}`:         3,
		`triage_tasks_started_total{priority="low",type="echo"}`:          2,
		`triage_tasks_started_total{priority="medium",type="fail"}`:       3,
		`triage_tasks_started_total{priority="medium",type="sleep"}`:      1,
		`triage_tasks_completed_total{priority="high",type="echo"}`:       3,
		`triage_tasks_completed_total{priority="low",type="echo"}`:        2,
		`triage_tasks_completed_total{priority="medium",type="fail"}`:     1,
		`triage_tasks_completed_total{priority="low",type="noop"}`:        1,
		`triage_tasks_retried_total{priority="medium",type="fail"}`:       1,
		`triage_tasks_dead_lettered_total{priority="medium",type="fail"}`: 1,
		`triage_tasks_cancelled_total{priority="medium",type="sleep"}`:    1,
		`triage_task_failures_total{reason="error",type="fail"}`:          1,
		`triage_task_failures_total{reason="permanent",type="fail"}`:      1,
		`triage_task_wait_seconds_count{priority="high"}`:                 3,
		`triage_task_wait_seconds_count{priority="low"}`:                  3,
		`triage_task_wait_seconds_count{priority="medium"}`:               3, // the retry's start is no queue wait
		`triage_task_run_seconds_count{type="echo"}`:                      5,
		`triage_task_run_seconds_count{type="fail"}`:                      3,
		`triage_task_run_seconds_count{type="sleep"}`:                     1,
		`triage_consumer_slots_capacity`:                                  8,
		`triage_consumer_slots_reserved_high_capacity`:                    1,
		`triage_consumer_slots_busy`:                                      0,
		`triage_queue_depth{priority="high"}`:                             0,
		`triage_queue_depth{priority="low"}`:                              0,
		lowAge:                                                            0,
		mediumDLQ:                                                         1,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	for k, v := range got {
		if strings.HasPrefix(k, "triage_task_failures_total") && want[k] != v {
			t.Errorf("unexpected failures series %s = %v", k, v)
		}
	}
	if t.Failed() {
		for k, v := range got {
			t.Logf("%s %v", k, v)
		}
	}
}
