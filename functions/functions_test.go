// Package functions_test runs the three Lambda functions as built
// `bootstrap` binaries against a stand-in for the Lambda Runtime API, with
// real event JSON, on the local stack.
package functions_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/eventsource"
	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

func TestMain(m *testing.M) { stacktest.Main(m) }

// runtimeAPI is a minimal Lambda Runtime API: it hands out one event, then
// records the function's response or error.
type runtimeAPI struct {
	event    []byte
	deadline time.Time
	mu       sync.Mutex
	served   bool
	result   chan outcome
}

type outcome struct {
	kind   string // "response" or "error"
	body   []byte
	stdout string // what the function wrote to stdout before it answered
}

func (r *runtimeAPI) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	switch {
	case req.Method == "GET" && req.URL.Path == "/2018-06-01/runtime/invocation/next":
		r.mu.Lock()
		first := !r.served
		r.served = true
		r.mu.Unlock()
		if !first {
			<-req.Context().Done() // no second event: block like the real service
			return
		}
		w.Header().Set("Lambda-Runtime-Aws-Request-Id", "req-1")
		w.Header().Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(r.deadline.UnixMilli(), 10))
		w.Header().Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:123456789012:function:triage")
		w.Header().Set("Lambda-Runtime-Trace-Id", "Root=1-5759e988-bd862e3fe1be46a994272793")
		_, _ = w.Write(r.event)
	case req.Method == "POST" && strings.HasSuffix(req.URL.Path, "/response"):
		b, _ := io.ReadAll(req.Body)
		r.result <- outcome{kind: "response", body: b}
		w.WriteHeader(http.StatusAccepted)
	case req.Method == "POST" && strings.HasSuffix(req.URL.Path, "/error"):
		b, _ := io.ReadAll(req.Body)
		r.result <- outcome{kind: "error", body: b}
		w.WriteHeader(http.StatusAccepted)
	default:
		http.NotFound(w, req)
	}
}

// invoke builds functions/<name> as a bootstrap, runs it against a runtime
// stand-in with event, and returns the function's response.
func invoke(t *testing.T, name string, event []byte, deadline time.Duration, env map[string]string) outcome {
	t.Helper()
	return invokePackage(t, "./"+name, name, event, deadline, env)
}

// invokePackage is invoke for the main package pkg (as `go build` names it
// from functions/), run as the function name.
func invokePackage(t *testing.T, pkg, name string, event []byte, deadline time.Duration, env map[string]string) outcome {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bootstrap")
	build := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", bin, pkg)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", name, err, out)
	}
	rt := &runtimeAPI{event: event, deadline: time.Now().Add(deadline), result: make(chan outcome, 1)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: rt}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "AWS_LAMBDA_RUNTIME_API="+ln.Addr().String(), "AWS_LAMBDA_FUNCTION_NAME=triage-"+name, "_HANDLER=bootstrap")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	// A file, not a pipe: the function writes it directly, so it can be
	// read as soon as the function has answered.
	out, err := os.Create(filepath.Join(t.TempDir(), "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout = out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	select {
	case o := <-rt.result:
		b, err := os.ReadFile(out.Name())
		if err != nil {
			t.Fatal(err)
		}
		o.stdout = string(b)
		return o
	case <-time.After(deadline + 30*time.Second):
		t.Fatalf("%s gave no response; stderr:\n%s", name, stderr.String())
	}
	return outcome{}
}

func TestAPIFunction(t *testing.T) {
	env := stacktest.New(t)
	event, err := os.ReadFile("testdata/apigw-v2-submit.json")
	if err != nil {
		t.Fatal(err)
	}
	o := invoke(t, "api", event, 30*time.Second, map[string]string{"TRIAGE_PREFIX": env.Prefix, "TRIAGE_TOKEN": "lambda-token"})
	if o.kind != "response" {
		t.Fatalf("function error: %s", o.body)
	}
	var resp struct {
		StatusCode int    `json:"statusCode"`
		Body       string `json:"body"`
	}
	if err := json.Unmarshal(o.body, &resp); err != nil {
		t.Fatalf("response %s: %v", o.body, err)
	}
	if resp.StatusCode != 201 || !strings.Contains(resp.Body, `"priority":"low"`) {
		t.Fatalf("response %d %s", resp.StatusCode, resp.Body)
	}
}

