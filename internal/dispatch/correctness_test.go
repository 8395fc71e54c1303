package dispatch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/triagehq/triage/internal/app/consumerapp"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/enqueue"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triageconfig"
	"github.com/triagehq/triage/triagetype"
)

// Retries count attempts in DynamoDB, never SQS receives: with the queue's
// redrive at 5 receives, a task allowed 10 attempts that fails 9 times
// completes on its 10th attempt instead of being redriven at the 5th.
func TestRetriesHonourMaxAttemptsPastRedrive(t *testing.T) {
	t.Parallel() // its own stack; waits, not timing, make it slow
	env := stacktest.New(t)
	a := env.App(t, nil)
	if got := env.Spec.Queues[0].MaxReceiveCount; got >= 10 {
		t.Fatalf("the queue redrives after %d receives; the test needs fewer than 10", got)
	}
	tk := submitOne(t, a, task.Request{Type: "fail", Priority: "high", Payload: json.RawMessage(`{"times":9}`), MaxAttempts: intp(10)})
	opt := stacktest.FastDispatch()
	opt.Backoff = map[triagetype.Priority]triageconfig.Backoff{triagetype.High: {Base: 500 * time.Millisecond, Max: 500 * time.Millisecond}}
	stacktest.Run(t, consumerapp.New(a, demoRegistry(), opt, dispatch.Deps{}))
	done := stacktest.WaitStatus(t, a.Store, tk.ID, triagetype.Completed, 90*time.Second)
	if done.Attempts != 10 || string(done.Result) != `{"succeeded_on_attempt":10}` {
		t.Fatalf("attempts %d result %s error %+v; want completed on attempt 10", done.Attempts, done.Result, done.Error)
	}
	if msgs := dlqMessages(t, a, triagetype.High, 1); len(msgs) != 0 {
		t.Fatalf("the DLQ holds %d messages: %+v", len(msgs), msgs)
	}
}

// A message whose version no write of its task will reach goes to the DLQ
// with a reason at once, for a finished task too; it is not hidden and
// re-sent forever.
func TestMessageAheadOfItsTaskGoesToDLQ(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	tk := submitOne(t, a, task.Request{Type: "echo", Priority: "high", Payload: json.RawMessage(`{"x":1}`)})
	c := consumerapp.New(a, demoRegistry(), stacktest.FastDispatch(), dispatch.Deps{})
	stacktest.Run(t, c)
	stacktest.WaitStatus(t, a.Store, tk.ID, triagetype.Completed, 20*time.Second)
	sendRaw(t, env, triagetype.High, fmt.Sprintf(`{"id":%q,"v":999}`, tk.ID))
	msgs := dlqMessages(t, a, triagetype.High, 1)
	if len(msgs) != 1 || !strings.HasPrefix(msgs[0].Reason, queue.ReasonAhead) || !strings.Contains(msgs[0].Body, `"v":999`) {
		t.Fatalf("DLQ holds %+v; want the v=999 message with a reason", msgs)
	}
	if got := c.Counts(); got.Ahead != 1 {
		t.Fatalf("counts %+v, want Ahead 1", got)
	}
}

// A message naming a task that never existed (its submit crashed between
// the send and the record write, or it was forged) waits OrphanAfter for
// the record, then goes to the DLQ with a reason, and is counted. Early
// receives (consumers with no free slot) do not shorten the wait.
func TestMessageWithoutTaskGoesToDLQAfterGrace(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	opt := stacktest.FastDispatch()
	opt.OrphanAfter = 3 * time.Second
	ghost := task.NewID(time.Now())
	sent := time.Now()
	sendRaw(t, env, triagetype.Medium, fmt.Sprintf(`{"id":%q,"v":1,"p":"medium"}`, ghost))
	receiveIdly(t, env, triagetype.Medium, env.Spec.Queues[0].MaxReceiveCount-2)
	c := consumerapp.New(a, demoRegistry(), opt, dispatch.Deps{})
	stacktest.Run(t, c)
	msgs := dlqMessages(t, a, triagetype.Medium, 1)
	took := time.Since(sent)
	if len(msgs) != 1 || !strings.Contains(msgs[0].Reason, "no task "+ghost) {
		t.Fatalf("DLQ holds %+v; want the ghost's message with a reason", msgs)
	}
	if took < 3*time.Second {
		t.Fatalf("dead-lettered %v after the send, before the 3 s grace", took)
	}
	if got := c.Counts(); got.NoTask != 1 || got.Poison != 1 {
		t.Fatalf("counts %+v, want NoTask 1 and Poison 1", got)
	}
}

