package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/triagehq/triage/internal/control"
	"github.com/triagehq/triage/internal/metrics"
	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// This file is the claim phase: from a received message to a claimed
// task, or to the message disposed of (poison to the DLQ, stale deleted,
// early or busy hidden for later).

// probe reads just enough of a body to tell our messages from direct sends.
type probe struct {
	ID      string          `json:"id"`
	Version *int64          `json:"v"`
	Type    json.RawMessage `json:"type"`
	// A triage message's copies of its task's type, key, timeout and rate
	// reservation (task.Message).
	MsgType       string `json:"t"`
	MsgKey        string `json:"k"`
	MsgTimeout    int    `json:"s"`
	MsgRateWindow string `json:"w"`
	MsgReleasedBy string `json:"r"`
}

// decodeProbe reads body into pb and returns "" when body is a JSON object
// whose id, v and type fields (if any) have their types; otherwise the DLQ
// reason, in the message's terms rather than Go's. A bare scalar (`12345`,
// `true`, `null`) is no object, whatever json.Unmarshal makes of it (it
// takes `null` into a struct without complaint).
func decodeProbe(body string, pb *probe) string {
	err := json.Unmarshal([]byte(body), pb)
	var ute *json.UnmarshalTypeError
	switch kind := jsonKind(body); {
	case kind == "":
		return fmt.Sprintf("body is not a JSON object: it is not valid JSON (%v)", err)
	case kind != "object":
		return "body is not a JSON object: it is " + kind
	case errors.As(err, &ute):
		want := "of another type"
		switch ute.Field {
		case "id":
			want = "a string (a task id)"
		case "v":
			want = "an integer (the task's version)"
		}
		got, _, _ := strings.Cut(ute.Value, " ") // "number 1.5" -> "number"
		return fmt.Sprintf("body field %q must be %s, not a JSON %s", ute.Field, want, got)
	case err != nil:
		return fmt.Sprintf("body could not be read: %v", err)
	}
	return ""
}