func TestConsumerFunction(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	r := task.Request{Type: "echo", Payload: json.RawMessage(`{"n":7}`), Priority: "high"}
	tk, _, err := a.Enqueuer.Submit(context.Background(), r.NewTask(time.Now().UTC(), time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	event, err := os.ReadFile("testdata/eventbridge-scheduled.json")
	if err != nil {
		t.Fatal(err)
	}
	// A deadline 45 s out leaves 5 s of polling before the 40 s reserve.
	o := invoke(t, "consumer", event, 45*time.Second, map[string]string{"TRIAGE_PREFIX": env.Prefix, "TRIAGE_DEMO_HANDLERS": "true"})
	if o.kind != "response" || !strings.Contains(string(o.body), "worker_id") {
		t.Fatalf("consumer returned %s %s", o.kind, o.body)
	}
	got, err := a.Store.Get(context.Background(), tk.ID)
	if err != nil || got.Status != triagetype.Completed || string(got.Result) != `{"n":7}` {
		t.Fatalf("task after the consumer ran: %+v %v", got, err)
	}
}

// An SQS event from a queue's event source mapping, as Lambda sends it:
// the consumer runs its records through the claim path, then polls until
// the queues have been idle, and answers with the batch item failures.
// The echo task's record is completed and deleted by the consumer (not a
// failure); the record naming a task that was never recorded is hidden
// to wait for its record, so it must live on and is reported.
func TestConsumerFunctionSQSEvent(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	ctx := context.Background()
	r := task.Request{Type: "echo", Payload: json.RawMessage(`{"n":8}`), Priority: "high"}
	tk, _, err := a.Enqueuer.Submit(ctx, r.NewTask(time.Now().UTC(), time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	orphan := task.NewID(time.Now())
	if _, err := a.Queues.Send(ctx, triagetype.High, `{"id":"`+orphan+`","v":0}`, 0); err != nil {
		t.Fatal(err)
	}
	url := env.QueueURLs[triagetype.High]
	var msgs []types.Message
	for len(msgs) < 2 {
		out, err := env.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		})
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, out.Messages...)
	}
	ev := events.SQSEvent{}
	orphanMsg := ""
	for _, m := range msgs {
		rec := eventsource.Record(m, queue.ARN(url, "us-east-1"), "us-east-1")
		if strings.Contains(rec.Body, orphan) {
			orphanMsg = rec.MessageId
		}
		ev.Records = append(ev.Records, rec)
	}
	event, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	o := invoke(t, "consumer", event, 45*time.Second, map[string]string{"TRIAGE_PREFIX": env.Prefix, "TRIAGE_DEMO_HANDLERS": "true"})
	if o.kind != "response" {
		t.Fatalf("consumer returned %s %s", o.kind, o.body)
	}
	var resp events.SQSEventResponse
	if err := json.Unmarshal(o.body, &resp); err != nil {
		t.Fatalf("response %s: %v", o.body, err)
	}
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != orphanMsg {
		t.Errorf("batch item failures %s, want only the orphan's message %s", o.body, orphanMsg)
	}
	got, err := a.Store.Get(ctx, tk.ID)
	if err != nil || got.Status != triagetype.Completed || string(got.Result) != `{"n":8}` {
		t.Fatalf("task after the consumer ran: %+v %v", got, err)
	}
	// The echo task's message is gone; the orphan's waits, hidden.
	d, err := a.Queues.Depth(ctx, triagetype.High)
	if err != nil {
		t.Fatal(err)
	}
	if d.Visible+d.InFlight+d.Delayed != 1 {
		t.Errorf("high queue after the invocation: %+v, want the orphan's message only", d)
	}
}

// sqsEvent receives n messages from the queue of p and returns them as
// the SQS event its event source mapping would send.
func sqsEvent(t *testing.T, env *stacktest.Env, p triagetype.Priority, n int) (events.SQSEvent, []byte) {
	t.Helper()
	url := env.QueueURLs[p]
	var ev events.SQSEvent
	for deadline := time.Now().Add(30 * time.Second); len(ev.Records) < n; {
		if time.Now().After(deadline) {
			t.Fatalf("received %d of %d messages", len(ev.Records), n)
		}
		out, err := env.SQS.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			ev.Records = append(ev.Records, eventsource.Record(m, queue.ARN(url, "us-east-1"), "us-east-1"))
		}
	}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return ev, b
}

