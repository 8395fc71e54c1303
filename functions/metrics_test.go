package functions_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/metrics"
	"github.com/triagehq/triage/internal/metrics/metricstest"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// TestConsumerFunctionEMF runs the consumer function's bootstrap over a
// known workload (completions at two priorities, a direct SQS send it
// adopts, a retried failure, a permanent failure) and reads the EMF lines
// it wrote to stdout: valid documents, and the exact counts that `triage
// dev`'s /metrics shows for the same kind of work (TestMetricsAfterWorkload).
func TestConsumerFunctionEMF(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	ctx := context.Background()
	now := time.Now().UTC()
	var ids []string
	for _, r := range []task.Request{
		{Type: "echo", Priority: "high"},
		{Type: "echo", Priority: "high"},
		{Type: "echo", Priority: "low"},
		{Type: "fail", Payload: json.RawMessage(`{"times":1}`), Priority: "medium"},
		{Type: "fail", Payload: json.RawMessage(`{"times":1,"permanent":true}`), Priority: "medium"},
	} {
		tk, _, err := a.Enqueuer.Submit(ctx, r.NewTask(now, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, tk.ID)
	}
	if _, err := env.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(env.QueueURLs[triagetype.Low]), MessageBody: aws.String(`{"type":"echo","payload":{"direct":true}}`)}); err != nil {
		t.Fatal(err)
	}
	event, err := os.ReadFile("testdata/eventbridge-scheduled.json")
	if err != nil {
		t.Fatal(err)
	}
	// A deadline 50 s out leaves 10 s of polling before the 40 s reserve:
	// time for the retry's backoff (at most 1 s at medium).
	o := invoke(t, "consumer", event, 50*time.Second, map[string]string{"TRIAGE_PREFIX": env.Prefix, "TRIAGE_DEMO_HANDLERS": "true"})
	if o.kind != "response" {
		t.Fatalf("consumer returned %s %s", o.kind, o.body)
	}
	if counts := stacktest.StatusCounts(t, a.Store, ids); counts[triagetype.Completed] != 4 || counts[triagetype.DeadLetter] != 1 {
		t.Fatalf("tasks after the invocation: %v", counts)
	}
	var lines []string
	for _, l := range strings.Split(o.stdout, "\n") {
		if strings.Contains(l, `"_aws"`) {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		t.Fatalf("no EMF lines on stdout:\n%s", o.stdout)
	}
	got, err := metricstest.ParseEMF(strings.NewReader(strings.Join(lines, "\n")), metrics.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		`triage_tasks_submitted_total{priority="low",type="echo"}`:        1, // the adopted direct send
		`triage_tasks_started_total{priority="high",type="echo"}`:         2,
		`triage_tasks_started_total{priority="low",type="echo"}`:          2,
		`triage_tasks_started_total{priority="medium",type="fail"}`:       3,
		`triage_tasks_completed_total{priority="high",type="echo"}`:       2,
		`triage_tasks_completed_total{priority="low",type="echo"}`:        2,
		`triage_tasks_completed_total{priority="medium",type="fail"}`:     1,
		`triage_tasks_retried_total{priority="medium",type="fail"}`:       1,
		`triage_tasks_dead_lettered_total{priority="medium",type="fail"}`: 1,
		`triage_task_failures_total{reason="error",type="fail"}`:          1,
		`triage_task_failures_total{reason="permanent",type="fail"}`:      1,
		`triage_task_wait_seconds_count{priority="high"}`:                 2,
		`triage_task_wait_seconds_count{priority="low"}`:                  2,
		`triage_task_wait_seconds_count{priority="medium"}`:               2,
		`triage_task_run_seconds_count{type="echo"}`:                      4,
		`triage_task_run_seconds_count{type="fail"}`:                      3,
		`triage_consumer_slots_capacity`:                                  8,
		`triage_consumer_slots_reserved_high_capacity`:                    1,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	if g := got[`triage_consumer_slots_busy`]; g < 1 {
		t.Errorf("peak busy slots = %v, want at least 1", g)
	}
	if t.Failed() {
		t.Logf("EMF lines:\n%s", strings.Join(lines, "\n"))
	}
}

// TestPromoterFunctionEMF: the promoter function writes its promotions
// and a queue sample as EMF.
func TestPromoterFunctionEMF(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	r := task.Request{Type: "echo", Priority: "low"}
	for range 2 {
		if _, _, err := a.Enqueuer.Submit(context.Background(), r.NewTask(time.Now().UTC(), time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(1100 * time.Millisecond)
	event, err := os.ReadFile("testdata/eventbridge-scheduled.json")
	if err != nil {
		t.Fatal(err)
	}
	o := invoke(t, "promoter", event, 30*time.Second, map[string]string{"TRIAGE_PREFIX": env.Prefix, "TRIAGE_PROMOTE_LOW_AFTER": "1s", "TRIAGE_METRICS_NAMESPACE": "TriageTest"})
	if o.kind != "response" {
		t.Fatalf("promoter error: %s", o.body)
	}
	got, err := metricstest.ParseEMF(strings.NewReader(strings.TrimSpace(o.stdout)), "TriageTest")
	if err != nil {
		t.Fatalf("%v\n%s", err, o.stdout)
	}
	for k, v := range map[string]float64{
		`triage_promotions_total{from="low",to="medium"}`: 2,
		`triage_queue_depth{priority="medium"}`:           2, // sampled after the promotion
		`triage_queue_depth{priority="high"}`:             0,
		`triage_dlq_depth{priority="low"}`:                0,
	} {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v\n%s", k, g, ok, v, o.stdout)
		}
	}
}
