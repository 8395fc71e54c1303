package deadletter_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/app/consumerapp"
	"github.com/triagehq/triage/internal/deadletter"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/promote"
	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// pausing is the promoter's view of the DLQs, stopped once mid-run so a
// replay or purge can run in the middle of a reconciliation: right after
// the reconciliation's first receive from the high DLQ returned (at
// "receive", its messages hidden) or right after it handed that
// receive's messages back (at "handback").
type pausing struct {
	*queue.Queues
	at       string
	during   func()
	paused   bool
	received int // messages the reconciliation received before the pause
	// The requests it made, and afterBack, if set, runs after each
	// hand-back.
	receives, handbacks int
	afterBack           func(triagetype.Priority)
}

func (q *pausing) ReceiveDLQ(ctx context.Context, p triagetype.Priority, n int, wait, vis time.Duration) ([]queue.Received, error) {
	q.receives++
	msgs, err := q.Queues.ReceiveDLQ(ctx, p, n, wait, vis)
	if p == triagetype.High && len(msgs) > 0 && q.received == 0 {
		q.received = len(msgs)
		if q.at == "receive" {
			q.paused = true
			q.during()
		}
	}
	return msgs, err
}

func (q *pausing) ChangeVisibilityBatchDLQ(ctx context.Context, p triagetype.Priority, receipts []string, d time.Duration) error {
	q.handbacks++
	err := q.Queues.ChangeVisibilityBatchDLQ(ctx, p, receipts, d)
	if q.afterBack != nil {
		q.afterBack(p)
	}
	if q.at == "handback" && p == triagetype.High && !q.paused {
		q.paused = true
		q.during()
	}
	return err
}

// counted is a replay's view of the DLQs that says when its first pass is
// over (its first count of a DLQ).
type counted struct {
	*queue.Queues
	once   sync.Once
	passed chan struct{}
}

func (q *counted) DLQCount(ctx context.Context, p triagetype.Priority) (int, error) {
	q.once.Do(func() { close(q.passed) })
	return q.Queues.DLQCount(ctx, p)
}

// notVisible is how many messages of p's DLQ someone holds right now.
func notVisible(t *testing.T, env *stacktest.Env, p triagetype.Priority) int {
	t.Helper()
	out, err := env.SQS.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(env.DLQURLs[p]), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessagesNotVisible},
	})
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	return n
}

