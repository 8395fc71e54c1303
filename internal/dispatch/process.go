package dispatch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/triagehq/triage/internal/blob"
	"github.com/triagehq/triage/internal/enqueue"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/metrics"
	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/internal/tracing"
)

// job is one claimed task being run. mu guards cur, which the heartbeat
// replaces as it renews the lease. rep holds what the handler reported
// and no write has carried yet (nil until the handler runs).
type job struct {
	msg queue.Received
	rep *reporter
	mu  sync.Mutex
	cur *task.Task
}

func (j *job) snapshot() *task.Task {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.cur
}

func (j *job) set(t *task.Task) {
	j.mu.Lock()
	j.cur = t
	j.mu.Unlock()
}

// process handles one received message from start to finish.
func (c *Consumer) process(ctx context.Context, m queue.Received) {
	t, release, ok := c.claim(ctx, m)
	if !ok {
		return
	}
	defer release()
	c.execute(ctx, &job{msg: m, cur: t})
}

// probe reads just enough of a body to tell our messages from direct sends.
type probe struct {
	ID      string          `json:"id"`
	Version *int64          `json:"v"`
	Type    json.RawMessage `json:"type"`
}

// claim turns a message into a claimed task, or disposes of the message:
// poison to the DLQ, stale deleted, early or busy hidden for later.
func (c *Consumer) claim(ctx context.Context, m queue.Received) (*task.Task, func(), bool) {
	var pb probe
	if err := json.Unmarshal([]byte(m.Body), &pb); err != nil {
		c.mx.Dropped(metrics.DropInvalid)
		c.poison(ctx, m, fmt.Sprintf("body is not a JSON object: %v", err))
		return nil, nil, false
	}
	var msg task.Message
	switch {
	case pb.ID != "" && pb.Version != nil:
		if !task.ValidID(pb.ID) {
			// Not an id triage makes: it names no task, and as a key it may
			// be more than DynamoDB accepts.
			c.mx.Dropped(metrics.DropInvalid)
			c.poison(ctx, m, fmt.Sprintf("id %q is not a task id (a 26-character ULID)", task.Truncate(pb.ID, 64)))
			return nil, nil, false
		}
		msg = task.Message{ID: pb.ID, Version: *pb.Version, Priority: m.Priority}
	case pb.ID == "" && len(pb.Type) > 0:
		t, err := c.adopt(ctx, m)
		if err != nil {
			var fe *task.FieldError
			if errors.As(err, &fe) {
				c.mx.Dropped(metrics.DropInvalid)
				c.poison(ctx, m, "direct send rejected: "+fe.Error())
			} else {
				c.log.Warn("adopt direct send failed; it will be retried", "message_id", m.MessageID, "error", err)
			}
			return nil, nil, false
		}
		msg = task.Message{ID: t.ID, Version: 0, Priority: m.Priority}
	default:
		c.mx.Dropped(metrics.DropInvalid)
		c.poison(ctx, m, `body has neither "id" and "v" (a triage message) nor "type" (a direct send)`)
		return nil, nil, false
	}

	t, err := c.load(ctx, m, msg)
	if err != nil {
		c.log.Warn("read task failed; the message will come back", "task_id", msg.ID, "error", err)
		return nil, nil, false
	}
	if t == nil {
		return nil, nil, false // disposed of by load
	}
	for range 5 {
		now := c.store.Now()
		switch {
		case msg.Version > t.Version:
			if caught, ok := c.awaitWrite(ctx, msg, t); ok {
				t = caught // the re-dispatch's record write landed
				continue
			}
			c.ahead(ctx, m, msg, t)
			return nil, nil, false
		case msg.Version != t.DispatchVersion:
			c.counts.stale.Add(1)
			c.mx.Dropped(metrics.DropStale)
			c.log.Debug("dropping stale message", "task_id", t.ID, "message_version", msg.Version, "dispatch_version", t.DispatchVersion, "status", t.Status)
			c.del.add(m.Priority, m.ReceiptHandle)
			return nil, nil, false
		}
		switch t.Status {
		case task.Queued, task.Retrying:
			if !c.mayClaim(ctx, m, msg, t) {
				return nil, nil, false
			}
			release := func() {}
			if c.opt.Gate != nil {
				rel, delay, why, err := c.admit(ctx, t)
				if err != nil {
					c.log.Warn("control check failed; the message will come back", "task_id", t.ID, "error", err)
					c.mx.PutOff(metrics.PutOffControlError)
					c.putOff(ctx, m, msg, time.Second)
					return nil, nil, false
				}
				if rel == nil {
					c.mx.PutOff(why)
					c.putOff(ctx, m, msg, delay)
					return nil, nil, false
				}
				release = rel
			}
			claimed, err := c.store.Transition(ctx, t, task.Executing, func(n *task.Task) {
				n.Attempts++
				n.WorkerID = c.opt.WorkerID
				lease := now.Add(c.leaseFor(t))
				n.LeaseUntil = &lease
				n.StartedAt = &now
				n.RetryAt = nil
				n.ProgressToken = task.NewProgressToken() // this attempt's alone
			})
			if err == nil {
				c.mx.Started(t, now)
				return claimed, release, true
			}
			release()
			if t = c.current(err); t == nil {
				c.log.Warn("claim failed; the message will come back", "task_id", msg.ID, "error", err)
				return nil, nil, false
			}
		case task.Executing:
			if t.LeaseUntil != nil && now.Before(*t.LeaseUntil) {
				// Someone holds it: look again when the lease ends.
				c.mx.PutOff(metrics.PutOffLeased)
				c.putOff(ctx, m, msg, t.LeaseUntil.Sub(now)+c.opt.LeaseMargin)
				return nil, nil, false
			}
			reclaimed, err := c.reclaim(ctx, t, m)
			if err == nil && reclaimed == nil {
				return nil, nil, false
			}
			if err == nil {
				t = reclaimed
				continue
			}
			if t = c.current(err); t == nil {
				c.log.Warn("reclaim failed; the message will come back", "task_id", msg.ID, "error", err)
				return nil, nil, false
			}
		default:
			// Scheduled, or finished: nothing to run for this message.
			c.counts.stale.Add(1)
			c.mx.Dropped(metrics.DropStale)
			c.log.Debug("dropping message of a task that is not waiting", "task_id", t.ID, "status", t.Status)
			c.del.add(m.Priority, m.ReceiptHandle)
			return nil, nil, false
		}
	}
	c.mx.PutOff(metrics.PutOffContention)
	c.putOff(ctx, m, msg, time.Second)
	return nil, nil, false
}

