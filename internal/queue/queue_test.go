package queue_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/triagetype"
)

func TestMain(m *testing.M) { stacktest.Main(m) }

// newQueues bootstraps a fresh set of queues and resolves them by name.
func newQueues(t *testing.T) (*stacktest.Env, *queue.Queues) {
	t.Helper()
	env := stacktest.New(t)
	q, err := queue.Resolve(context.Background(), env.SQS, env.Spec, nil, nil)
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	return env, q
}

// missingURLs returns URLs on the emulator's endpoint that name no queue.
func missingURLs(urls map[triagetype.Priority]string) map[triagetype.Priority]string {
	out := map[triagetype.Priority]string{}
	for p, u := range urls {
		out[p] = u + "-gone"
	}
	return out
}

// receiveAll receives from p's queue (hiding each message for a minute)
// until it holds want messages or timeout passes.
func receiveAll(t *testing.T, q *queue.Queues, p triagetype.Priority, want int, timeout time.Duration) []queue.Received {
	t.Helper()
	var got []queue.Received
	deadline := time.Now().Add(timeout)
	for len(got) < want && time.Now().Before(deadline) {
		msgs, err := q.Receive(context.Background(), p, queue.MaxBatch, time.Second, time.Minute)
		if err != nil {
			t.Fatalf("Receive(%s): %v", p, err)
		}
		got = append(got, msgs...)
	}
	if len(got) < want {
		t.Fatalf("received %d messages from %s within %v, want %d", len(got), p, timeout, want)
	}
	return got
}

// waitDepth polls p's counts until they equal want; SQS counts are approximate.
func waitDepth(t *testing.T, q *queue.Queues, p triagetype.Priority, want queue.Depth) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var got queue.Depth
	for {
		var err error
		got, err = q.Depth(context.Background(), p)
		if err != nil {
			t.Fatalf("Depth(%s): %v", p, err)
		}
		if got == want || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got != want {
		t.Fatalf("Depth(%s) = %+v, want %+v", p, got, want)
	}
}

func bodies(msgs []queue.Received) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Body
	}
	slices.Sort(out)
	return out
}

