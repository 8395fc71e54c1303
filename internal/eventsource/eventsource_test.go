package eventsource_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/app/consumerapp"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/eventsource"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/metrics"
	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triageconfig"
	"github.com/triagehq/triage/triagetype"
)

func TestMain(m *testing.M) { stacktest.Main(m) }

// source is an event source on env's three queues that starts the stock
// consumer function's handler (consumerapp.Function) running reg.
func source(env *stacktest.Env, a *app.App, reg *handler.Registry) *eventsource.Source {
	opt := stacktest.FastDispatch()
	opt.Backoff = map[triagetype.Priority]triageconfig.Backoff{}
	for _, p := range triagetype.Priorities() {
		opt.Backoff[p] = triageconfig.Backoff{Base: time.Second, Max: time.Second}
	}
	var urls []string
	for _, p := range triagetype.Priorities() {
		urls = append(urls, env.QueueURLs[p])
	}
	return &eventsource.Source{
		SQS: a.SQS, Queues: urls, Wait: time.Second,
		Mapping: spec.Mapping{BatchSize: 5, MaxConcurrency: 2},
		NewFunction: func() (lambda.Handler, error) {
			return lambda.NewHandler(consumerapp.Function(a, reg, opt, dispatch.Deps{Metrics: metrics.New()})), nil
		},
	}
}