// recordWaits are the pauses before re-reading a task that was not found
// on a message's first receive: a new task's message is sent just before
// its record is written, so a fast consumer can see the message first.
var recordWaits = [...]time.Duration{20 * time.Millisecond, 80 * time.Millisecond, 200 * time.Millisecond}

// load reads the task msg names. When there is none, it gives the record a
// moment to appear (first receive) and otherwise waits for it up to
// OrphanAfter from the message's send, hiding the message meanwhile; a
// message still without a task then is moved to the DLQ with the reason.
// It returns (nil, nil) when it disposed of the message.
func (c *Consumer) load(ctx context.Context, m queue.Received, msg task.Message) (*task.Task, error) {
	t, err := c.store.Get(ctx, msg.ID)
	for i := 0; errors.Is(err, store.ErrNotFound) && m.ReceiveCount <= 1 && i < len(recordWaits); i++ {
		sleep(ctx, recordWaits[i])
		t, err = c.store.Get(ctx, msg.ID)
	}
	if !errors.Is(err, store.ErrNotFound) {
		return t, err
	}
	if c.waitOrGiveUp(ctx, m) {
		c.counts.noTask.Add(1)
		c.mx.Dropped(metrics.DropNoTask)
		c.log.Warn("message names a task that does not exist; moved to the DLQ", "task_id", msg.ID, "message_id", m.MessageID, "sent_at", m.SentAt)
		c.poison(ctx, m, fmt.Sprintf("no task %s: its submit sent this message but never recorded the task (it failed or was interrupted), or the task was deleted", msg.ID))
		c.store.DropPayload(ctx, msg.ID) // a large payload written before the record that never came
	}
	return nil, nil
}

// awaitWrite gives a message one version ahead of its task a moment for
// the re-dispatch's record write to land (a re-dispatch sends first and
// writes second; with no delay, a consumer can see the message a few
// milliseconds before the write), re-reading the task as load does for a
// missing record. Without it the message would be hidden for a quarter of
// OrphanAfter, delaying a task that is ready now by 15 s.
func (c *Consumer) awaitWrite(ctx context.Context, msg task.Message, t *task.Task) (*task.Task, bool) {
	for i := 0; msg.Version == t.Version+1 && i < len(recordWaits); i++ {
		sleep(ctx, recordWaits[i])
		fresh, err := c.store.Get(ctx, t.ID)
		if err != nil {
			return t, false
		}
		if fresh.Version >= msg.Version {
			return fresh, true
		}
		t = fresh
	}
	return t, false
}