func TestResolveLooksUpOrKeepsURLs(t *testing.T) {
	env := stacktest.New(t)
	ctx := context.Background()
	given := map[triagetype.Priority]string{}
	givenDLQ := map[triagetype.Priority]string{}
	for _, p := range triagetype.Priorities() {
		// Unreachable on purpose: a URL that is given must be used as it
		// is, with no lookup that could fail.
		given[p] = "https://sqs.example.invalid/1/given-" + string(p)
		givenDLQ[p] = "https://sqs.example.invalid/1/given-" + string(p) + "-dlq"
	}
	tests := []struct {
		name         string
		urls, dlqs   map[triagetype.Priority]string
		wantURL      map[triagetype.Priority]string
		wantDLQURL   map[triagetype.Priority]string
		wantErrQueue string // non-empty: Resolve fails naming this queue
		sp           spec.Spec
	}{
		{
			name: "nothing given: every queue is looked up by name",
			sp:   env.Spec, wantURL: env.QueueURLs, wantDLQURL: env.DLQURLs,
		},
		{
			name: "everything given: used as is",
			sp:   env.Spec, urls: given, dlqs: givenDLQ, wantURL: given, wantDLQURL: givenDLQ,
		},
		{
			name: "some given: the rest looked up",
			sp:   env.Spec,
			urls: map[triagetype.Priority]string{triagetype.High: given[triagetype.High]},
			dlqs: map[triagetype.Priority]string{triagetype.Low: givenDLQ[triagetype.Low]},
			wantURL: map[triagetype.Priority]string{
				triagetype.High: given[triagetype.High], triagetype.Medium: env.QueueURLs[triagetype.Medium], triagetype.Low: env.QueueURLs[triagetype.Low],
			},
			wantDLQURL: map[triagetype.Priority]string{
				triagetype.High: env.DLQURLs[triagetype.High], triagetype.Medium: env.DLQURLs[triagetype.Medium], triagetype.Low: givenDLQ[triagetype.Low],
			},
		},
		{
			name:         "queues that do not exist",
			sp:           spec.New(env.Prefix + "-absent"),
			wantErrQueue: env.Prefix + "-absent-high",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, err := queue.Resolve(ctx, env.SQS, tc.sp, tc.urls, tc.dlqs)
			if tc.wantErrQueue != "" {
				var dne *types.QueueDoesNotExist
				if !errors.As(err, &dne) {
					t.Fatalf("Resolve err = %v, want a wrapped *types.QueueDoesNotExist", err)
				}
				if !strings.Contains(err.Error(), "look up queue "+tc.wantErrQueue) {
					t.Fatalf("Resolve err = %q, want it to name queue %s", err, tc.wantErrQueue)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			for _, p := range triagetype.Priorities() {
				if got := q.URL(p); got != tc.wantURL[p] {
					t.Errorf("URL(%s) = %q, want %q", p, got, tc.wantURL[p])
				}
				if got := q.DLQURL(p); got != tc.wantDLQURL[p] {
					t.Errorf("DLQURL(%s) = %q, want %q", p, got, tc.wantDLQURL[p])
				}
			}
		})
	}
}

func TestSendReceiveDeleteEachPriority(t *testing.T) {
	_, q := newQueues(t)
	ctx := context.Background()
	for _, p := range triagetype.Priorities() {
		t.Run(string(p), func(t *testing.T) {
			body := fmt.Sprintf(`{"id":"task-%s","v":1,"p":%q}`, p, p)
			before := time.Now()
			id, err := q.Send(ctx, p, body, 0)
			if err != nil {
				t.Fatalf("Send: %v", err)
			}
			after := time.Now()
			if id == "" {
				t.Fatal("Send returned an empty message id")
			}
			// The message lands on p's queue only.
			for _, other := range triagetype.Priorities() {
				want := queue.Depth{}
				if other == p {
					want.Visible = 1
				}
				waitDepth(t, q, other, want)
			}
			msgs := receiveAll(t, q, p, 1, 10*time.Second)
			if len(msgs) != 1 {
				t.Fatalf("received %d messages, want 1", len(msgs))
			}
			m := msgs[0]
			if m.MessageID != id || m.Body != body || m.Priority != p || m.ReceiptHandle == "" {
				t.Fatalf("received %+v, want message %s with body %s on %s", m, id, body, p)
			}
			if m.ReceiveCount != 1 || m.Reason != "" {
				t.Fatalf("ReceiveCount %d, Reason %q; want 1 and no reason on a main-queue message", m.ReceiveCount, m.Reason)
			}
			// Same machine, so the emulator's clock agrees with ours; SQS
			// timestamps have millisecond resolution.
			if m.SentAt.Before(before.Add(-2*time.Second)) || m.SentAt.After(after.Add(2*time.Second)) {
				t.Fatalf("SentAt %v, want between %v and %v", m.SentAt, before, after)
			}
			waitDepth(t, q, p, queue.Depth{InFlight: 1})
			if err := q.Delete(ctx, p, m.ReceiptHandle); err != nil {
				t.Fatalf("Delete: %v", err)
			}
			waitDepth(t, q, p, queue.Depth{})
		})
	}
}

func TestReceiveClampsCountToOneThroughTen(t *testing.T) {
	_, q := newQueues(t)
	ctx := context.Background()
	const sent = 30
	msgs := make([]queue.Outgoing, sent)
	for i := range msgs {
		msgs[i] = queue.Outgoing{ID: fmt.Sprint(i), Body: fmt.Sprint("m", i)}
	}
	if err := q.SendBatch(ctx, triagetype.Low, msgs); err != nil {
		t.Fatalf("SendBatch: %v", err)
	}
	waitDepth(t, q, triagetype.Low, queue.Depth{Visible: sent})
	for _, tc := range []struct {
		n, max int
	}{
		{n: -1, max: 1},
		{n: 0, max: 1},
		{n: 3, max: 3},
		{n: 50, max: queue.MaxBatch}, // SQS refuses more than ten per receive
	} {
		t.Run(fmt.Sprint("n=", tc.n), func(t *testing.T) {
			got, err := q.Receive(ctx, triagetype.Low, tc.n, 2*time.Second, time.Minute)
			if err != nil {
				t.Fatalf("Receive(n=%d): %v", tc.n, err)
			}
			if len(got) < 1 || len(got) > tc.max {
				t.Fatalf("Receive(n=%d) returned %d messages, want 1..%d", tc.n, len(got), tc.max)
			}
		})
	}
}

func TestSendBatchSplitsIntoRequestsOfTen(t *testing.T) {
	_, q := newQueues(t)
	ctx := context.Background()
	for _, n := range []int{0, 1, queue.MaxBatch, queue.MaxBatch + 1, 25} {
		t.Run(fmt.Sprint(n, " messages"), func(t *testing.T) {
			msgs := make([]queue.Outgoing, n)
			want := make([]string, n)
			for i := range msgs {
				want[i] = fmt.Sprintf("batch-%d-%02d", n, i)
				msgs[i] = queue.Outgoing{ID: fmt.Sprint(i), Body: want[i]}
			}
			slices.Sort(want)
			if err := q.SendBatch(ctx, triagetype.Medium, msgs); err != nil {
				t.Fatalf("SendBatch(%d): %v", n, err)
			}
			waitDepth(t, q, triagetype.Medium, queue.Depth{Visible: n})
			got := receiveAll(t, q, triagetype.Medium, n, 15*time.Second)
			if b := bodies(got); !slices.Equal(b, want) {
				t.Fatalf("received bodies %v, want %v", b, want)
			}
			receipts := make([]string, len(got))
			for i, m := range got {
				receipts[i] = m.ReceiptHandle
			}
			if err := q.DeleteBatch(ctx, triagetype.Medium, receipts); err != nil {
				t.Fatalf("DeleteBatch: %v", err)
			}
			waitDepth(t, q, triagetype.Medium, queue.Depth{})
		})
	}
}

func TestSendBatchReportsFailedEntries(t *testing.T) {
	env, q := newQueues(t)
	ctx := context.Background()
	gone, err := queue.Resolve(ctx, env.SQS, env.Spec, missingURLs(env.QueueURLs), env.DLQURLs)
	if err != nil {
		t.Fatal(err)
	}
	batch := func(bad int) []queue.Outgoing {
		msgs := make([]queue.Outgoing, 12)
		for i := range msgs {
			msgs[i] = queue.Outgoing{ID: fmt.Sprint("e", i), Body: fmt.Sprint("body-", i)}
		}
		if bad >= 0 {
			msgs[bad].Body = "not allowed in SQS: \x00"
		}
		return msgs
	}
	tests := []struct {
		name       string
		q          *queue.Queues
		msgs       []queue.Outgoing
		wantFailed []string
		wantSent   int
	}{
		{
			name: "one entry refused in the second request: only it fails",
			q:    q, msgs: batch(11), wantFailed: []string{"e11"}, wantSent: 11,
		},
		{
			name: "one entry refused in the first request: only it fails",
			q:    q, msgs: batch(3), wantFailed: []string{"e3"}, wantSent: 11,
		},
		{
			name: "queue missing: every entry of every request fails",
			q:    gone, msgs: batch(-1),
			wantFailed: []string{"e0", "e1", "e10", "e11", "e2", "e3", "e4", "e5", "e6", "e7", "e8", "e9"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.q.SendBatch(ctx, triagetype.High, tc.msgs)
			var be *queue.BatchError
			if !errors.As(err, &be) {
				t.Fatalf("SendBatch err = %v, want a *queue.BatchError", err)
			}
			if got := slices.Sorted(maps.Keys(be.Failed)); !slices.Equal(got, tc.wantFailed) {
				t.Fatalf("failed entries %v, want %v", got, tc.wantFailed)
			}
			for id, reason := range be.Failed {
				if reason == "" {
					t.Errorf("entry %s failed with no reason", id)
				}
			}
			if want := fmt.Sprintf("%d batch entries failed", len(tc.wantFailed)); be.Error() != want {
				t.Errorf("Error() = %q, want %q", be.Error(), want)
			}
			got := receiveAll(t, q, triagetype.High, tc.wantSent, 10*time.Second)
			if len(got) != tc.wantSent {
				t.Fatalf("received %d messages, want the %d good entries", len(got), tc.wantSent)
			}
			for _, m := range got {
				if err := q.Delete(ctx, triagetype.High, m.ReceiptHandle); err != nil {
					t.Fatal(err)
				}
			}
			waitDepth(t, q, triagetype.High, queue.Depth{})
		})
	}
}

func TestSendDelay(t *testing.T) {
	tests := []struct {
		name  string
		delay time.Duration
		// visibleNow: the message can be received at once; otherwise it is
		// counted as delayed.
		visibleNow bool
	}{
		{name: "no delay", delay: 0, visibleNow: true},
		{name: "negative delay is no delay", delay: -time.Minute, visibleNow: true},
		{name: "ten minutes", delay: 10 * time.Minute},
		{name: "over SQS's 15 minute limit is capped, not refused", delay: 2 * time.Hour},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, q := newQueues(t)
			ctx := context.Background()
			if _, err := q.Send(ctx, triagetype.Medium, "delayed?", tc.delay); err != nil {
				t.Fatalf("Send(delay %v): %v", tc.delay, err)
			}
			if tc.visibleNow {
				waitDepth(t, q, triagetype.Medium, queue.Depth{Visible: 1})
				receiveAll(t, q, triagetype.Medium, 1, 5*time.Second)
				return
			}
			waitDepth(t, q, triagetype.Medium, queue.Depth{Delayed: 1})
			if got, err := q.Receive(ctx, triagetype.Medium, 10, time.Second, 0); err != nil || len(got) != 0 {
				t.Fatalf("Receive during the delay = %d messages, %v; want none", len(got), err)
			}
		})
	}
}