// A message whose id is not a task id (here, longer than DynamoDB takes as
// a key) goes to the DLQ with a reason at once, instead of failing its read
// on every receive.
func TestMessageWithMalformedIDGoesToDLQ(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	stacktest.Run(t, consumerapp.New(a, demoRegistry(), stacktest.FastDispatch(), dispatch.Deps{}))
	sendRaw(t, env, triagetype.High, fmt.Sprintf(`{"id":%q,"v":1}`, strings.Repeat("x", 3000)))
	msgs := dlqMessages(t, a, triagetype.High, 1)
	if len(msgs) != 1 || !strings.Contains(msgs[0].Reason, "is not a task id") {
		t.Fatalf("DLQ holds %+v; want the message with a reason", msgs)
	}
}

// Stale copies (here: a duplicate of a finished task's message) are
// deleted and counted, never run.
func TestStaleCopiesAreCounted(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	tk := submitOne(t, a, task.Request{Type: "echo", Priority: "low"})
	c := consumerapp.New(a, demoRegistry(), stacktest.FastDispatch(), dispatch.Deps{})
	stacktest.Run(t, c)
	stacktest.WaitStatus(t, a.Store, tk.ID, triagetype.Completed, 20*time.Second)
	sendRaw(t, env, triagetype.Low, fmt.Sprintf(`{"id":%q,"v":1,"p":"low"}`, tk.ID))
	deadline := time.Now().Add(15 * time.Second)
	for c.Counts().Stale == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if got := c.Counts(); got.Stale != 1 || got.Poison != 0 {
		t.Fatalf("counts %+v, want one stale copy and no poison", got)
	}
}

// A direct send is held to the API's rules: a misspelt field sends the
// message to the DLQ with a reason naming it, instead of running the task
// with a default.
func TestDirectSendWithUnknownFieldIsRejected(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	stacktest.Run(t, consumerapp.New(a, demoRegistry(), stacktest.FastDispatch(), dispatch.Deps{}))
	sendRaw(t, env, triagetype.Low, `{"type":"echo","payload":{},"max_attempt":5}`)
	msgs := dlqMessages(t, a, triagetype.Low, 1)
	if len(msgs) != 1 || !strings.Contains(msgs[0].Reason, "max_attempt") {
		t.Fatalf("DLQ holds %+v; want the message with a reason naming max_attempt", msgs)
	}
}

// A result over MaxResultBytes fails the task once, permanently, saying
// why: the handler is not run again for an outcome that can never be kept,
// and the task is not reported as a lost worker. (Results up to the limit
// are kept in the bucket when they are too large for the item: see
// TestLargeDirectSendAdoptedAndRun.)
func TestOversizedResultFailsOnce(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	tk := submitOne(t, a, task.Request{Type: "huge", Priority: "high", MaxAttempts: intp(3)})
	huge, _ := json.Marshal(strings.Repeat("x", task.MaxResultBytes))
	l := newLedger(func(context.Context, handler.Request) (json.RawMessage, error) { return huge, nil })
	stacktest.Run(t, consumerapp.New(a, stacktest.Registry("huge", l), stacktest.FastDispatch(), dispatch.Deps{}))
	dead := stacktest.WaitStatus(t, a.Store, tk.ID, triagetype.DeadLetter, 30*time.Second)
	if dead.Attempts != 1 || dead.Error == nil || dead.Error.Retriable || !strings.Contains(dead.Error.Message, "the limit is") {
		t.Fatalf("attempts %d error %+v; want one attempt and a permanent 'the limit is'", dead.Attempts, dead.Error)
	}
	time.Sleep(2 * time.Second) // a second run would have started by now
	checkOnce(t, l, []string{tk.ID})
}