// ahead handles a message whose version is newer than its task's. A
// re-dispatch sends version v+1 before it writes the record, so a message
// one version ahead of a task that can still be re-dispatched may simply
// be early: it is hidden until the write lands, up to OrphanAfter. A
// version no write will reach (more than one ahead, or one ahead of a
// completed or cancelled task) goes to the DLQ at once.
func (c *Consumer) ahead(ctx context.Context, m queue.Received, msg task.Message, t *task.Task) {
	reachable := msg.Version == t.Version+1 && t.Status != task.Completed && t.Status != task.Cancelled
	if reachable && !c.waitOrGiveUp(ctx, m) {
		return
	}
	c.counts.ahead.Add(1)
	c.mx.Dropped(metrics.DropVersionAhead)
	c.log.Warn("message version is ahead of its task; moved to the DLQ", "task_id", t.ID, "message_version", msg.Version, "task_version", t.Version, "status", t.Status)
	c.poison(ctx, m, fmt.Sprintf("message version %d is ahead of task %s (version %d, %s) and no write will reach it", msg.Version, t.ID, t.Version, t.Status))
}

// waitOrGiveUp hides a message that is waiting for its task's record to
// appear or catch up, and reports true once it has waited long enough:
// OrphanAfter since it was sent, or its last receive before SQS would
// redrive it.
func (c *Consumer) waitOrGiveUp(ctx context.Context, m queue.Received) bool {
	age := c.store.Now().Sub(m.SentAt)
	if m.SentAt.IsZero() || age >= c.opt.OrphanAfter || c.lastReceive(m) {
		return true
	}
	// The first wait is short: a record that is merely slow (a loaded
	// table, a throttled write retried by the SDK) lands within a second or
	// two, and a quarter of OrphanAfter (15 s) is a long time for a task
	// that is ready, high-priority ones included. Later waits are longer,
	// so an orphan still uses at most four receives before it is given up.
	wait := max(c.opt.OrphanAfter/4, time.Second)
	if m.ReceiveCount <= 1 {
		wait = min(wait, firstRecordWait)
	}
	c.hide(ctx, m, min(c.opt.OrphanAfter-age, wait))
	return false
}

// firstRecordWait is how long a message first received before its task's
// record (or the record's catch-up write) is hidden before the next look.
const firstRecordWait = 2 * time.Second

// lastReceive reports whether m has been received as often as SQS allows
// before the next receive would redrive it to the DLQ (one short, for
// safety): a message that must live on is replaced by a fresh copy instead
// of being hidden again.
func (c *Consumer) lastReceive(m queue.Received) bool {
	return c.opt.MaxReceiveCount > 0 && m.ReceiveCount >= c.opt.MaxReceiveCount-1
}

// putOff hides a message it cannot act on yet for d. A message that is one
// receive short of the redrive threshold is replaced by a fresh copy
// instead, so pauses, throttles and busy tasks never push a task to the DLQ.
func (c *Consumer) putOff(ctx context.Context, m queue.Received, msg task.Message, d time.Duration) {
	if !c.lastReceive(m) {
		c.hide(ctx, m, d)
		return
	}
	ctx = context.WithoutCancel(ctx)
	body, _ := json.Marshal(msg)
	if _, err := c.queues.Send(ctx, m.Priority, string(body), min(d, queue.MaxDelay)); err != nil {
		c.log.Warn("refresh of a put-off message failed; hiding it instead", "task_id", msg.ID, "error", err)
		c.hide(ctx, m, d)
		return
	}
	c.del.add(m.Priority, m.ReceiptHandle)
}

// current returns the task as it is now after a lost conditional write, or
// nil when err is not a conflict.
func (c *Consumer) current(err error) *task.Task {
	var ce *store.ConflictError
	if errors.As(err, &ce) && ce.Current != nil {
		return ce.Current
	}
	return nil
}

// reclaim takes back a task whose worker's lease expired. The lost attempt
// stays counted. It returns (nil, nil) when the task had no attempts left
// and went to the DLQ instead.
func (c *Consumer) reclaim(ctx context.Context, t *task.Task, m queue.Received) (*task.Task, error) {
	lost := task.Attempt{Attempt: t.Attempts, WorkerID: t.WorkerID, FinishedAt: c.store.Now(), Error: "lease expired: the worker stopped renewing it"}
	if t.StartedAt != nil {
		lost.StartedAt = *t.StartedAt
	}
	c.log.Warn("reclaiming task whose lease expired", "task_id", t.ID, "previous_worker", t.WorkerID, "attempts", t.Attempts)
	c.mx.Recovered(metrics.RecoveredLease)
	if t.Attempts >= t.MaxAttempts {
		c.mx.Failed(t, metrics.FailLeaseExpired)
		j := &job{msg: m, cur: t}
		c.deadLetter(ctx, j, lost, &task.Error{Message: "lease expired on the last attempt (worker lost)", Retriable: true})
		return nil, nil
	}
	return c.store.Transition(ctx, t, task.Queued, func(n *task.Task) {
		n.WorkerID, n.LeaseUntil = "", nil
		n.AddAttempt(lost)
	})
}