// jsonKind names the kind of JSON value body holds ("object", "an array",
// "a string", "a number", "a boolean", "null"), or "" when it is not valid
// JSON.
func jsonKind(body string) string {
	if !json.Valid([]byte(body)) {
		return ""
	}
	switch b := strings.TrimLeft(body, " \t\r\n"); b[0] {
	case '{':
		return "object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// claimed is a claim's result: the task, now executing under this
// consumer's lease, and release, which gives back the control slot its
// admission took (a no-op without controls). Its holder runs the task and
// then calls release exactly once.
type claimed struct {
	task    *task.Task
	release func()
	started func() // claimAtCreate's: called once the record is written
}

// claim turns a message into a claimed task, or disposes of the message:
// poison to the DLQ, stale deleted, early or busy hidden for later.
func (c *Consumer) claim(ctx context.Context, m queue.Received) (claimed, bool) {
	var pb probe
	if why := decodeProbe(m.Body, &pb); why != "" {
		c.mx.Dropped(metrics.DropInvalid)
		c.poison(ctx, m, why)
		return claimed{}, false
	}
	var msg task.Message
	var t *task.Task // the task as last written, once known
	switch {
	case pb.ID != "" && pb.Version != nil:
		if !task.ValidID(pb.ID) {
			// Not an id triage makes: it names no task, and as a key it may
			// be more than DynamoDB accepts.
			c.mx.Dropped(metrics.DropInvalid)
			c.poison(ctx, m, fmt.Sprintf("id %q is not a task id (a 26-character ULID)", task.Truncate(pb.ID, 64)))
			return claimed{}, false
		}
		msg = task.Message{ID: pb.ID, Version: *pb.Version, Priority: m.Priority, Type: pb.MsgType, Key: pb.MsgKey, TimeoutSeconds: pb.MsgTimeout, RateWindow: pb.MsgRateWindow, ReleasedBy: pb.MsgReleasedBy}
		if msg.ReleasedBy == "" { // a release's message follows its record
			sleep(ctx, freshHold(m, time.Now()))
		}
		// A keyed task is claimed after a read: its key's fair window
		// chains releases of held tasks that a decision on the message's
		// copy did not keep in weight (3:1 became 3.7:1 in
		// TestWeightsOnEveryPath with two API processes). So is a
		// released child: its claim checks what it waited on.
		if msg.Claimable() && msg.Key == "" && msg.ReleasedBy == "" {
			got, cur, done := c.claimFromMessage(ctx, m, msg)
			if done {
				return got, got.task != nil
			}
			t = cur
		}
	case pb.ID == "" && len(pb.Type) > 0:
		got, adopted, err := c.adopt(ctx, m)
		if got.task != nil {
			return got, true
		}
		t = adopted
		if err != nil {
			var fe *task.FieldError
			if errors.As(err, &fe) {
				c.mx.Dropped(metrics.DropInvalid)
				c.poison(ctx, m, "direct send rejected: "+fe.Error())
			} else {
				c.log.Warn("adopt direct send failed; it will be retried", "message_id", m.MessageID, "error", err)
			}
			return claimed{}, false
		}
		msg = task.MessageFor(t, 0)
		msg.Priority = m.Priority
	default:
		c.mx.Dropped(metrics.DropInvalid)
		c.poison(ctx, m, `body has neither "id" and "v" (a triage message) nor "type" (a direct send)`)
		return claimed{}, false
	}

	if t == nil {
		var err error
		if t, err = c.load(ctx, m, msg); err != nil {
			c.log.Warn("read task failed; the message will come back", "task_id", msg.ID, "error", err)
			return claimed{}, false
		}
		if t == nil {
			return claimed{}, false // disposed of by load
		}
	}
	reread := false // a release message's task read again, strongly
	for range 5 {
		now := c.store.Now()
		switch {
		case msg.Version > t.Version:
			if caught, ok := c.awaitWrite(ctx, m, msg, t); ok {
				t = caught // the re-dispatch's record write landed
				continue
			}
			c.ahead(ctx, m, msg, t)
			return claimed{}, false
		case msg.Version != t.DispatchVersion:
			c.counts.stale.Add(1)
			c.mx.Dropped(metrics.DropStale)
			c.log.Debug("dropping stale message", "task_id", t.ID, "message_version", msg.Version, "dispatch_version", t.DispatchVersion, "status", t.Status)
			c.del.add(m.Priority, m.ReceiptHandle)
			return claimed{}, false
		}
		fromWaiting := false
		switch t.Status {
		case triagetype.Waiting:
			// A release message (flow's announce): claimed from waiting
			// once its parent is checked, or set right in place first
			// where a queued task is needed (a set-aside).
			ok, err := c.released(ctx, msg, t)
			if err != nil {
				c.log.Warn("could not read a released task's parent; the message will come back", "task_id", t.ID, "parent", msg.ReleasedBy, "error", err)
				c.putOff(ctx, m, msg, time.Second)
				return claimed{}, false
			}
			if !ok && !reread && msg.ReleasedBy != "" {
				// The read may be stale (eventually consistent): a parent
				// resolved just before the last one completed still shows
				// in waiting_on. Read once more, strongly, before dropping.
				reread = true
				if fresh, err := c.store.Get(ctx, t.ID); err == nil && fresh.Version != t.Version {
					t = fresh
					continue
				}
			}
			if !ok {
				c.counts.stale.Add(1)
				c.mx.Dropped(metrics.DropStale)
				c.log.Debug("dropping message of a waiting task it does not release", "task_id", t.ID, "released_by", msg.ReleasedBy)
				c.del.add(m.Priority, m.ReceiptHandle)
				return claimed{}, false
			}
			fromWaiting = true
			fallthrough
		case triagetype.Queued, triagetype.Retrying:
			if !c.mayClaim(ctx, m, msg, t) {
				return claimed{}, false
			}
			release, started, start := func() {}, func() {}, now
			token := task.NewProgressToken() // this attempt's alone; its slots name it
			if c.opt.Gate != nil {
				tc := *t
				tc.ProgressToken = token
				d, err := c.decide(ctx, &tc)
				if err != nil {
					c.log.Warn("control check failed; the message will come back", "task_id", t.ID, "error", err)
					c.mx.PutOff(metrics.PutOffControlError)
					c.putOff(ctx, m, msg, time.Second)
					return claimed{}, false
				}
				if d.Release == nil {
					c.mx.PutOff(d.Why)
					if control.Keyed(d.Scope) {
						c.mx.KeyPutOff(t, d.Why)
					}
					if d.Scope != "" {
						if fromWaiting {
							if t, err = c.releaseInPlace(ctx, m, t); err != nil {
								c.log.Warn("could not release a waiting task to set it aside; the message will come back", "task_id", msg.ID, "error", err)
								c.putOff(ctx, m, msg, time.Second)
								return claimed{}, false
							}
						}
						c.setAside(ctx, m, msg, t, d)
					} else {
						c.putOff(ctx, m, msg, d.Delay)
					}
					return claimed{}, false
				}
				release = c.chainReleases(ctx, d)
				start = startedAt(d.At, c.store.Now())
				if d.Started != nil {
					started = d.Started
				}
			}
			var enqueued time.Time // a released task's queue wait began at its release
			if fromWaiting {
				enqueued = releasedAt(m, t)
			}
			got, err := c.store.Transition(ctx, t, triagetype.Executing, func(n *task.Task) {
				if fromWaiting {
					n.WaitingOn, n.EnqueuedAt = nil, &enqueued
				}
				n.Attempts++
				n.WorkerID = c.opt.WorkerID
				until := c.lease().claimUntil(start, time.Duration(t.TimeoutSeconds)*time.Second)
				n.LeaseUntil = &until
				n.StartedAt = &start
				n.RetryAt = nil
				n.Held, n.Released = "", false
				n.ProgressToken = token
				n.Suspend = nil // resumed
			})
			if err == nil {
				started()
				first := (t.Status == triagetype.Queued || fromWaiting) && t.Attempts == 0
				if fromWaiting {
					t = t.Clone()
					t.EnqueuedAt = &enqueued
				}
				c.mx.Started(t, start, first)
				done, rel := c.keyUse.start(t), release
				return claimed{task: got, release: func() { rel(); done() }}, true
			}
			release()
			if t = c.current(err); t == nil {
				c.log.Warn("claim failed; the message will come back", "task_id", msg.ID, "error", err)
				return claimed{}, false
			}
		case triagetype.Executing:
			if t.LeaseUntil != nil && now.Before(*t.LeaseUntil) {
				// Someone holds it: look again when the lease ends.
				c.mx.PutOff(metrics.PutOffLeased)
				c.putOff(ctx, m, msg, c.lease().hideFor(now, *t.LeaseUntil))
				return claimed{}, false
			}
			reclaimed, err := c.reclaim(ctx, t, m)
			if err == nil && reclaimed == nil {
				return claimed{}, false
			}
			if err == nil {
				t = reclaimed
				continue
			}
			if t = c.current(err); t == nil {
				c.log.Warn("reclaim failed; the message will come back", "task_id", msg.ID, "error", err)
				return claimed{}, false
			}
		default:
			// Scheduled, or finished: nothing to run for this message.
			c.counts.stale.Add(1)
			c.mx.Dropped(metrics.DropStale)
			c.log.Debug("dropping message of a task that is not waiting", "task_id", t.ID, "status", t.Status)
			c.del.add(m.Priority, m.ReceiptHandle)
			return claimed{}, false
		}
	}
	c.mx.PutOff(metrics.PutOffContention)
	c.putOff(ctx, m, msg, time.Second)
	return claimed{}, false
}

// claimFromMessage claims the task msg names with one conditional write
// and no read first (store.Claim): the handler lookup, the controls and
// the lease are decided on the message's copies of the task's type, key
// and timeout, and the write's condition checks them, the message's
// version and a waiting status. It is done when it claimed the task or
// disposed of the message. Otherwise it returns the task as the refused
// write found it (ALL_OLD: stale, running, finished, or of another shape
// than the message says), or nil when there is none yet or the message's
// task must be read first: no handler here (the hand-back rules look at
// the task) or a control that sets tasks aside (setAside writes the task
// as read); the caller then goes on as after a read.
//
// An admission is decided before the write, so a message that turns out
// stale may have taken a rate-limit start (the claim's release gives a
// concurrency slot back): a rate limit can only admit fewer starts for it.
func (c *Consumer) claimFromMessage(ctx context.Context, m queue.Received, msg task.Message) (got claimed, cur *task.Task, done bool) {
	if _, err := c.handlers.Lookup(msg.Type); err != nil {
		return claimed{}, nil, false
	}
	release, started, admitted := func() {}, func() {}, time.Time{}
	token := task.NewProgressToken() // this attempt's alone; its slots name it
	if c.opt.Gate != nil {
		mt := msg.Task()
		mt.ProgressToken = token
		d, err := c.decide(ctx, mt)
		switch {
		case err != nil:
			c.log.Warn("control check failed; the message will come back", "task_id", msg.ID, "error", err)
			c.mx.PutOff(metrics.PutOffControlError)
			c.putOff(ctx, m, msg, time.Second)
			return claimed{}, nil, true
		case d.Release == nil && d.Scope == "":
			c.mx.PutOff(d.Why)
			c.putOff(ctx, m, msg, d.Delay)
			return claimed{}, nil, true
		case d.Release == nil:
			return claimed{}, nil, false // set aside: decided again on the task as read
		}
		release = c.chainReleases(ctx, d)
		admitted = d.At
		if d.Started != nil {
			started = d.Started
		}
	}
	now := c.store.Now()
	start := startedAt(admitted, now)
	t, err := c.store.Claim(ctx, store.Claim{
		ID: msg.ID, DispatchVersion: msg.Version,
		Type: msg.Type, Key: msg.Key, TimeoutSeconds: msg.TimeoutSeconds,
		WorkerID:      c.opt.WorkerID,
		LeaseUntil:    c.lease().claimUntil(start, time.Duration(msg.TimeoutSeconds)*time.Second),
		StartedAt:     start,
		ProgressToken: token,
	})
	if err == nil {
		started()
		// t is the claimed task (ALL_NEW): a first start has its one
		// attempt and no history (a snooze or sleep leaves an entry).
		c.mx.Started(t, start, t.Attempts == 1 && len(t.History) == 0)
		done, rel := c.keyUse.start(t), release
		return claimed{task: t, release: func() { rel(); done() }}, nil, true
	}
	release()
	if !errors.Is(err, store.ErrConflict) {
		c.log.Warn("claim failed; the message will come back", "task_id", msg.ID, "error", err)
		return claimed{}, nil, true
	}
	return claimed{}, c.current(err), false
}

// recordLag is how long after its send a task's message may arrive ahead
// of the write that records it: a submit sends first and then records the
// task, and a re-dispatch sends just before its write (recordWaits). On
// AWS the write lands about 10-20 ms after the send; an idle long poll
// hands the message over sooner than that.
const recordLag = 30 * time.Millisecond

// freshHold is how long m is held before its claim: an original message
// on its first receive, sent less than recordLag before now, waits for
// the rest of recordLag. Claimed at once, it would find no record (or the
// version before), spend a refused conditional write (billed as a write:
// one write unit more for the task) and fall back to reads that wait for
// the record; held, its claim is the task's one claim write. A copy
// (FirstSentAt), a message received before or sent longer ago waits
// nothing, so a backlog never waits; a send time ahead of this clock
// waits recordLag at most.
func freshHold(m queue.Received, now time.Time) time.Duration {
	if m.ReceiveCount > 1 || !m.FirstSentAt.IsZero() || m.SentAt.IsZero() {
		return 0
	}
	return max(0, min(recordLag, recordLag-now.Sub(m.SentAt)))
}

// startedAt is an admitted attempt's started_at: admitted, the clock a
// rate limit counted its start by (Decision.At), so the start falls in the
// window that counted it however long the admission's writes took; now
// when no rate limit counted it.
func startedAt(admitted, now time.Time) time.Time {
	if admitted.IsZero() {
		return now
	}
	return admitted
}

// recordWaits are the pauses before re-reading a task that was not found,
// or is one version behind its message: a new task's message is sent just
// before its record is written, and a re-dispatch's just before its write,
// so a fast consumer can see the message first. On a message's first
// receive they run to 1.8 s in all, just short of firstRecordWait: a
// write on a loaded table can take longer than the first three (300 ms),
// and a message put off instead starts about 2 s late, behind the tasks
// released after it (a clean-clone CI run saw a resumed task start after
// eight later ones). Later receives wait the first three at most
// (awaitWrite) or not at all (load): a message whose write never came
// (its sender crashed) is not worth a slot's 1.8 s each time.
var recordWaits = [...]time.Duration{20 * time.Millisecond, 80 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond, time.Second}

// laterRecordWaits is how many of recordWaits awaitWrite spends on a
// message received before.
const laterRecordWaits = 3

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
	if c.waitOrGiveUp(ctx, m, msg) {
		c.counts.noTask.Add(1)
		c.mx.Dropped(metrics.DropNoTask)
		c.log.Warn("message names a task that does not exist; moved to the DLQ", "task_id", msg.ID, "message_id", m.MessageID, "sent_at", m.SentAt)
		c.poison(ctx, m, fmt.Sprintf("%s %s: its submit sent this message but never recorded the task (it failed or was interrupted), or the task was deleted", queue.ReasonNoTask, msg.ID))
		c.store.DropPayload(ctx, msg.ID) // a large payload written before the record that never came
	}
	return nil, nil
}

// awaitWrite gives a message one version ahead of its task a moment for
// the re-dispatch's record write to land (a re-dispatch sends first and
// writes second; with no delay, a consumer can see the message a few
// milliseconds before the write), re-reading the task as load does for a
// missing record. Without it the message would be hidden for at least
// firstRecordWait, delaying a task that is ready now by 2 s.
func (c *Consumer) awaitWrite(ctx context.Context, m queue.Received, msg task.Message, t *task.Task) (*task.Task, bool) {
	waits := recordWaits[:]
	if m.ReceiveCount > 1 {
		waits = waits[:laterRecordWaits]
	}
	for i := 0; msg.Version == t.Version+1 && i < len(waits); i++ {
		sleep(ctx, waits[i])
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
	reachable := msg.Version == t.Version+1 && t.Status != triagetype.Completed && t.Status != triagetype.Cancelled
	if reachable && !c.waitOrGiveUp(ctx, m, msg) {
		return
	}
	c.counts.ahead.Add(1)
	c.mx.Dropped(metrics.DropVersionAhead)
	c.log.Warn("message version is ahead of its task; moved to the DLQ", "task_id", t.ID, "message_version", msg.Version, "task_version", t.Version, "status", t.Status)
	c.poison(ctx, m, fmt.Sprintf("%s: message version %d, task %s at version %d (%s), and no write will reach it", queue.ReasonAhead, msg.Version, t.ID, t.Version, t.Status))
}

// waitOrGiveUp puts off a message that is waiting for its task's record
// to appear or catch up, and reports true once it has waited long enough:
// OrphanAfter since its first send (queue.Received.Origin). Only age
// decides: a message received often early (by consumers with no free
// slot, or ones that died) is still young, and when it nears SQS's
// redrive threshold it is replaced by a fresh copy that keeps its origin
// (putOff), so it is never given up before OrphanAfter.
func (c *Consumer) waitOrGiveUp(ctx context.Context, m queue.Received, msg task.Message) bool {
	origin := m.Origin()
	age := c.store.Now().Sub(origin)
	if origin.IsZero() || age >= c.opt.OrphanAfter {
		return true
	}
	c.putOff(ctx, m, msg, min(c.opt.OrphanAfter-age, recordWait(age, c.opt.OrphanAfter)))
	return false
}

// recordWait is how long a message whose record is missing, or behind,
// at age is put off before the next look: about its age again, at least
// firstRecordWait and at most a quarter of orphanAfter. A record that is
// merely slow (a loaded table, a throttled write the SDK retries) lands
// within a second or two, so the first looks come soon; an orphan is
// looked at about eight times before it is given up.
func recordWait(age, orphanAfter time.Duration) time.Duration {
	return max(min(age, orphanAfter/4), firstRecordWait)
}

// firstRecordWait is the shortest wait of a message whose task's record
// (or the record's catch-up write) is not there yet.
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
// (queue.Replace, which keeps its origin) instead, so pauses, throttles,
// busy tasks and slow records never push a task's message to the DLQ.
func (c *Consumer) putOff(ctx context.Context, m queue.Received, msg task.Message, d time.Duration) {
	if !c.lastReceive(m) {
		c.hide(ctx, m, d)
		return
	}
	ctx = context.WithoutCancel(ctx)
	body, _ := json.Marshal(msg) // a direct send's copy names its adopted task
	if err := c.queues.Replace(ctx, m, string(body), min(d, queue.MaxDelay)); err != nil {
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
	lost := triagetype.Attempt{Attempt: t.Attempts, WorkerID: t.WorkerID, FinishedAt: c.store.Now(), Error: "lease expired: the worker stopped renewing it", Outcome: triagetype.AttemptLeaseExpired}
	if t.StartedAt != nil {
		lost.StartedAt = *t.StartedAt
	}
	c.log.Warn("reclaiming task whose lease expired", "task_id", t.ID, "previous_worker", t.WorkerID, "attempts", t.Attempts)
	c.mx.Recovered(metrics.RecoveredLease)
	if t.Attempts >= t.MaxAttempts {
		c.mx.Failed(t, metrics.FailLeaseExpired)
		j := &job{msg: m, cur: t}
		c.deadLetter(ctx, j, lost, &triagetype.TaskError{Message: "lease expired on the last attempt (worker lost)", Retriable: true})
		return nil, nil
	}
	return c.store.Transition(ctx, t, triagetype.Queued, func(n *task.Task) {
		n.WorkerID, n.LeaseUntil = "", nil
		n.AddAttempt(lost)
	})
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