// A cancel request reaches a running handler within about the cancel
// check interval (1 s), not at the next heartbeat (a third of the lease).
func TestCancelReachesRunningHandlerQuickly(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	tk := submitOne(t, a, task.Request{Type: "sleep", Priority: "high", Payload: json.RawMessage(`{"ms":20000}`), TimeoutSeconds: intp(60)})
	opt := stacktest.FastDispatch()
	opt.Lease = 30 * time.Second // heartbeat every 10 s
	stacktest.Run(t, consumerapp.New(a, demoRegistry(), opt, dispatch.Deps{}))
	stacktest.WaitStatus(t, a.Store, tk.ID, triagetype.Executing, 20*time.Second)
	asked := time.Now()
	if _, err := a.Store.Cancel(context.Background(), tk.ID); err != nil {
		t.Fatal(err)
	}
	done := stacktest.WaitStatus(t, a.Store, tk.ID, triagetype.Cancelled, 15*time.Second)
	took := done.CompletedAt.Sub(asked)
	t.Logf("cancel reached the handler and was recorded %v after the request", took)
	if took > 5*time.Second {
		t.Fatalf("cancel took %v; want about a second (the heartbeat is every 10 s)", took)
	}
}

func sendRaw(t *testing.T, env *stacktest.Env, p triagetype.Priority, body string) {
	t.Helper()
	if _, err := env.SQS.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(env.QueueURLs[p]), MessageBody: aws.String(body)}); err != nil {
		t.Fatal(err)
	}
}

// receiveIdly receives p's messages n times and hands each back at once,
// as consumers with no free slot (or ones killed before they acted) do:
// each receive counts toward SQS's redrive threshold.
func receiveIdly(t *testing.T, env *stacktest.Env, p triagetype.Priority, n int) {
	t.Helper()
	ctx := context.Background()
	for got := 0; got < n; {
		out, err := env.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(env.QueueURLs[p]), MaxNumberOfMessages: 1, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			if _, err := env.SQS.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(env.QueueURLs[p]), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
		got += len(out.Messages)
	}
}

// The stranded task of issue #31: a task's message is sent, received a
// few times before anything acts on it, and its record lands seconds
// later (a slow batch write). The first consumer to look sees a message
// one receive short of SQS's redrive threshold with no record. An orphan
// is judged by its age since the first send, so the consumer puts the
// message off (replacing it by a copy that keeps its origin) instead of
// giving it up, and the task runs once its record is there.
func TestSlowRecordAfterEarlyReceivesRuns(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	ctx := context.Background()
	req := task.Request{Type: "echo", Priority: "medium"}
	tk := req.NewTask(time.Now().UTC(), 15*time.Minute)
	sendRaw(t, env, triagetype.Medium, enqueue.Body(tk, tk.DispatchVersion))
	maxRecv := env.Spec.Queues[0].MaxReceiveCount
	receiveIdly(t, env, triagetype.Medium, maxRecv-2) // the consumer's receive is the last before the redrive
	opt := stacktest.FastDispatch()
	opt.OrphanAfter = 30 * time.Second
	c := consumerapp.New(a, demoRegistry(), opt, dispatch.Deps{})
	stacktest.Run(t, c)
	// The record lands only after the consumer has seen the message (the
	// old rule gave it up on that receive, 3 s after the send).
	// The message stops being visible when the consumer receives it.
	deadline := time.Now().Add(20 * time.Second)
	for {
		d, err := a.Queues.Depth(ctx, triagetype.Medium)
		if err != nil {
			t.Fatal(err)
		}
		if d.Visible == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the consumer never received the message: %+v", d)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second)
	if _, _, err := a.Store.Create(ctx, tk); err != nil {
		t.Fatal(err)
	}
	stacktest.WaitStatus(t, a.Store, tk.ID, triagetype.Completed, 30*time.Second)
	if got := c.Counts(); got.NoTask != 0 || got.Poison != 0 {
		t.Fatalf("counts %+v: the message was given up as an orphan", got)
	}
	if d, err := a.Queues.Depth(ctx, triagetype.Medium); err != nil || d.DLQ != 0 {
		t.Fatalf("medium DLQ %+v %v; want empty", d, err)
	}
}