// A delay under a second is rounded up to one second, never down to none.
func TestSendSubSecondDelayRoundsUp(t *testing.T) {
	_, q := newQueues(t)
	ctx := context.Background()
	start := time.Now()
	if _, err := q.Send(ctx, triagetype.High, "soon", 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	got, err := q.Receive(ctx, triagetype.High, 1, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Only conclusive while less than the rounded-up second has passed
	// since before the send; on a stalled machine, skip this half.
	if elapsed := time.Since(start); elapsed < 700*time.Millisecond {
		if len(got) != 0 {
			t.Fatalf("a 100 ms delay was received after %v: it was rounded down to no delay", elapsed)
		}
	} else {
		t.Logf("send and receive took %v; not checking that the message was still delayed", elapsed)
	}
	receiveAll(t, q, triagetype.High, 1, 10*time.Second)
}

func TestChangeVisibility(t *testing.T) {
	_, q := newQueues(t)
	ctx := context.Background()
	tests := []struct {
		name string
		d    time.Duration
		// roundedUp: d is under a second and must still hide the message
		// for a whole second.
		roundedUp bool
	}{
		{name: "zero releases at once", d: 0},
		{name: "negative releases at once", d: -time.Hour},
		{name: "one millisecond hides for a second", d: time.Millisecond, roundedUp: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := q.Send(ctx, triagetype.Low, tc.name, 0); err != nil {
				t.Fatal(err)
			}
			first := receiveAll(t, q, triagetype.Low, 1, 5*time.Second)[0]
			// Hidden for a minute: nothing to receive now.
			if got, err := q.Receive(ctx, triagetype.Low, 10, 0, 0); err != nil || len(got) != 0 {
				t.Fatalf("Receive while hidden = %d messages, %v; want none", len(got), err)
			}
			start := time.Now()
			if err := q.ChangeVisibility(ctx, triagetype.Low, first.ReceiptHandle, tc.d); err != nil {
				t.Fatalf("ChangeVisibility(%v): %v", tc.d, err)
			}
			if tc.roundedUp {
				got, err := q.Receive(ctx, triagetype.Low, 10, 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				if elapsed := time.Since(start); elapsed < 700*time.Millisecond && len(got) != 0 {
					t.Fatalf("message visible again %v after ChangeVisibility(%v): rounded down to zero", elapsed, tc.d)
				}
			}
			again := receiveAll(t, q, triagetype.Low, 1, 10*time.Second)[0]
			if again.MessageID != first.MessageID || again.ReceiveCount != 2 {
				t.Fatalf("received %s (receive count %d), want %s for the second time", again.MessageID, again.ReceiveCount, first.MessageID)
			}
			if err := q.Delete(ctx, triagetype.Low, again.ReceiptHandle); err != nil {
				t.Fatal(err)
			}
			waitDepth(t, q, triagetype.Low, queue.Depth{})
		})
	}

	t.Run("a long visibility keeps the message in flight", func(t *testing.T) {
		if _, err := q.Send(ctx, triagetype.Low, "long", 0); err != nil {
			t.Fatal(err)
		}
		m := receiveAll(t, q, triagetype.Low, 1, 5*time.Second)[0]
		// Over SQS's 12 h maximum: capped, not refused.
		if err := q.ChangeVisibility(ctx, triagetype.Low, m.ReceiptHandle, 48*time.Hour); err != nil {
			t.Fatalf("ChangeVisibility(48h): %v", err)
		}
		waitDepth(t, q, triagetype.Low, queue.Depth{InFlight: 1})
		if got, err := q.Receive(ctx, triagetype.Low, 10, time.Second, 0); err != nil || len(got) != 0 {
			t.Fatalf("Receive = %d messages, %v; want none", len(got), err)
		}
	})
}

func TestDeleteBatch(t *testing.T) {
	env, q := newQueues(t)
	ctx := context.Background()
	gone, err := queue.Resolve(ctx, env.SQS, env.Spec, missingURLs(env.QueueURLs), env.DLQURLs)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("nothing to delete", func(t *testing.T) {
		if err := q.DeleteBatch(ctx, triagetype.High, nil); err != nil {
			t.Fatalf("DeleteBatch(nil) = %v", err)
		}
	})

	const n = 23 // three requests: 10, 10, 3
	msgs := make([]queue.Outgoing, n)
	for i := range msgs {
		msgs[i] = queue.Outgoing{ID: fmt.Sprint(i), Body: fmt.Sprint("del-", i)}
	}
	if err := q.SendBatch(ctx, triagetype.High, msgs); err != nil {
		t.Fatal(err)
	}
	got := receiveAll(t, q, triagetype.High, n, 15*time.Second)
	receipts := make([]string, len(got))
	for i, m := range got {
		receipts[i] = m.ReceiptHandle
	}
	waitDepth(t, q, triagetype.High, queue.Depth{InFlight: n})

	t.Run("queue missing: every receipt is reported", func(t *testing.T) {
		err := gone.DeleteBatch(ctx, triagetype.High, receipts)
		var be *queue.BatchError
		if !errors.As(err, &be) {
			t.Fatalf("DeleteBatch err = %v, want a *queue.BatchError", err)
		}
		if gotKeys, want := slices.Sorted(maps.Keys(be.Failed)), slices.Sorted(slices.Values(receipts)); !slices.Equal(gotKeys, want) {
			t.Fatalf("failed receipts %v, want all %d", gotKeys, len(want))
		}
		waitDepth(t, q, triagetype.High, queue.Depth{InFlight: n})
	})

	t.Run("all deleted across three requests", func(t *testing.T) {
		if err := q.DeleteBatch(ctx, triagetype.High, receipts); err != nil {
			t.Fatalf("DeleteBatch: %v", err)
		}
		waitDepth(t, q, triagetype.High, queue.Depth{})
	})
}

func TestSendDLQCarriesReason(t *testing.T) {
	_, q := newQueues(t)
	ctx := context.Background()
	long := strings.Repeat("r", 1500)
	tests := []struct {
		name, reason, want string
	}{
		{name: "reason kept", reason: "handler panicked: nil map", want: "handler panicked: nil map"},
		{name: "empty reason", reason: "", want: "unspecified"},
		{name: "long reason cut to 1024 bytes", reason: long, want: long[:1024-len("…")] + "…"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := triagetype.Priorities()[i%3]
			body := fmt.Sprintf(`{"id":"dead-%d","v":3}`, i)
			if err := q.SendDLQ(ctx, p, body, tc.reason); err != nil {
				t.Fatalf("SendDLQ: %v", err)
			}
			waitDepth(t, q, p, queue.Depth{DLQ: 1})
			msgs, err := q.ReceiveDLQ(ctx, p, 10, 5*time.Second, time.Minute)
			if err != nil || len(msgs) != 1 {
				t.Fatalf("ReceiveDLQ = %d messages, %v; want 1", len(msgs), err)
			}
			m := msgs[0]
			if m.Body != body || m.Reason != tc.want || m.Priority != p || m.ReceiveCount != 1 {
				t.Fatalf("DLQ message body %q reason %q (len %d) priority %s receives %d; want %q, %q (len %d), %s, 1",
					m.Body, m.Reason, len(m.Reason), m.Priority, m.ReceiveCount, body, tc.want, len(tc.want), p)
			}
			// The main queue is untouched.
			if got, err := q.Receive(ctx, p, 10, 0, 0); err != nil || len(got) != 0 {
				t.Fatalf("main queue Receive = %d, %v; want none", len(got), err)
			}
			// Release it, receive it again, and delete it, all on the DLQ.
			if err := q.ChangeVisibilityDLQ(ctx, p, m.ReceiptHandle, 0); err != nil {
				t.Fatalf("ChangeVisibilityDLQ: %v", err)
			}
			var again []queue.Received
			for deadline := time.Now().Add(10 * time.Second); len(again) == 0 && time.Now().Before(deadline); {
				if again, err = q.ReceiveDLQ(ctx, p, 10, time.Second, time.Minute); err != nil {
					t.Fatal(err)
				}
			}
			if len(again) != 1 || again[0].MessageID != m.MessageID || again[0].ReceiveCount != 2 || again[0].Reason != tc.want {
				t.Fatalf("after release: %+v, want message %s again with receive count 2 and its reason", again, m.MessageID)
			}
			if err := q.DeleteDLQ(ctx, p, again[0].ReceiptHandle); err != nil {
				t.Fatalf("DeleteDLQ: %v", err)
			}
			waitDepth(t, q, p, queue.Depth{})
		})
	}
}

func TestDepthCountsEveryState(t *testing.T) {
	_, q := newQueues(t)
	ctx := context.Background()
	// Medium: 5 sent, 2 of them received (in flight), 1 delayed, 2 in the DLQ.
	for i := range 5 {
		if _, err := q.Send(ctx, triagetype.Medium, fmt.Sprint("ready-", i), 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.Send(ctx, triagetype.Medium, "later", 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := q.SendDLQ(ctx, triagetype.Medium, fmt.Sprint("dead-", i), "test"); err != nil {
			t.Fatal(err)
		}
	}
	waitDepth(t, q, triagetype.Medium, queue.Depth{Visible: 5, Delayed: 1, DLQ: 2})
	got, err := q.Receive(ctx, triagetype.Medium, 2, time.Second, time.Minute)
	if err != nil || len(got) != 2 {
		t.Fatalf("Receive = %d messages, %v; want 2", len(got), err)
	}
	waitDepth(t, q, triagetype.Medium, queue.Depth{Visible: 3, InFlight: 2, Delayed: 1, DLQ: 2})
	// The other priorities are separate queues and stay empty.
	waitDepth(t, q, triagetype.High, queue.Depth{})
	waitDepth(t, q, triagetype.Low, queue.Depth{})
}

func TestErrorsWrapMissingQueue(t *testing.T) {
	env := stacktest.New(t)
	ctx := context.Background()
	gone, err := queue.Resolve(ctx, env.SQS, env.Spec, missingURLs(env.QueueURLs), missingURLs(env.DLQURLs))
	if err != nil {
		t.Fatal(err)
	}
	dlqGone, err := queue.Resolve(ctx, env.SQS, env.Spec, env.QueueURLs, missingURLs(env.DLQURLs))
	if err != nil {
		t.Fatal(err)
	}
	p := triagetype.High
	url, dlq := gone.URL(p), gone.DLQURL(p)
	tests := []struct {
		name     string
		call     func() error
		wantText string
	}{
		{"Send", func() error { _, err := gone.Send(ctx, p, "x", 0); return err }, "send to high queue"},
		{"Receive", func() error { _, err := gone.Receive(ctx, p, 1, 0, 0); return err }, "receive from " + url},
		{"ReceiveDLQ", func() error { _, err := gone.ReceiveDLQ(ctx, p, 1, 0, 0); return err }, "receive from " + dlq},
		{"Delete", func() error { return gone.Delete(ctx, p, "receipt") }, "delete from " + url},
		{"DeleteDLQ", func() error { return gone.DeleteDLQ(ctx, p, "receipt") }, "delete from " + dlq},
		{"ChangeVisibility", func() error { return gone.ChangeVisibility(ctx, p, "receipt", time.Second) }, "change visibility on " + url},
		{"ChangeVisibilityDLQ", func() error { return gone.ChangeVisibilityDLQ(ctx, p, "receipt", time.Second) }, "change visibility on " + dlq},
		{"SendDLQ", func() error { return gone.SendDLQ(ctx, p, "x", "why") }, "send to high DLQ"},
		{"Depth of the queue", func() error { _, err := gone.Depth(ctx, p); return err }, "attributes of high queue"},
		{"Depth of the DLQ", func() error { _, err := dlqGone.Depth(ctx, p); return err }, "attributes of high DLQ"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			var dne *types.QueueDoesNotExist
			if !errors.As(err, &dne) {
				t.Fatalf("err = %v, want a wrapped *types.QueueDoesNotExist", err)
			}
			if !strings.Contains(err.Error(), tc.wantText) {
				t.Fatalf("err = %q, want it to say %q", err, tc.wantText)
			}
			if queue.IsGone(err) {
				t.Fatalf("IsGone(%v) = true for a missing queue; that is not a gone message", err)
			}
		})
	}
}

func TestIsGone(t *testing.T) {
	_, q := newQueues(t)
	ctx := context.Background()
	if _, err := q.Send(ctx, triagetype.Medium, "gone soon", 0); err != nil {
		t.Fatal(err)
	}
	m := receiveAll(t, q, triagetype.Medium, 1, 5*time.Second)[0]
	if err := q.Delete(ctx, triagetype.Medium, m.ReceiptHandle); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		err  func() error
		want bool
	}{
		{"visibility of a deleted message", func() error {
			return q.ChangeVisibility(ctx, triagetype.Medium, m.ReceiptHandle, time.Minute)
		}, true},
		{"visibility of a receipt handle never issued", func() error {
			return q.ChangeVisibility(ctx, triagetype.Medium, "no-such-receipt", time.Minute)
		}, true},
		{"wrapped ReceiptHandleIsInvalid", func() error {
			return fmt.Errorf("outer: %w", &types.ReceiptHandleIsInvalid{})
		}, true},
		{"wrapped MessageNotInflight", func() error {
			return fmt.Errorf("outer: %w", &types.MessageNotInflight{})
		}, true},
		{"another SQS error", func() error { return fmt.Errorf("outer: %w", &types.QueueDoesNotExist{}) }, false},
		{"a plain error", func() error { return errors.New("receipt handle is invalid") }, false},
		{"nil", func() error { return nil }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.err()
			if got := queue.IsGone(err); got != tc.want {
				t.Fatalf("IsGone(%v) = %v, want %v", err, got, tc.want)
			}
		})
	}
}