// TestReplayAndPurgeDuringReconcile: the promoter's reconciliation used to
// hold every DLQ message it read until its run ended, so a replay or purge
// running meanwhile could not see them, and every replay and purge paid 2 s
// of rescans in case. Now the reconciliation hands each receive's messages
// back at once. On fauxqs through the SDK, 15 dead tasks (12 high: more
// than one receive; 3 low), and a reconciliation stopped mid-run:
//   - right after it handed back its first receive (10 of the 12 high
//     messages read, 0 held): a replay, and later a purge, finds all 15 in
//     one pass and makes no rescan;
//   - inside the one request between its receive and the hand-back (10
//     held): the replay's pass replays the 5 it can see, notices the 10 it
//     could not (the DLQ's count), looks again once the reconciliation has
//     handed them back, and replays them too.
//
// After each step the DLQs hold no message and the reconciliation did
// nothing (no redriven message) without error. A whole run over the 15
// makes 11 SQS requests (21 when it held them all to its end) and holds
// nothing after each hand-back.
func TestReplayAndPurgeDuringReconcile(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	ctx := context.Background()
	reg := handler.NewRegistry()
	reg.Register("fail", handler.Func(func(context.Context, handler.Request) (json.RawMessage, error) {
		return nil, handler.Permanent(errors.New("bad input"))
	}))
	var ids []string
	for i := range 15 {
		p := triagetype.High
		if i >= 12 {
			p = triagetype.Low
		}
		req := task.Request{Type: "fail", Priority: p}
		tk, _, err := a.Enqueuer.Submit(ctx, req.NewTask(time.Now().UTC(), time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, tk.ID)
	}
	// kill runs a consumer until every task is dead again, then stops it,
	// so nothing fails anew (and adds to a DLQ) while a replay reads.
	kill := func() {
		t.Helper()
		stop := stacktest.Run(t, consumerapp.New(a, reg, dispatch.Options{PollWait: time.Second, EmptyBackoff: 50 * time.Millisecond}, dispatch.Deps{}))
		for _, id := range ids {
			stacktest.WaitStatus(t, a.Store, id, triagetype.DeadLetter, 60*time.Second)
		}
		stop()
		for deadline := time.Now().Add(10 * time.Second); dlqTotal(t, a) != len(ids); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the DLQs hold %d messages for %d dead tasks", dlqTotal(t, a), len(ids))
			}
		}
	}
	all := deadletter.Filter{Priorities: triagetype.Priorities(), Type: "fail", Limit: 1000}

	// reconcileWith runs one promoter run whose reconciliation stops at
	// `at` and runs during there.
	reconcileWith := func(at string, during func(q *pausing)) {
		t.Helper()
		q := &pausing{Queues: a.Queues, at: at}
		q.during = func() { during(q) }
		rep, err := promote.New(a.Store, a.Enqueuer, q, promote.Options{}).RunOnce(ctx)
		if err != nil || rep.Reconciled != 0 || rep.Errors != 0 {
			t.Fatalf("promoter run: %+v %v", rep, err)
		}
		if q.received != 10 {
			t.Fatalf("the reconciliation received %d high messages before its pause, want 10", q.received)
		}
	}

	kill()
	// A whole run first: what it costs, and that it holds nothing after
	// each hand-back. fauxqs puts a handed-back message at the end of the
	// line, so high (12) takes 3 receives (10 new, 2 new, none new) and 3
	// hand-backs, medium (empty) 1 receive, low (3) 2 and 2: 11 requests.
	// Holding all until the run ended took 6 receives and 15 single
	// ChangeMessageVisibility requests: 21.
	whole := &pausing{Queues: a.Queues}
	whole.afterBack = func(p triagetype.Priority) {
		if n := notVisible(t, env, p); n != 0 {
			t.Errorf("after a hand-back the reconciliation still holds %d %s messages", n, p)
		}
	}
	if rep, err := promote.New(a.Store, a.Enqueuer, whole, promote.Options{}).RunOnce(ctx); err != nil || rep.Reconciled != 0 || rep.Errors != 0 {
		t.Fatalf("promoter run: %+v %v", rep, err)
	}
	if whole.receives != 6 || whole.handbacks != 5 {
		t.Errorf("a run over 12 + 0 + 3 DLQ messages made %d receives and %d hand-backs, want 6 and 5", whole.receives, whole.handbacks)
	}
	dl := deadletter.New(a.Queues, a.Store, a.Enqueuer)
	reconcileWith("handback", func(*pausing) {
		if n := notVisible(t, env, triagetype.High); n != 0 {
			t.Errorf("after its hand-back the reconciliation still holds %d high messages", n)
		}
		r, err := dl.Replay(ctx, all)
		if err != nil || r.Replayed != 15 {
			t.Errorf("replay during the reconciliation: %+v %v, want 15 replayed", r, err)
		}
	})
	if got := dl.Rescans(); got != 0 {
		t.Errorf("the replay looked again %d times, want 0 (it saw every message)", got)
	}
	if n := dlqTotal(t, a); n != 0 {
		t.Fatalf("after the replay the DLQs hold %d messages, want 0", n)
	}

	kill()
	cq := &counted{Queues: a.Queues, passed: make(chan struct{})}
	dl = deadletter.New(cq, a.Store, a.Enqueuer)
	var r deadletter.ReplayResult
	var rerr error
	replayed := make(chan struct{})
	reconcileWith("receive", func(*pausing) {
		if n := notVisible(t, env, triagetype.High); n != 10 {
			t.Errorf("between its receive and its hand-back the reconciliation holds %d high messages, want 10", n)
		}
		go func() { r, rerr = dl.Replay(ctx, all); close(replayed) }()
		<-cq.passed // the replay's first pass is over: let the reconciliation hand back
	})
	<-replayed
	if rerr != nil || r.Replayed != 15 {
		t.Errorf("replay that met the reconciliation's receive: %+v %v, want 15 replayed", r, rerr)
	}
	if got := dl.Rescans(); got < 1 {
		t.Errorf("the replay looked again %d times, want at least 1 (10 messages were out of sight)", got)
	}
	t.Logf("a replay inside the reconciliation's receive-to-hand-back request looked again %d times", dl.Rescans())
	if n := dlqTotal(t, a); n != 0 {
		t.Fatalf("after the replay the DLQs hold %d messages, want 0", n)
	}

	kill()
	dl = deadletter.New(a.Queues, a.Store, a.Enqueuer)
	reconcileWith("handback", func(*pausing) {
		r, err := dl.Purge(ctx, all)
		if err != nil || r.Purged != 15 {
			t.Errorf("purge during the reconciliation: %+v %v, want 15 purged", r, err)
		}
	})
	if got := dl.Rescans(); got != 0 {
		t.Errorf("the purge looked again %d times, want 0", got)
	}
	if n := dlqTotal(t, a); n != 0 {
		t.Fatalf("after the purge the DLQs hold %d messages, want 0", n)
	}
}

// dlqTotal is what the three DLQs hold, visible or not.
func dlqTotal(t *testing.T, a *app.App) int {
	t.Helper()
	n := 0
	for _, p := range triagetype.Priorities() {
		c, err := a.Queues.DLQCount(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		n += c
	}
	return n
}
