package counters_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/app/consumerapp"
	"github.com/triagehq/triage/internal/cleanup"
	"github.com/triagehq/triage/internal/counters"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/handler/demo"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triageconfig"
	"github.com/triagehq/triage/triagetype"
)

func TestMain(m *testing.M) { stacktest.Main(m) }

// tally is what the counters count, computed either way.
type tally struct {
	tasks map[string]int64 // "status#priority"
	types map[string]int64 // "type#status"
}

// recount scans the table and counts its tasks: the truth the counters
// must equal.
func recount(t *testing.T, env *stacktest.Env) tally {
	t.Helper()
	out := tally{tasks: map[string]int64{}, types: map[string]int64{}}
	in := &dynamodb.ScanInput{TableName: &env.Spec.Table.Name}
	for {
		page, err := env.DynamoDB.Scan(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			tk, ok, err := counters.TaskFromImage(it)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				out.tasks[string(tk.Status)+"#"+string(tk.EffectivePriority)]++
				out.types[tk.Type+"#"+string(tk.Status)]++
			}
		}
		if len(page.LastEvaluatedKey) == 0 {
			return out
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}

func fromCounters(t *testing.T, a *app.App) tally {
	t.Helper()
	snap, err := a.Counters.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := tally{tasks: map[string]int64{}, types: map[string]int64{}}
	for st, ps := range snap.Tasks {
		for p, n := range ps {
			if n != 0 {
				out.tasks[string(st)+"#"+string(p)] = n
			}
		}
	}
	for typ, sts := range snap.Types {
		for st, n := range sts {
			out.types[typ+"#"+string(st)] = n
		}
	}
	return out
}

// settle waits until the counters equal a recount of the table.
func settle(t *testing.T, env *stacktest.Env, a *app.App, what string) tally {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		want, got := recount(t, env), fromCounters(t, a)
		if maps.Equal(want.tasks, got.tasks) && maps.Equal(want.types, got.types) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: counters\n  %v\n  %v\nwant the recount\n  %v\n  %v", what, got.tasks, got.types, want.tasks, want.types)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// After a mixed workload (completions, retries, dead letters, a cancel
// while running, cancelled schedules, replays, deletes and a cleanup) the
// counters equal a full recount of the table, at every step.
func TestCountersEqualARecount(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	stacktest.RunCounters(t, a)
	reg := handler.NewRegistry()
	demo.Register(reg)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		_ = consumerapp.New(a, reg, dispatch.Options{PollWait: time.Second, Lease: 3 * time.Second, Backoff: map[triagetype.Priority]triageconfig.Backoff{
			triagetype.High: {Base: 200 * time.Millisecond, Max: time.Second}, triagetype.Medium: {Base: 200 * time.Millisecond, Max: time.Second}, triagetype.Low: {Base: 200 * time.Millisecond, Max: time.Second},
		}}, dispatch.Deps{}).
			Run(ctx)
		close(done)
	}()
	t.Cleanup(func() { stop(); <-done })

	submit := func(typ string, p triagetype.Priority, payload string, delay int) *task.Task {
		r := task.Request{Type: typ, Priority: p, Payload: json.RawMessage(payload)}
		if delay > 0 {
			r.DelaySeconds = &delay
		}
		tk, _, err := a.Enqueuer.Submit(context.Background(), r.NewTask(time.Now().UTC(), 15*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	var finished, dead, sched []*task.Task
	for i, p := range []triagetype.Priority{triagetype.High, triagetype.Medium, triagetype.Low, triagetype.High, triagetype.Medium, triagetype.Low} {
		finished = append(finished, submit("echo", p, fmt.Sprintf(`{"n":%d}`, i), 0))
		finished = append(finished, submit("fail", p, `{"times":1}`, 0)) // one retry, then completes
		dead = append(dead, submit("fail", p, `{"times":5,"permanent":true}`, 0))
	}
	for range 3 {
		sched = append(sched, submit("later", triagetype.Low, `{}`, 3600))
	}
	sleeper := submit("sleep", triagetype.High, `{"ms":30000}`, 0)
	for _, tk := range finished {
		stacktest.WaitStatus(t, a.Store, tk.ID, triagetype.Completed, 30*time.Second)
	}
	for _, tk := range dead {
		stacktest.WaitStatus(t, a.Store, tk.ID, triagetype.DeadLetter, 30*time.Second)
	}
	stacktest.WaitStatus(t, a.Store, sleeper.ID, triagetype.Executing, 30*time.Second)
	settle(t, env, a, "after the first run")

	for _, id := range []string{sleeper.ID, sched[0].ID, sched[1].ID} {
		if _, err := a.Store.Cancel(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	stacktest.WaitStatus(t, a.Store, sleeper.ID, triagetype.Cancelled, 30*time.Second)
	for _, tk := range dead[:2] { // replayed: they fail again
		if _, err := a.Enqueuer.Retry(context.Background(), a.Store.Get, tk.ID); err != nil {
			t.Fatal(err)
		}
	}
	for _, tk := range dead[:2] {
		stacktest.WaitStatus(t, a.Store, tk.ID, triagetype.DeadLetter, 30*time.Second)
	}
	for _, tk := range finished[:3] {
		cur, err := a.Store.Get(context.Background(), tk.ID)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Store.Delete(context.Background(), cur); err != nil {
			t.Fatal(err)
		}
	}
	got := settle(t, env, a, "after cancels, replays and deletes")
	if got.tasks["completed#high"]+got.tasks["completed#medium"]+got.tasks["completed#low"] != int64(len(finished)-3) {
		t.Fatalf("completed counts %v, want %d", got.tasks, len(finished)-3)
	}

	n, err := cleanupAll(t, a, time.Now().Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if want := len(finished) - 3 + len(dead) + 3; n != want {
		t.Fatalf("cleanup deleted %d tasks, want %d", n, want)
	}
	got = settle(t, env, a, "after cleanup")
	if !maps.Equal(got.tasks, map[string]int64{"scheduled#low": 1}) {
		t.Fatalf("after cleanup the counters hold %v, want only the one scheduled task", got.tasks)
	}
}

// A stream batch delivered twice to the Lambda trigger (a retry) counts
// once: the batch's marker is written in the same transaction.
func TestLambdaRetryCountsOnce(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	now := time.Now().UTC()
	var recs []events.DynamoDBEventRecord
	for i := range 3 {
		tk := &task.Task{ID: task.NewID(now), Type: "echo", Priority: triagetype.Low, EffectivePriority: triagetype.Low, Status: triagetype.Queued, CreatedAt: now, WaitingSince: now, Version: 1}
		av, err := a.Store.Item(tk)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, events.DynamoDBEventRecord{EventName: "INSERT", Change: events.DynamoDBStreamRecord{
			SequenceNumber: strconv.Itoa(1000 + i), NewImage: toEvent(t, av),
		}})
	}
	ev := events.DynamoDBEvent{Records: recs}
	for range 2 {
		if err := a.Counters.HandleEvent(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := a.Counters.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := snap.Tasks[triagetype.Queued][triagetype.Low]; got != 3 {
		t.Fatalf("queued low = %d after a batch of 3 delivered twice, want 3", got)
	}
}

// toEvent turns SDK attribute values into a Lambda event image, by way of
// the DynamoDB JSON both speak.
func toEvent(t *testing.T, av map[string]ddbtypes.AttributeValue) map[string]events.DynamoDBAttributeValue {
	t.Helper()
	var plain map[string]any
	if err := attributevalue.UnmarshalMap(av, &plain); err != nil {
		t.Fatal(err)
	}
	out := map[string]events.DynamoDBAttributeValue{}
	for k, v := range plain {
		switch v := v.(type) {
		case string:
			out[k] = events.NewStringAttribute(v)
		case float64:
			out[k] = events.NewNumberAttribute(strconv.FormatFloat(v, 'f', -1, 64))
		case bool:
			out[k] = events.NewBooleanAttribute(v)
		}
	}
	return out
}

// Task types live in one counter item each, so no caller can fill a shared
// item with type names (a single registry item once gave every new type a
// 500 after ~3,200 long names), and /stats reads at most MaxTypes of them.
func TestManyTypesFillNoSharedItem(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	stacktest.RunCounters(t, a)
	const n = counters.MaxTypes + 50
	for i := range n {
		typ := fmt.Sprintf("%03d-%s", i, strings.Repeat("t", task.MaxTypeLength-4))
		r := task.Request{Type: typ}
		if _, _, err := a.Enqueuer.Submit(context.Background(), r.NewTask(time.Now().UTC(), time.Minute)); err != nil {
			t.Fatalf("submit of type %d: %v", i, err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		snap, err := a.Counters.Read(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if snap.Tasks[triagetype.Queued][triagetype.Medium] == n {
			if len(snap.Types) != counters.MaxTypes || !snap.TypesTruncated {
				t.Fatalf("read %d types (truncated %v), want the first %d and truncated", len(snap.Types), snap.TypesTruncated, counters.MaxTypes)
			}
			if _, ok := snap.Types[fmt.Sprintf("%03d-%s", 0, strings.Repeat("t", task.MaxTypeLength-4))]; !ok {
				t.Fatal("the first type by name is missing")
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("counters reached %d of %d queued tasks", snap.Tasks[triagetype.Queued][triagetype.Medium], n)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// cleanupAll deletes the tasks that finished before cut as a cleanup job
// (the API's DELETE /tasks?older_than=, then the promoter's runner), and
// says how many.
func cleanupAll(t *testing.T, a *app.App, cut time.Time) (int, error) {
	t.Helper()
	ctx := context.Background()
	job, err := cleanup.Start(ctx, a.Store, cut)
	if err != nil {
		return 0, err
	}
	rep, err := cleanup.NewRunner(a.Store, cleanup.Options{Owner: "test"}).Run(ctx, time.Minute)
	if err == nil && !rep.Done {
		err = fmt.Errorf("cleanup %s not done in a minute", job.ID)
	}
	return rep.Deleted, err
}