// adopt creates the task record of a message a producer sent straight to
// SQS, keyed by the message id so a redelivery finds the same task.
func (c *Consumer) adopt(ctx context.Context, m queue.Received) (*task.Task, error) {
	var r task.Request
	dec := json.NewDecoder(bytes.NewReader([]byte(m.Body)))
	dec.DisallowUnknownFields() // as strict as the API: a misspelt field is an error, not a default
	if err := dec.Decode(&r); err != nil {
		return nil, &task.FieldError{Field: "body", Message: err.Error()}
	}
	if r.Priority == "" {
		r.Priority = string(m.Priority)
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	r.RunAt, r.DelaySeconds = nil, nil // the message is already here
	t := r.NewTask(c.store.Now(), 0)
	// The task's id is derived from the message, so a redelivery names the
	// same task and its create finds it: no idempotency item, and no
	// transaction (which would bill the two items twice), is needed. A
	// producer's own idempotency_key still works as on the API.
	t.ID = adoptedID(m)
	t.EffectivePriority = m.Priority
	t.DispatchVersion = 0
	// A producer's traceparent attribute puts the task in its trace: each
	// attempt's span is a child of the producer's span.
	if ctx := tracing.WithParent(context.Background(), m.Traceparent); tracing.TraceID(ctx) != "" {
		t.Traceparent = tracing.Traceparent(ctx)
		if r.TraceID == "" {
			t.TraceID = tracing.TraceID(ctx)
		}
	}
	saved, created, err := c.store.Create(ctx, t)
	if err != nil {
		return nil, err
	}
	if created {
		c.mx.Submitted(saved)
		c.log.Info("adopted direct send", "task_id", saved.ID, "message_id", m.MessageID, "type", saved.Type)
	}
	return saved, nil
}

// adoptedID is the task id of a direct send: a ULID whose time is the
// message's send time and whose 80 random bits are the first bytes of a
// SHA-256 of its SQS MessageId (unique per message), so every receive of
// the message derives the same id.
func adoptedID(m queue.Received) string {
	at := m.SentAt
	if at.IsZero() {
		at = time.UnixMilli(0)
	}
	var id ulid.ULID
	if err := id.SetTime(ulid.Timestamp(at)); err != nil {
		_ = id.SetTime(0)
	}
	_ = id.SetEntropy(adoptedEntropy(m.MessageID))
	return id.String()
}

func adoptedEntropy(messageID string) []byte {
	sum := sha256.Sum256([]byte("sqs:" + messageID))
	return sum[:10]
}

// AdoptedIDSuffix is the part of a direct send's task id that comes from
// its SQS message id alone (the last 16 characters; the first 10 are its
// send time), so a checker that knows the message ids can find their tasks.
func AdoptedIDSuffix(messageID string) string {
	var id ulid.ULID
	_ = id.SetEntropy(adoptedEntropy(messageID))
	return id.String()[10:]
}

// leaseFor is the lease a claim of t takes: Lease, or t's timeout if shorter,
// plus the margin.
func (c *Consumer) leaseFor(t *task.Task) time.Duration {
	return min(c.opt.Lease, time.Duration(t.TimeoutSeconds)*time.Second) + c.opt.LeaseMargin
}

func (c *Consumer) hide(ctx context.Context, m queue.Received, d time.Duration) {
	if err := c.queues.ChangeVisibility(context.WithoutCancel(ctx), m.Priority, m.ReceiptHandle, d); err != nil && !queue.IsGone(err) {
		c.log.Warn("change visibility failed", "priority", m.Priority, "error", err)
	}
}

// poison moves an unusable message to its priority's DLQ with the reason.
func (c *Consumer) poison(ctx context.Context, m queue.Received, reason string) {
	ctx = context.WithoutCancel(ctx)
	c.counts.poison.Add(1)
	c.log.Warn("poison message moved to DLQ", "priority", m.Priority, "message_id", m.MessageID, "reason", reason)
	if err := c.queues.SendDLQ(ctx, m.Priority, m.Body, reason); err != nil {
		c.log.Error("move poison message to DLQ failed; it stays on its queue", "message_id", m.MessageID, "error", err)
		return
	}
	c.del.add(m.Priority, m.ReceiptHandle)
}

// execute runs a claimed task's handler under its timeout, with a heartbeat,
// then records the outcome.
func (c *Consumer) execute(ctx context.Context, j *job) {
	t := j.snapshot()
	started := c.store.Now()
	timeout := time.Duration(t.TimeoutSeconds) * time.Second
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	runCtx, cancelTimeout := context.WithTimeoutCause(runCtx, timeout, fmt.Errorf("timeout: the handler ran longer than timeout_seconds=%d", t.TimeoutSeconds))
	defer cancelTimeout()

	j.rep = newReporter(t.Attempts, c.store.Now)
	hbDone := make(chan struct{})
	hbStop := make(chan struct{})
	go func() { defer close(hbDone); c.heartbeat(ctx, j, started.Add(timeout), cancel, hbStop) }()

	var result json.RawMessage
	stage := stageLookup
	h, err := c.lookup(t.Type)
	var payload json.RawMessage
	if err == nil {
		// A payload kept in the blob store is read for each attempt. One that
		// is gone can never be run; a failed read is retried like any failure.
		stage = stagePayload
		if payload, err = c.store.Payload(runCtx, t); errors.Is(err, blob.ErrNotFound) {
			err = handler.Permanent(err)
		}
	}
	spanCtx, span := c.startAttempt(runCtx, t)
	if err == nil {
		stage = stageHandle
		ranFrom := time.Now()
		result, err = c.safeHandle(spanCtx, h, handler.Request{
			ID: t.ID, Type: t.Type, Payload: payload, Priority: t.Priority,
			Attempt: t.Attempts, MaxAttempts: t.MaxAttempts, TraceID: t.TraceID,
			Traceparent: tracing.Traceparent(spanCtx),
			Checkpoint:  t.Checkpoint, ProgressToken: t.ProgressToken, ProgressURL: c.progressURL(t.ID),
			Reporter: j.rep,
		})
		c.mx.Ran(t, time.Since(ranFrom))
	}
	close(hbStop)
	<-hbDone

	cause := context.Cause(runCtx)
	if errors.Is(cause, errLeaseLost) {
		endAttempt(span, t, errLeaseLost)
	} else {
		endAttempt(span, t, err)
	}
	if errors.Is(cause, errLeaseLost) {
		c.log.Warn("lease lost while running; outcome discarded", "task_id", t.ID, "worker_id", c.opt.WorkerID)
		return
	}
	attempt := task.Attempt{Attempt: t.Attempts, WorkerID: c.opt.WorkerID, StartedAt: attemptStart(t, started), FinishedAt: c.store.Now()}
	wctx := context.WithoutCancel(ctx)
	if err == nil {
		// A result that arrived wins over a cancel request or shutdown.
		stage = stageResult
		if result != nil && !json.Valid(result) {
			err = handler.Permanent(fmt.Errorf("handler returned a result that is not valid JSON"))
		} else if len(result) > task.MaxResultBytes {
			err = handler.Permanent(fmt.Errorf("result is %d bytes; the limit is %d", len(result), task.MaxResultBytes))
		} else {
			c.complete(wctx, j, attempt, result)
			return
		}
	}
	switch {
	case errors.Is(cause, errCancelRequested):
		attempt.Error = "cancelled on request"
		c.finishCancelled(wctx, j, attempt, nil)
	case errors.Is(cause, errShutdown):
		attempt.Error = "interrupted: consumer shut down"
		c.handBack(wctx, j, attempt)
	default:
		timedOut := false
		if runCtx.Err() != nil && cause != nil && !errors.Is(cause, context.Canceled) {
			err, timedOut = cause, true // the timeout, named
		}
		if d, ok := handler.SnoozeOf(err); ok {
			c.snooze(wctx, j, attempt, d)
			return
		}
		attempt.Error = err.Error()
		if errors.Is(err, handler.ErrCancel) {
			c.finishCancelled(wctx, j, attempt, task.NewError(err.Error(), false))
			return
		}
		c.mx.Failed(t, failure(err, timedOut, stage))
		retriable := handler.Retriable(err)
		if retriable && t.Attempts < t.MaxAttempts {
			c.retry(wctx, j, attempt, err.Error())
			return
		}
		msg := err.Error()
		if retriable {
			msg = fmt.Sprintf("%s (attempt %d of %d, none left)", msg, t.Attempts, t.MaxAttempts)
		}
		c.deadLetter(wctx, j, attempt, task.NewError(msg, retriable))
	}
}

// safeHandle runs h, turning a panic into a permanent error so one bad
// handler cannot crash the consumer.
func (c *Consumer) safeHandle(ctx context.Context, h handler.Handler, r handler.Request) (res json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("handler panicked", "task_id", r.ID, "type", r.Type, "panic", fmt.Sprint(p))
			err = handler.Permanent(&handlerPanic{p})
		}
	}()
	return h.Handle(ctx, r)
}