// A user's consumer built on the worker package (worker/testdata/lambda,
// served with worker.StartLambda) invoked by a queue's event source
// mapping: the task its handler finishes is completed and its record not
// listed (Lambda deletes it); the snoozed task's record and the record
// naming no task are listed as batch item failures and their messages
// live on, hidden. The same binary still answers a scheduled event.
func TestWorkerFunctionSQSEvent(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	ctx := context.Background()
	submit := func(typ string) string {
		r := task.Request{Type: typ, Priority: "medium"}
		tk, _, err := a.Enqueuer.Submit(ctx, r.NewTask(time.Now().UTC(), time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		return tk.ID
	}
	greet, later := submit("greet"), submit("later")
	orphan := task.NewID(time.Now())
	if _, err := a.Queues.Send(ctx, triagetype.Medium, `{"id":"`+orphan+`","v":0}`, 0); err != nil {
		t.Fatal(err)
	}
	ev, event := sqsEvent(t, env, triagetype.Medium, 3)
	want := map[string]bool{}
	for _, r := range ev.Records {
		if !strings.Contains(r.Body, greet) {
			want[r.MessageId] = true
		}
	}
	fenv := map[string]string{"TRIAGE_PREFIX": env.Prefix, "TRIAGE_LOG_LEVEL": "warn"}
	o := invokePackage(t, "../worker/testdata/lambda", "worker", event, 45*time.Second, fenv)
	if o.kind != "response" {
		t.Fatalf("worker function returned %s %s", o.kind, o.body)
	}
	var resp events.SQSEventResponse
	if err := json.Unmarshal(o.body, &resp); err != nil {
		t.Fatalf("response %s: %v", o.body, err)
	}
	got := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		got[f.ItemIdentifier] = true
	}
	if len(got) != len(want) || len(resp.BatchItemFailures) != len(want) {
		t.Errorf("batch item failures %s, want the snoozed task's and the orphan's messages %v", o.body, want)
	}
	for id := range want {
		if !got[id] {
			t.Errorf("message %s is not a batch item failure: %s", id, o.body)
		}
	}
	if tk, err := a.Store.Get(ctx, greet); err != nil || tk.Status != triagetype.Completed || string(tk.Result) != `"hi"` {
		t.Errorf("greet after the invocation: %+v %v", tk, err)
	}
	if tk, err := a.Store.Get(ctx, later); err != nil || tk.Status != triagetype.Retrying || tk.Attempts != 0 {
		t.Errorf("later after the invocation: %+v %v, want retrying (snoozed), no attempt spent", tk, err)
	}
	d, err := a.Queues.Depth(ctx, triagetype.Medium)
	if err != nil {
		t.Fatal(err)
	}
	if d.Visible+d.InFlight+d.Delayed != 2 {
		t.Errorf("medium queue after the invocation: %+v, want the snoozed task's and the orphan's messages", d)
	}

	// Scheduled mode: the same binary polls, finds another greet and
	// answers with its summary.
	again := submit("greet")
	sched, err := os.ReadFile(filepath.Join("testdata", "eventbridge-scheduled.json"))
	if err != nil {
		t.Fatal(err)
	}
	o = invokePackage(t, "../worker/testdata/lambda", "worker", sched, 45*time.Second, fenv)
	var sum struct {
		WorkerID string `json:"worker_id"`
	}
	if o.kind != "response" || json.Unmarshal(o.body, &sum) != nil || sum.WorkerID == "" {
		t.Fatalf("scheduled invocation returned %s %s", o.kind, o.body)
	}
	if tk, err := a.Store.Get(ctx, again); err != nil || tk.Status != triagetype.Completed {
		t.Errorf("greet after the scheduled invocation: %+v %v", tk, err)
	}
}

// Without TRIAGE_DEMO_HANDLERS the consumer function has no demo handlers:
// an echo task is a type with no handler, and goes to dead_letter (at
// once: TRIAGE_UNHANDLED_AFTER is 1 ms, so no other worker is waited for).
func TestConsumerFunctionWithoutDemoHandlers(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	r := task.Request{Type: "echo", Priority: "high"}
	tk, _, err := a.Enqueuer.Submit(context.Background(), r.NewTask(time.Now().UTC(), time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	event, err := os.ReadFile("testdata/eventbridge-scheduled.json")
	if err != nil {
		t.Fatal(err)
	}
	o := invoke(t, "consumer", event, 45*time.Second, map[string]string{"TRIAGE_PREFIX": env.Prefix, "TRIAGE_DEMO_HANDLERS": "", "TRIAGE_UNHANDLED_AFTER": "1ms"})
	if o.kind != "response" {
		t.Fatalf("consumer returned %s %s", o.kind, o.body)
	}
	got, err := a.Store.Get(context.Background(), tk.ID)
	if err != nil || got.Status != triagetype.DeadLetter || got.Error == nil || !strings.Contains(got.Error.Message, "no handler") {
		t.Fatalf("task after the consumer ran: %+v %v", got, err)
	}
}

func TestPromoterFunction(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	// A low task that has waited past a 1 s threshold gets promoted.
	r := task.Request{Type: "echo", Priority: "low"}
	tk, _, err := a.Enqueuer.Submit(context.Background(), r.NewTask(time.Now().UTC(), time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	event, err := os.ReadFile("testdata/eventbridge-scheduled.json")
	if err != nil {
		t.Fatal(err)
	}
	o := invoke(t, "promoter", event, 30*time.Second, map[string]string{"TRIAGE_PREFIX": env.Prefix, "TRIAGE_PROMOTE_LOW_AFTER": "1s"})
	if o.kind != "response" {
		t.Fatalf("promoter error: %s", o.body)
	}
	var rep struct {
		Promoted map[string]int `json:"promoted"`
	}
	if err := json.Unmarshal(o.body, &rep); err != nil || rep.Promoted["medium"] != 1 {
		t.Fatalf("report %s (%v)", o.body, err)
	}
	got, err := a.Store.Get(context.Background(), tk.ID)
	if err != nil || got.EffectivePriority != triagetype.Medium {
		t.Fatalf("task after promotion: %+v %v", got, err)
	}
}

// A function that cannot start logs one JSON error record to stderr, where
// Lambda collects it, and exits 1.
func TestStartFailureIsLoggedAsJSON(t *testing.T) {
	names := []string{"api", "consumer", "promoter", "counters"}
	// One go build for the four: it compiles what they share once and
	// links them side by side (four builds took 39 s under load).
	dir := t.TempDir()
	args := []string{"build", "-tags", "lambda.norpc", "-o", dir + string(filepath.Separator)}
	for _, name := range names {
		args = append(args, "./"+name)
	}
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(filepath.Join(dir, name))
			cmd.Env = append(os.Environ(), "TRIAGE_STRICT=maybe")
			var stderr strings.Builder
			cmd.Stderr = &stderr
			err := cmd.Run()
			if code := cmd.ProcessState.ExitCode(); code != 1 {
				t.Fatalf("exit code %d (%v), want 1; stderr:\n%s", code, err, stderr.String())
			}
			var rec struct {
				Level string `json:"level"`
				Msg   string `json:"msg"`
				Error string `json:"error"`
			}
			if err := json.Unmarshal([]byte(strings.TrimSpace(stderr.String())), &rec); err != nil {
				t.Fatalf("stderr is not one JSON record (%v):\n%s", err, stderr.String())
			}
			if rec.Level != "ERROR" || rec.Msg != "start "+name+" function" || !strings.Contains(rec.Error, "TRIAGE_STRICT") {
				t.Fatalf("record %+v", rec)
			}
		})
	}
}
