package devserver_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/emulators/stacktest"
)

// TestDevRunsSchedules: `triage dev` ticks schedules with its promoter. A
// schedule every minute, created through the API, makes its first task
// (of the schedule, named on the task) at the next minute, which the dev
// consumer runs; never more than one per tick.
func TestDevRunsSchedules(t *testing.T) {
	t.Parallel() // waits for a minute's tick; its own prefix on the shared emulators
	env := stacktest.New(t)
	base := startDev(t, map[string]string{"TRIAGE_ADDR": "127.0.0.1:0", "TRIAGE_TOKEN": "dev-test", "TRIAGE_PREFIX": env.Prefix})
	code, sc := apiCall(t, base, "POST", "/api/v1/schedules", `{"name":"dev-minutely","cron":"* * * * *","task":{"type":"echo","payload":{"from":"schedule"}}}`)
	if code != 201 {
		t.Fatalf("create schedule: %d %v", code, sc)
	}
	first, _ := time.Parse(time.RFC3339, fmt.Sprint(sc["next_tick"]))
	deadline := time.Now().Add(time.Until(first) + 90*time.Second)
	var id string
	for time.Now().Before(deadline) {
		_, got := apiCall(t, base, "GET", "/api/v1/schedules/dev-minutely", "")
		if v, ok := got["last_task_id"].(string); ok && v != "" {
			id = v
			break
		}
		time.Sleep(time.Second)
	}
	if id == "" {
		t.Fatalf("no tick within 90 s of %s", first)
	}
	var task map[string]any
	for time.Now().Before(deadline.Add(30 * time.Second)) {
		_, task = apiCall(t, base, "GET", "/api/v1/tasks/"+id, "")
		if task["status"] == "completed" {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if task["status"] != "completed" || task["schedule"] != "dev-minutely" {
		t.Fatalf("the tick's task: %v", task)
	}
	if code, _ := apiCall(t, base, "POST", "/api/v1/schedules/dev-minutely/pause", ""); code != 200 {
		t.Fatalf("pause: %d", code)
	}
	// At most one task per minute that has begun since the first tick.
	ticks := int(time.Since(first)/time.Minute) + 1
	_, page := apiCall(t, base, "GET", "/api/v1/tasks?type=echo", "")
	tasks, _ := page["tasks"].([]any)
	seen := map[any]bool{}
	for _, raw := range tasks {
		tk, _ := raw.(map[string]any)
		if tk["schedule"] != "dev-minutely" || seen[tk["id"]] {
			t.Fatalf("task %v: want each of the schedule's once", tk)
		}
		seen[tk["id"]] = true
	}
	if len(tasks) < 1 || len(tasks) > ticks {
		t.Fatalf("%d tasks of the schedule after %d ticks", len(tasks), ticks)
	}
	if code, _ := apiCall(t, base, "DELETE", "/api/v1/schedules/dev-minutely", ""); code != 204 {
		t.Fatalf("delete: %d", code)
	}
}