// heartbeat renews the lease and the message's visibility every third of a
// lease, and cancels the run when it sees a cancel request or loses the lease.
//
// It is also the only writer of the handler's progress reports, which is
// what bounds their cost: every renewal carries the latest report, and a
// report waiting when no renewal is due is written early, as a renewal,
// only once ProgressInterval has passed since the task's last write. So a
// running task's item is written at most once per min(Lease/3,
// ProgressInterval), however often its handler reports; with heartbeats
// at least that frequent, reports cost no write at all. Each write is the
// heartbeat's conditional Touch, so a worker that lost its claim can never
// write a report over the new owner's.
func (c *Consumer) heartbeat(ctx context.Context, j *job, deadline time.Time, cancel context.CancelCauseFunc, stop <-chan struct{}) {
	every := c.opt.Lease / 3
	gap := min(every, c.opt.ProgressInterval) // the least time between two writes
	tick := time.NewTimer(every)
	defer tick.Stop()
	last := time.Now() // the claim was the last write
	var flush <-chan time.Time
	var flushTimer *time.Timer
	defer func() {
		if flushTimer != nil {
			flushTimer.Stop()
		}
	}()
	var check <-chan time.Time // cancel checks between heartbeats
	if c.opt.CancelCheck > 0 && c.opt.CancelCheck < every {
		ct := time.NewTicker(c.opt.CancelCheck)
		defer ct.Stop()
		check = ct.C
	}
	for {
		select {
		case <-stop:
			return
		case <-check:
			if yes, err := c.store.CancelRequested(ctx, j.snapshot().ID); err == nil && yes {
				cancel(errCancelRequested)
				check = nil // asked once; the heartbeat goes on until the handler returns
			}
			continue
		case <-j.rep.wake:
			if flush != nil || gap >= every || !j.rep.pending() {
				continue // a write is already due that will carry it, or did
			}
			if wait := time.Until(last.Add(gap)); wait > 0 {
				flushTimer = time.NewTimer(wait)
				flush = flushTimer.C
				continue
			}
		case <-flush:
			flush, flushTimer = nil, nil
			if !j.rep.pending() {
				continue
			}
		case <-tick.C:
		}
		if flushTimer != nil {
			flushTimer.Stop()
			flush, flushTimer = nil, nil
		}
		last = time.Now()
		tick.Reset(every)
		now := c.store.Now()
		until := now.Add(c.opt.Lease)
		if until.After(deadline) {
			until = deadline
		}
		until = until.Add(c.opt.LeaseMargin)
		var gen uint64
		next, err := c.write(context.WithoutCancel(ctx), j, func(cur *task.Task) (*task.Task, error) {
			return c.store.Touch(context.WithoutCancel(ctx), cur, func(n *task.Task) {
				n.LeaseUntil = &until
				gen = j.rep.apply(n)
			})
		})
		if err != nil {
			if errors.Is(err, errLeaseLost) {
				cancel(errLeaseLost)
				return
			}
			c.log.Warn("heartbeat failed", "task_id", j.msg.MessageID, "error", err)
			continue
		}
		j.rep.done(gen)
		c.hide(ctx, j.msg, until.Sub(now)+c.opt.LeaseMargin)
		if next.CancelRequested {
			cancel(errCancelRequested)
		}
	}
}

