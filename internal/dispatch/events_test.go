package dispatch_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triageconfig"
	"github.com/triagehq/triage/triagetype"
)

// TestRetriesHonourMaxAttemptsPastRedrive with the consumer started by
// SQS events, as in Lambda: every retry hides the message rather than
// deleting it, so each event record of a retried attempt must be reported
// as a batch item failure, and the copy refreshed before the redrive
// threshold deleted. A task allowed 10 attempts that fails 9 times
// completes on its 10th, and nothing reaches the DLQ.
func TestEventsRetriesHonourMaxAttemptsPastRedrive(t *testing.T) {
	t.Parallel() // its own stack; waits, not timing, make it slow
	env := stacktest.New(t)
	a := env.App(t, nil)
	tk := submitOne(t, a, task.Request{Type: "fail", Priority: "high", Payload: json.RawMessage(`{"times":9}`), MaxAttempts: intp(10)})
	opt := stacktest.FastDispatch()
	opt.Backoff = map[triagetype.Priority]triageconfig.Backoff{triagetype.High: {Base: 500 * time.Millisecond, Max: 500 * time.Millisecond}}
	src := stacktest.Events(a, demoRegistry(), opt)
	stacktest.Run(t, src)
	done := stacktest.WaitStatus(t, a.Store, tk.ID, triagetype.Completed, 3*time.Minute)
	if done.Attempts != 10 || string(done.Result) != `{"succeeded_on_attempt":10}` {
		t.Fatalf("attempts %d result %s error %+v; want completed on attempt 10", done.Attempts, done.Result, done.Error)
	}
	if msgs := dlqMessages(t, a, triagetype.High, 1); len(msgs) != 0 {
		t.Fatalf("the DLQ holds %d messages: %+v", len(msgs), msgs)
	}
	t.Logf("event source: %+v", src.Stats())
}

// TestCancelReachesRunningHandlerQuickly with the consumer started by SQS
// events: a cancel request reaches the running handler and the task ends
// cancelled.
func TestEventsCancelReachesRunningHandler(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	tk := submitOne(t, a, task.Request{Type: "sleep", Priority: "high", Payload: json.RawMessage(`{"ms":20000}`), TimeoutSeconds: intp(60)})
	opt := stacktest.FastDispatch()
	opt.Lease = 30 * time.Second
	stacktest.Run(t, stacktest.Events(a, demoRegistry(), opt))
	stacktest.WaitStatus(t, a.Store, tk.ID, triagetype.Executing, 30*time.Second)
	if _, err := a.Store.Cancel(context.Background(), tk.ID); err != nil {
		t.Fatal(err)
	}
	done := stacktest.WaitStatus(t, a.Store, tk.ID, triagetype.Cancelled, time.Minute)
	if done.CompletedAt == nil {
		t.Errorf("cancelled task without an end time: %+v", done)
	}
}