// A reason cut at 1024 bytes never ends in half a character.
func TestSendDLQCutsReasonAtACharacter(t *testing.T) {
	_, q := newQueues(t)
	ctx := context.Background()
	reason := strings.Repeat("a", 1020) + "é" + "bbbb" // 1026 bytes; é straddles the cut at 1021 (1024 less the 3-byte mark)
	if err := q.SendDLQ(ctx, triagetype.Low, `{"id":"x","v":1}`, reason); err != nil {
		t.Fatal(err)
	}
	msgs, err := q.ReceiveDLQ(ctx, triagetype.Low, 1, 5*time.Second, time.Minute)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("ReceiveDLQ = %d messages, %v", len(msgs), err)
	}
	if got, want := msgs[0].Reason, strings.Repeat("a", 1020)+"…"; got != want {
		t.Fatalf("reason ends %q (len %d), want the a's cut to fit the mark, no broken character", got[len(got)-3:], len(got))
	}
}

// Receive settings SQS would refuse or ignore are brought into range: a
// wait over 20 s is capped (SQS rejects it), and a visibility under a
// second rounds up to one (0 would mean the queue's default, 60 s).
func TestReceiveBringsWaitAndVisibilityIntoRange(t *testing.T) {
	_, q := newQueues(t)
	ctx := context.Background()
	if _, err := q.Send(ctx, triagetype.Medium, "m", 0); err != nil {
		t.Fatal(err)
	}
	got, err := q.Receive(ctx, triagetype.Medium, 1, time.Minute, 500*time.Millisecond)
	if err != nil || len(got) != 1 {
		t.Fatalf("Receive with a 1 min wait = %d, %v; want the message", len(got), err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		again, err := q.Receive(ctx, triagetype.Medium, 1, time.Second, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(again) == 1 {
			if again[0].ReceiveCount != 2 {
				t.Fatalf("receive count %d, want 2", again[0].ReceiveCount)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the message stayed hidden: a 500 ms visibility was not rounded up to 1 s")
		}
	}
}