// progressURL is the API endpoint an external handler reports task id's
// progress to, or "" when the consumer does not know the API's address.
func (c *Consumer) progressURL(id string) string {
	if c.opt.APIURL == "" {
		return ""
	}
	return strings.TrimSuffix(c.opt.APIURL, "/") + "/api/v1/tasks/" + id + "/progress"
}

// write applies a conditional write to the job's snapshot. When it loses
// the race to a change that kept the claim ours (a cancel request), it
// adopts the new state and tries once more; when the claim is gone it
// returns errLeaseLost.
func (c *Consumer) write(ctx context.Context, j *job, w func(cur *task.Task) (*task.Task, error)) (*task.Task, error) {
	for range 3 {
		cur := j.snapshot()
		next, err := w(cur)
		if err == nil {
			j.set(next)
			return next, nil
		}
		now := c.current(err)
		if now == nil {
			if errors.Is(err, store.ErrConflict) {
				return nil, errLeaseLost // the task is gone
			}
			return nil, err
		}
		if now.Status != task.Executing || now.WorkerID != c.opt.WorkerID || now.Attempts != cur.Attempts {
			return nil, errLeaseLost
		}
		j.set(now)
	}
	return nil, fmt.Errorf("task %s kept changing under its worker", j.snapshot().ID)
}

// finishWrite runs w through write and logs a lost lease.
func (c *Consumer) finishWrite(ctx context.Context, j *job, what string, w func(cur *task.Task) (*task.Task, error)) bool {
	_, err := c.write(ctx, j, w)
	return c.logWriteError(j, what, err)
}