func submit(t *testing.T, a *app.App, typ string, p triagetype.Priority) string {
	t.Helper()
	r := task.Request{Type: typ, Priority: p, Payload: json.RawMessage(`{}`)}
	tk, _, err := a.Enqueuer.Submit(context.Background(), r.NewTask(time.Now().UTC(), time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	return tk.ID
}

// A message the consumer retries (hidden for the backoff, not deleted) is
// reported as a batch item failure, so the event source leaves it on its
// queue: the retry finds it and the task completes on its second attempt.
// Had the source deleted it, the task would wait in retrying with no
// message.
func TestRetriedMessageIsABatchItemFailure(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	var mu sync.Mutex
	tries := 0
	reg := stacktest.Registry("flaky", handler.Func(func(context.Context, handler.Request) (json.RawMessage, error) {
		mu.Lock()
		defer mu.Unlock()
		tries++
		if tries == 1 {
			return nil, errors.New("first attempt fails")
		}
		return json.RawMessage(`{"ok":true}`), nil
	}))
	id := submit(t, a, "flaky", triagetype.Low) // before the source runs: an event carries it
	src := source(env, a, reg)
	stop := stacktest.Run(t, src)
	got := stacktest.WaitStatus(t, a.Store, id, triagetype.Completed, time.Minute)
	stop()
	if got.Attempts != 2 {
		t.Errorf("attempts %d, want 2", got.Attempts)
	}
	st := src.Stats()
	t.Logf("stats %+v", st)
	if st.Failures < 1 || st.Invocations < 1 {
		t.Errorf("stats %+v: want the first attempt's record reported as a failure", st)
	}
	for _, p := range triagetype.Priorities() {
		d, err := a.Queues.Depth(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		if d.Visible+d.InFlight+d.Delayed != 0 {
			t.Errorf("%s queue after the run: %+v, want empty", p, d)
		}
	}
}

// An idle source receives and invokes nothing; a task sent then starts one
// invocation, which completes it and leaves no worker registered: nothing
// heartbeats while nothing runs.
func TestIdleSourceInvokesNothing(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	reg := stacktest.Registry("ok", handler.Func(func(context.Context, handler.Request) (json.RawMessage, error) {
		return json.RawMessage(`{}`), nil
	}))
	src := source(env, a, reg)
	stop := stacktest.Run(t, src)
	for src.Stats().Receives < 6 { // two empty long polls per queue
		time.Sleep(100 * time.Millisecond)
	}
	if st := src.Stats(); st.Invocations != 0 || st.ColdStarts != 0 {
		t.Fatalf("idle: %+v, want no invocation", st)
	}
	id := submit(t, a, "ok", triagetype.High)
	stacktest.WaitStatus(t, a.Store, id, triagetype.Completed, time.Minute)
	// The invocation returns once nothing has run for IdleStop and its
	// long polls in flight have come back empty.
	for src.Stats().Deleted < 1 {
		time.Sleep(100 * time.Millisecond)
	}
	ws, err := a.Workers.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if len(ws) != 0 {
		t.Errorf("after the invocation: workers %+v, want none", ws)
	}
	if st := src.Stats(); st.Invocations != 1 || st.Failures != 0 {
		t.Errorf("stats %+v, want one invocation and no failure", st)
	}
}

// Failures reads a response as Lambda does with ReportBatchItemFailures.
func TestFailures(t *testing.T) {
	ev := events.SQSEvent{Records: []events.SQSMessage{{MessageId: "a"}, {MessageId: "b"}}}
	for _, tt := range []struct {
		name string
		out  string
		err  error
		want []string
	}{
		{"null fails none", `null`, nil, nil},
		{"empty list fails none", `{"batchItemFailures":[]}`, nil, nil},
		{"listed", `{"batchItemFailures":[{"itemIdentifier":"b"}]}`, nil, []string{"b"}},
		{"unknown id fails all", `{"batchItemFailures":[{"itemIdentifier":"c"}]}`, nil, []string{"a", "b"}},
		{"empty id fails all", `{"batchItemFailures":[{"itemIdentifier":""}]}`, nil, []string{"a", "b"}},
		{"not JSON fails all", `nope`, nil, []string{"a", "b"}},
		{"error fails all", ``, errors.New("boom"), []string{"a", "b"}},
	} {
		got, _ := eventsource.Failures(ev, []byte(tt.out), tt.err)
		if len(got) != len(tt.want) {
			t.Errorf("%s: failed %v, want %v", tt.name, got, tt.want)
			continue
		}
		for _, id := range tt.want {
			if !got[id] {
				t.Errorf("%s: failed %v, want %v", tt.name, got, tt.want)
			}
		}
	}
}

// Near its deadline an invocation never returns with a claimed task: the
// running task is handed back to its queue (the attempt counted) and its
// record is reported as a batch item failure, so it lives on.
func TestDeadlineHandsBackAndReports(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	ctx := context.Background()
	reg := stacktest.Registry("slow", handler.Func(func(ctx context.Context, _ handler.Request) (json.RawMessage, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}))
	id := submit(t, a, "slow", triagetype.High)
	url := env.QueueURLs[triagetype.High]
	out, err := env.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(url), MaxNumberOfMessages: 1, WaitTimeSeconds: 5,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
	})
	if err != nil || len(out.Messages) != 1 {
		t.Fatalf("receive: %v, %d messages", err, len(out.Messages))
	}
	rec := eventsource.Record(out.Messages[0], queue.ARN(url, "us-east-1"), "us-east-1")
	opt := stacktest.FastDispatch()
	opt.DrainTimeout = 500 * time.Millisecond
	c := consumerapp.New(a, reg, opt, dispatch.Deps{Metrics: metrics.New()})
	h := consumerapp.FunctionHandler(c, a.Queues, time.Second)
	ictx, cancel := context.WithTimeout(ctx, 3*time.Second) // polls until 1 s before this
	defer cancel()
	resp, err := h(ictx, consumerapp.Invocation{SQS: &events.SQSEvent{Records: []events.SQSMessage{rec}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.SQS == nil || len(resp.SQS.BatchItemFailures) != 1 || resp.SQS.BatchItemFailures[0].ItemIdentifier != rec.MessageId {
		t.Fatalf("response %+v, want the running task's record as the one failure", resp.SQS)
	}
	if c.Counts().HandedBack != 1 {
		t.Errorf("handed back %d, want 1", c.Counts().HandedBack)
	}
	got, err := a.Store.Get(ctx, id)
	if err != nil || got.Status != triagetype.Queued || got.Attempts != 1 {
		t.Errorf("task after the invocation: %+v, %v; want queued with 1 attempt counted", got, err)
	}
}

// An invocation that keeps working is listed in the worker registry while
// it runs (once it has run dispatch's eventRegisterAfter, with the slot
// its task takes) and removed when it returns: only invocations that end
// sooner leave no trace.
func TestLongInvocationIsListed(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	release := make(chan struct{})
	reg := stacktest.Registry("slow", handler.Func(func(ctx context.Context, _ handler.Request) (json.RawMessage, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return json.RawMessage(`{}`), nil
	}))
	src := source(env, a, reg)
	stop := stacktest.Run(t, src)
	defer stop()
	id := submit(t, a, "slow", triagetype.Medium)
	stacktest.WaitStatus(t, a.Store, id, triagetype.Executing, time.Minute)
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	var ws []triagetype.WorkerInfo
	for len(ws) == 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		var err error
		if ws, err = a.Workers.List(ctx); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	if len(ws) != 1 || ws[0].Kind != triagetype.WorkerKindLambda || ws[0].State != triagetype.WorkerActive || ws[0].Busy != 1 {
		t.Fatalf("workers while the invocation runs its task: %+v, want one active lambda instance, its slot busy", ws)
	}
	stacktest.WaitStatus(t, a.Store, id, triagetype.Completed, time.Minute)
	for src.Stats().Deleted < 1 {
		time.Sleep(100 * time.Millisecond)
	}
	if ws, err := a.Workers.List(ctx); err != nil || len(ws) != 0 {
		t.Errorf("workers after the invocation returned: %+v, %v; want none", ws, err)
	}
}