// logWriteError logs why a finishing write failed and reports whether it
// succeeded (err is nil).
func (c *Consumer) logWriteError(j *job, what string, err error) bool {
	if err == nil {
		return true
	}
	t := j.snapshot()
	if errors.Is(err, errLeaseLost) {
		c.log.Warn("lease lost before "+what+"; outcome discarded", "task_id", t.ID, "worker_id", c.opt.WorkerID)
	} else {
		c.log.Error(what+" failed; the message will come back and the task will be retried", "task_id", t.ID, "error", err)
	}
	return false
}

// complete records a success. A result that cannot be stored (the task's
// record would pass DynamoDB's item limit) fails the task once and
// permanently, saying so: the handler is not run again for an outcome
// that can never be written.
func (c *Consumer) complete(ctx context.Context, j *job, a task.Attempt, result json.RawMessage) {
	now := c.store.Now()
	_, err := c.write(ctx, j, func(cur *task.Task) (*task.Task, error) {
		return c.store.Transition(ctx, cur, task.Completed, func(n *task.Task) {
			n.Result, n.Error = result, nil
			n.CompletedAt = &now
			n.WorkerID, n.LeaseUntil = "", nil
			n.AddAttempt(a)
			j.rep.apply(n)
		})
	})
	if errors.Is(err, store.ErrItemTooLarge) {
		t := j.snapshot()
		msg := fmt.Sprintf("the handler succeeded but its result (%d bytes) cannot be stored: with the payload (%d bytes) and history the task's record would pass DynamoDB's 400 KB item limit", len(result), len(t.Payload))
		c.log.Error("result too large to store; task dead-lettered", "task_id", t.ID, "result_bytes", len(result), "payload_bytes", len(t.Payload), "error", err)
		a.Error = msg
		c.mx.Failed(t, metrics.FailBadResult)
		c.deadLetter(ctx, j, a, task.NewError(msg, false))
		return
	}
	if c.logWriteError(j, "completion", err) {
		c.mx.Finished(j.snapshot(), metrics.Completed)
		c.del.add(j.msg.Priority, j.msg.ReceiptHandle)
	}
}

// finishCancelled records a cancelled task: on request (reason nil), or
// by its handler's Cancel (reason is its error, recorded on the task).
func (c *Consumer) finishCancelled(ctx context.Context, j *job, a task.Attempt, reason *task.Error) {
	now := c.store.Now()
	if c.finishWrite(ctx, j, "cancellation", func(cur *task.Task) (*task.Task, error) {
		return c.store.Transition(ctx, cur, task.Cancelled, func(n *task.Task) {
			if reason != nil {
				n.Error = reason
			}
			n.CompletedAt = &now
			n.WorkerID, n.LeaseUntil = "", nil
			n.AddAttempt(a)
			j.rep.apply(n)
		})
	}) {
		c.mx.Finished(j.snapshot(), metrics.Cancelled)
		c.del.add(j.msg.Priority, j.msg.ReceiptHandle)
	}
}

// handBack returns an interrupted task to its queue at once. A message on
// its last receive is replaced by a fresh one instead of being made
// visible, so a hand-back never sends a task to the DLQ.
func (c *Consumer) handBack(ctx context.Context, j *job, a task.Attempt) {
	apply := func(n *task.Task) {
		n.WorkerID, n.LeaseUntil = "", nil
		n.AddAttempt(a)
		j.rep.apply(n)
	}
	fresh := c.lastReceive(j.msg)
	if !c.finishWrite(ctx, j, "hand-back", func(cur *task.Task) (*task.Task, error) {
		if fresh {
			return c.redisp.Redispatch(ctx, cur, task.Queued, cur.EffectivePriority, 0, apply)
		}
		return c.store.Transition(ctx, cur, task.Queued, apply)
	}) {
		return
	}
	c.counts.handedBack.Add(1)
	c.mx.Finished(j.snapshot(), metrics.HandedBack)
	if fresh {
		c.del.add(j.msg.Priority, j.msg.ReceiptHandle)
		return
	}
	c.hide(ctx, j.msg, 0)
}

// retry records a retriable failure and keeps the task's message out of
// sight for the backoff. Attempts in DynamoDB are the only retry count:
// when the message has had its last receive before SQS would redrive it,
// the wait is done with a fresh message (DelaySeconds) instead of hiding
// the old one, so max_attempts is honoured whatever the redrive threshold.
// A wait longer than SQS can hide or delay a message parks the task with
// no message; the promoter sends one when it is due.
func (c *Consumer) retry(ctx context.Context, j *job, a task.Attempt, msg string) {
	t := j.snapshot()
	c.rngMu.Lock()
	wait := c.opt.Backoff[t.Priority].Wait(t.Attempts, c.opt.Rand)
	c.rngMu.Unlock()
	if c.park(ctx, j, "retry", wait, func(n *task.Task) {
		n.Error = task.NewError(msg, true)
		n.AddAttempt(a)
	}) {
		c.mx.Finished(t, metrics.Retried)
		c.log.LogAttrs(ctx, slog.LevelInfo, "task will retry", slog.String("task_id", t.ID), slog.Duration("wait", wait), slog.Int("attempt", t.Attempts), slog.String("error", msg))
	}
}

// snooze puts the task back to run again after d, as its handler asked,
// without counting the attempt that asked (so a task may snooze any
// number of times; max_attempts counts failures only).
func (c *Consumer) snooze(ctx context.Context, j *job, a task.Attempt, d time.Duration) {
	a.Error = fmt.Sprintf("snoozed for %s", d)
	if c.park(ctx, j, "snooze", d, func(n *task.Task) {
		n.Attempts--
		n.AddAttempt(a)
	}) {
		c.mx.Finished(j.snapshot(), metrics.Snoozed)
		c.log.LogAttrs(ctx, slog.LevelInfo, "task snoozed", slog.String("task_id", j.snapshot().ID), slog.Duration("wait", d))
	}
}

// park moves an executing task to retrying, to run again after wait:
// by hiding its message, or with a fresh message when this receive is the
// last before SQS would redrive it, or with none (the promoter sends one
// when due) when the wait is longer than SQS can hide or delay a message.
// apply records why. It reports whether the task was parked.
func (c *Consumer) park(ctx context.Context, j *job, what string, wait time.Duration, apply func(n *task.Task)) bool {
	t := j.snapshot()
	now := c.store.Now()
	at := now.Add(wait)
	fresh := c.lastReceive(j.msg)
	noMessage := wait > queue.MaxVisibility || (fresh && wait > queue.MaxDelay)
	edit := func(n *task.Task) {
		apply(n)
		j.rep.apply(n) // a retry starts from the attempt's last checkpoint
		n.RetryAt = &at
		n.WorkerID, n.LeaseUntil = "", nil
		if noMessage {
			n.DispatchVersion = task.NoMessage // the promoter sends it when due
		}
	}
	if !c.finishWrite(ctx, j, what, func(cur *task.Task) (*task.Task, error) {
		if fresh && !noMessage {
			return c.redisp.Redispatch(ctx, cur, task.Retrying, cur.EffectivePriority, wait, edit)
		}
		return c.store.Transition(ctx, cur, task.Retrying, edit)
	}) {
		return false
	}
	if noMessage || fresh {
		c.del.add(j.msg.Priority, j.msg.ReceiptHandle)
		return true
	}
	err := c.queues.ChangeVisibility(ctx, j.msg.Priority, j.msg.ReceiptHandle, wait)
	if err == nil {
		return true
	}
	// The message is gone (its visibility ran out and someone deleted it as
	// busy, or SQS lost the receipt): give the task a new one.
	c.log.Warn("could not delay the message; sending a new one", "task_id", t.ID, "error", err)
	c.mx.Recovered(metrics.RecoveredMessage)
	if _, err := c.redisp.Redispatch(ctx, j.snapshot(), task.Queued, t.EffectivePriority, min(wait, queue.MaxDelay), nil); err != nil {
		c.log.Error("re-send for retry failed; the promoter will re-send it", "task_id", t.ID, "error", err)
	}
	return true
}

// deadLetter records a terminal failure and moves the message to the DLQ.
func (c *Consumer) deadLetter(ctx context.Context, j *job, a task.Attempt, e *task.Error) {
	t := j.snapshot()
	now := c.store.Now()
	if a.Error == "" {
		a.Error = e.Message
	}
	if !c.finishWrite(ctx, j, "dead-letter", func(cur *task.Task) (*task.Task, error) {
		return c.store.Transition(ctx, cur, task.DeadLetter, func(n *task.Task) {
			n.Error = e
			n.CompletedAt = &now
			n.WorkerID, n.LeaseUntil = "", nil
			n.AddAttempt(a)
			j.rep.apply(n)
		})
	}) {
		return
	}
	dead := j.snapshot()
	c.mx.Finished(dead, metrics.DeadLettered)
	if err := c.queues.SendDLQ(ctx, j.msg.Priority, enqueue.Body(dead, dead.Version), e.Message); err != nil {
		c.log.Error("copy to DLQ failed; the task is dead_letter in the table", "task_id", t.ID, "error", err)
	}
	c.del.add(j.msg.Priority, j.msg.ReceiptHandle)
}
