// Package deadletter reads, replays and purges the three dead-letter queues.
//
// A DLQ message is either a copy of a task's message that triage put there
// (with the reason attached) or a body nobody could parse. Reading a DLQ
// hides its messages only for a moment and then hands them back, so listing
// never consumes them; replaying puts dead-lettered tasks back on their
// queue and deletes their DLQ message.
//
// The invariant this package keeps: **a DLQ holds exactly one message per
// dead task it holds** (plus poison bodies, which name no task), so the
// DLQ depth /stats shows equals the dead tasks. A task's own message (its
// "copy") is the one whose body names the task at the version of its
// dead_letter record: every writer of a dead letter (the consumer, the
// promoter's reconciliation) sends enqueue.Body(dead, dead.Version). Any
// other message naming the task is stale. So:
//   - Retry (the API's POST /tasks/{id}/retry) re-queues the task and then
//     deletes its copy, which SQS can only do with a receive: a bounded scan
//     of the DLQ (MaxScan messages per priority, the dead priority first).
//     A copy left behind would be joined by a second when the retried task
//     failed again: 11 messages for 10 dead tasks.
//   - Replay acts only on a task's own copy and deletes stale ones, so a
//     copy the scan missed can never re-queue its task a second time.
//   - Purge deletes the dead task's record with its copy, never one alone.
//
// SQS has no way to look at a message without receiving it, so every
// listing adds one to each listed message's receive count. That count means
// nothing for a DLQ message (a DLQ redrives nowhere): it is shown as SQS
// reports it, and listings are sorted by send time and message id, not
// returned in the arbitrary order SQS hands messages out.
package deadletter

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Queues is the part of the queues the DLQ tools use.
type Queues interface {
	ReceiveDLQ(ctx context.Context, p triagetype.Priority, n int, wait, visibility time.Duration) ([]queue.Received, error)
	DeleteDLQ(ctx context.Context, p triagetype.Priority, receipt string) error
	ChangeVisibilityDLQ(ctx context.Context, p triagetype.Priority, receipt string, d time.Duration) error
	// DLQCount is how many messages p's DLQ holds, visible or not.
	DLQCount(ctx context.Context, p triagetype.Priority) (int, error)
}

// Store reads and deletes tasks.
type Store interface {
	// Get is a strongly consistent read: every decision to delete a
	// message or a task is taken on one.
	Get(ctx context.Context, id string) (*task.Task, error)
	// GetMany reads many tasks, eventually consistent: only for showing
	// and filtering, never for deciding.
	GetMany(ctx context.Context, ids []string) ([]*task.Task, error)
	// Delete removes cur, conditional on its status and version.
	Delete(ctx context.Context, cur *task.Task) error
}

// Retrier puts a dead-lettered task back on its queue.
type Retrier interface {
	Retry(ctx context.Context, get func(context.Context, string) (*task.Task, error), id string) (*task.Task, error)
}

// Message is one DLQ message as the API shows it (the public type).
type Message = triagetype.DLQMessage

// DLQ reads and replays dead-letter queues.
type DLQ struct {
	queues Queues
	store  Store
	retry  Retrier
	log    *slog.Logger
	// rescans counts the passes replays, purges and retries' searches for
	// their copies made again because a DLQ held messages they could not
	// see (for tests; see each).
	rescans atomic.Int64
}

// Option configures the DLQ tools.
type Option func(*DLQ)

// WithLogger logs what the tools cannot report to their caller: a copy a
// retry could not remove (the retry itself succeeded).
func WithLogger(l *slog.Logger) Option { return func(d *DLQ) { d.log = l } }

// New returns the DLQ tools.
func New(q Queues, s Store, r Retrier, opts ...Option) *DLQ {
	d := &DLQ{queues: q, store: s, retry: r, log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(d)
	}
	return d
}

// MaxScan bounds the messages one call reads from one priority's DLQ (100
// receives of ten). It keeps every call O(1) in the size of the DLQ: a
// listing filtered by type or reason, a replay or purge of a filter, and
// the search for a retried task's copy read at most this many messages
// per priority, and say so when they stopped short (Message lists carry
// Scanned; a copy not found is left to the next replay, which deletes it
// as stale).
const MaxScan = 1000

// peekVisibility is how long a listed message stays hidden if handing it
// back fails.
const peekVisibility = 5 * time.Second

// Filter selects DLQ messages. Empty fields match everything.
type Filter struct {
	Priorities []triagetype.Priority
	Type       string // the task's type, exactly
	// Reason matches messages whose reason contains it, case-insensitively.
	Reason string
	// TaskIDs, when set, matches only messages of these tasks (a
	// replay or purge of rows the operator selected).
	TaskIDs []string
	// MessageIDs, when set, matches only these messages (a purge of
	// selected poison bodies, which name no task).
	MessageIDs []string
	// Limit is the most messages listed, or tasks replayed or purged.
	Limit int
}

// ReplayFilter selects what Replay puts back.
type ReplayFilter = Filter

// ReplayResult counts what Replay did (the public type).
type ReplayResult = triagetype.ReplayResult

// matches reports whether message m (with its task t, nil if none)
// passes f.
func (f Filter) matches(m Message, t *task.Task) bool {
	if len(f.MessageIDs) > 0 && !slices.Contains(f.MessageIDs, m.MessageID) {
		return false
	}
	if len(f.TaskIDs) > 0 && (m.TaskID == "" || !slices.Contains(f.TaskIDs, m.TaskID)) {
		return false
	}
	if f.Type != "" && (t == nil || t.Type != f.Type) {
		return false
	}
	if f.Reason != "" && !strings.Contains(strings.ToLower(m.Reason), strings.ToLower(f.Reason)) {
		return false
	}
	return true
}

// List returns up to limit messages from the DLQs of prios, without
// consuming them.
func (d *DLQ) List(ctx context.Context, prios []triagetype.Priority, limit int) ([]Message, error) {
	out, _, err := d.Find(ctx, Filter{Priorities: prios, Limit: limit})
	return out, err
}

// Find returns up to f.Limit messages matching f, without consuming them,
// and whether it stopped short: it reads at most MaxScan messages per
// priority, so a filter that matches few of a large DLQ's messages may
// not find them all (truncated is then true). It costs one receive per ten
// messages read and one BatchGetItem per receive (for the tasks' types).
func (d *DLQ) Find(ctx context.Context, f Filter) (out []Message, truncated bool, err error) {
	var held []held
	defer d.release(ctx, &held)
	for _, p := range f.Priorities {
		read := 0
		for len(out) < f.Limit {
			if read >= MaxScan {
				truncated = true
				break
			}
			msgs, err := d.queues.ReceiveDLQ(ctx, p, queue.MaxBatch, 0, peekVisibility)
			if err != nil {
				return nil, false, err
			}
			if len(msgs) == 0 {
				break
			}
			read += len(msgs)
			tasks, err := d.tasksOf(ctx, msgs)
			if err != nil {
				return nil, false, err
			}
			for _, m := range msgs {
				held = append(held, heldMsg(p, m))
				desc, t := describe(p, m, tasks)
				if len(out) < f.Limit && f.matches(desc, t) {
					out = append(out, desc)
				}
			}
		}
	}
	slices.SortStableFunc(out, func(a, b Message) int {
		return cmp.Or(cmp.Compare(a.Priority.Rank(), b.Priority.Rank()), a.SentAt.Compare(b.SentAt), cmp.Compare(a.MessageID, b.MessageID))
	})
	return out, truncated, nil
}

type held struct {
	p       triagetype.Priority
	receipt string
}

func heldMsg(p triagetype.Priority, m queue.Received) held { return held{p, m.ReceiptHandle} }

// release hands back messages this call was holding.
func (d *DLQ) release(ctx context.Context, hs *[]held) {
	for _, h := range *hs {
		_ = d.queues.ChangeVisibilityDLQ(context.WithoutCancel(ctx), h.p, h.receipt, 0)
	}
}

// taskIDOf is the task a message's body names ("" for a poison body).
func taskIDOf(m queue.Received) (string, int64) {
	var msg task.Message
	if json.Unmarshal([]byte(m.Body), &msg) != nil {
		return "", 0
	}
	return msg.ID, msg.Version
}

// tasksOf reads the tasks msgs name, in one eventually consistent batch.
func (d *DLQ) tasksOf(ctx context.Context, msgs []queue.Received) (map[string]*task.Task, error) {
	var ids []string
	for _, m := range msgs {
		if id, _ := taskIDOf(m); task.CheckID(id) == nil {
			ids = append(ids, id)
		}
	}
	out := map[string]*task.Task{}
	if len(ids) == 0 {
		return out, nil
	}
	ts, err := d.store.GetMany(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("read the tasks of %d DLQ messages: %w", len(ids), err)
	}
	for _, t := range ts {
		out[t.ID] = t
	}
	return out, nil
}

func describe(p triagetype.Priority, m queue.Received, tasks map[string]*task.Task) (Message, *task.Task) {
	out := Message{Priority: p, MessageID: m.MessageID, Reason: m.Reason, Body: m.Body, SentAt: m.SentAt, ReceiveCount: m.ReceiveCount}
	if out.Reason == "" {
		out.Reason = "redriven by SQS (not yet reconciled)"
	}
	id, _ := taskIDOf(m)
	if id == "" {
		return out, nil
	}
	out.TaskID = id
	t := tasks[id]
	if t != nil {
		out.Type = t.Type
	}
	return out, t
}

// ownCopy reports whether a DLQ message naming t at version v is t's own
// dead letter: t is dead_letter and the body names its current version.
func ownCopy(t *task.Task, v int64) bool {
	return t.Status == triagetype.DeadLetter && v == t.Version
}

// Retry puts the dead-lettered task id back on its original priority's
// queue with its attempts reset (as Enqueuer.Retry does; any other status
// is a *store.StateError) and removes its copy from the DLQ, so the DLQ
// keeps one message per dead task: should the task fail again, the
// consumer's new copy replaces this one instead of joining it.
//
// The copy is found by scanning (SQS deletes only what it handed out):
// the DLQ of the priority the task died at first, then the others, at most
// MaxScan messages each, stopping once found. Only messages naming the task
// at a version below the retried one are deleted, so a copy of a failure
// that happened during the scan stays. A copy the scan could not find (an
// SQS outage, a concurrent reader holding it) is logged and left stale:
// the next replay that reads it deletes it without re-queueing the task.
func (d *DLQ) Retry(ctx context.Context, id string) (*task.Task, error) {
	dead, err := d.store.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if dead.Status != triagetype.DeadLetter {
		return dead, &store.StateError{ID: id, Status: dead.Status, Op: "retry"}
	}
	// A durable step's recorded permanent error would fail the retry
	// again: the retry runs that step anew (internal/durable).
	if f, ok := d.store.(interface {
		ForgetFailedSteps(ctx context.Context, t *task.Task) error
	}); ok {
		if err := f.ForgetFailedSteps(ctx, dead); err != nil {
			return nil, err
		}
	}
	t, err := d.retry.Retry(ctx, d.store.Get, id)
	if err != nil {
		return t, err
	}
	d.removeCopies(ctx, map[string]int64{id: t.Version}, dead.EffectivePriority)
	return t, nil
}

// Delete deletes the finished task cur and, when it was dead-lettered, its
// copy in the DLQ (found as Retry finds it), so deleting a dead task never
// leaves its message behind to over-count the DLQ.
func (d *DLQ) Delete(ctx context.Context, cur *task.Task) error {
	if err := d.store.Delete(ctx, cur); err != nil {
		return err
	}
	if cur.Status == triagetype.DeadLetter {
		// No version of a deleted task is current: every copy is stale.
		d.removeCopies(ctx, map[string]int64{cur.ID: cur.Version + 1}, cur.EffectivePriority)
	}
	return nil
}

// removeCopies deletes, for each task in below, one DLQ message naming it
// at a version lower than below[id], scanning first's DLQ and then the
// others'. Failures are logged: the caller's own change has been made.
func (d *DLQ) removeCopies(ctx context.Context, below map[string]int64, first triagetype.Priority) {
	ctx = context.WithoutCancel(ctx) // the task changed: finish its DLQ's side even if the client left
	left := len(below)
	var hs []held
	defer d.release(ctx, &hs)
	order := triagetype.Priorities()
	if slices.Contains(order, first) {
		order = append([]triagetype.Priority{first}, slices.DeleteFunc(order, func(p triagetype.Priority) bool { return p == first })...)
	}
	cut := map[triagetype.Priority]bool{}
	for pass := 0; left > 0 && pass <= len(rescanWaits); pass++ {
		if pass > 0 {
			// Another reader (a listing, a replay, the promoter's
			// reconciliation between a receive and its hand-back) may
			// hold the copy out of sight for the moment it reads: when
			// the DLQs hold messages this call has not seen, look again
			// once it has had time to hand them back. What this call read
			// stays held, so a pass sees only what others freed.
			if d.unseen(ctx, order, hs, cut) == 0 {
				break // nothing out of sight: the copy is not there
			}
			d.rescans.Add(1)
			time.Sleep(rescanWaits[pass-1])
		}
		d.scanCopies(ctx, below, order, &left, &hs, cut)
	}
	for id := range below {
		d.log.Warn("retried task's DLQ copy not found (within the scan bound); if it is there, the next replay removes it", "task_id", id, "max_scan", MaxScan)
	}
}

// rescanWaits are the pauses before a scan looks again for messages a DLQ
// held out of its sight: a concurrent reader hides what it reads only
// while it reads (well under a second), so two short looks find what it
// held.
var rescanWaits = [...]time.Duration{500 * time.Millisecond, 1500 * time.Millisecond}

// scanCopies is one pass of removeCopies over the DLQs in order.
// Priorities whose scan stopped at MaxScan are set in cut.
func (d *DLQ) scanCopies(ctx context.Context, below map[string]int64, order []triagetype.Priority, left *int, hs *[]held, cut map[triagetype.Priority]bool) {
	for _, p := range order {
		for read := 0; *left > 0; {
			if read >= MaxScan {
				cut[p] = true
				break
			}
			msgs, err := d.queues.ReceiveDLQ(ctx, p, queue.MaxBatch, 0, peekVisibility)
			if err != nil {
				d.log.Warn("could not scan a DLQ for retried tasks' copies; the next replay removes them", "priority", p, "error", err)
				break // the other priorities may still hold them
			}
			if len(msgs) == 0 {
				break
			}
			read += len(msgs)
			for _, m := range msgs {
				id, v := taskIDOf(m)
				if limit, ok := below[id]; ok && v < limit {
					if err := d.queues.DeleteDLQ(ctx, p, m.ReceiptHandle); err != nil {
						d.log.Warn("could not delete a retried task's DLQ copy; the next replay removes it", "task_id", id, "error", err)
						*hs = append(*hs, heldMsg(p, m))
						continue
					}
					delete(below, id)
					*left--
					continue
				}
				*hs = append(*hs, heldMsg(p, m))
			}
		}
	}
}

// Replay puts back on their queues the dead-lettered tasks whose DLQ
// messages match f, with attempts reset, and deletes those messages. A
// message that is not its task's own copy (the task is gone, finished some
// other way, retried by hand, or dead again at a later version) is deleted
// too: there is nothing to replay, and keeping it would over-count the DLQ
// and re-queue the task twice. Poison bodies and non-matching messages are
// left in place. Each task is replayed at most once per call, even if it
// fails again and lands back in the DLQ while the call is still reading.
// At most MaxScan messages are read per priority.
func (d *DLQ) Replay(ctx context.Context, f Filter) (ReplayResult, error) {
	var r ReplayResult
	err := d.each(ctx, f, func(p triagetype.Priority, m queue.Received, t *task.Task) (bool, error) {
		if t == nil || t.Status != triagetype.DeadLetter {
			return false, nil // a poison body, or a redrive not yet reconciled
		}
		if _, err := d.retry.Retry(ctx, d.store.Get, t.ID); err != nil {
			return false, fmt.Errorf("replay task %s: %w", t.ID, err)
		}
		r.Replayed++
		return true, d.queues.DeleteDLQ(ctx, p, m.ReceiptHandle)
	}, &r.Skipped)
	return r, err
}

// PurgeResult counts what Purge did.
type PurgeResult struct {
	// Purged is the dead tasks deleted with their copies.
	Purged int `json:"purged"`
	// Poison is the messages naming no task that were deleted.
	Poison int `json:"poison"`
	// Skipped is the matching messages left in place.
	Skipped int `json:"skipped"`
}

// Purge deletes the DLQ messages matching f for good: a dead task's own
// copy goes with the task's record (record first, so a failure leaves the
// DLQ over-counting a deleted task, which the next replay cleans, never a
// dead task without its message); a poison body (only when f names it by
// MessageIDs, or f has no task filter) is deleted alone. Stale copies are
// deleted as Replay deletes them.
func (d *DLQ) Purge(ctx context.Context, f Filter) (PurgeResult, error) {
	var r PurgeResult
	poisonOK := f.Type == "" && len(f.TaskIDs) == 0
	err := d.each(ctx, f, func(p triagetype.Priority, m queue.Received, t *task.Task) (bool, error) {
		if t == nil {
			if !poisonOK {
				return false, nil
			}
			r.Poison++
			return true, d.queues.DeleteDLQ(ctx, p, m.ReceiptHandle)
		}
		if t.Status != triagetype.DeadLetter {
			return false, nil
		}
		if err := d.store.Delete(ctx, t); err != nil {
			if errors.Is(err, store.ErrConflict) {
				return false, nil // it changed (retried): not ours to purge now
			}
			return false, fmt.Errorf("purge task %s: %w", t.ID, err)
		}
		r.Purged++
		return true, d.queues.DeleteDLQ(ctx, p, m.ReceiptHandle)
	}, &r.Skipped)
	return r, err
}

// each reads the DLQs of f.Priorities (at most MaxScan messages each) and
// calls act on every message matching f that is its task's own copy (t,
// read consistently) or a poison body (t nil), until act has acted
// (returned true) f.Limit times. Stale copies of tasks are deleted on the
// way; messages act declined are counted in *skipped and handed back.
//
// Another reader (a listing, another replay, the promoter's
// reconciliation for the moment between a receive and its hand-back) may
// hold some messages out of sight while a pass reads. So after a pass
// that did not reach f.Limit, each compares what every DLQ it read to its
// end holds, visible or not (one GetQueueAttributes per priority), with
// what this call holds: more means messages it has not seen, and it looks
// again after 0.5 s and once more after 1.5 s (what this call read stays
// held, so a later pass sees only what others freed). When nothing was
// out of sight, which is the rule now that the reconciliation hands back
// what it reads at once, a replay or purge makes one pass and pays
// nothing more; before, every one paid 2 s. A failure to read a count
// looks again, as before. In SQS the counts are approximate and may lag:
// a needless look costs the 2 s; a look not taken leaves a message for the
// next replay, as a scan cut at MaxScan does.
func (d *DLQ) each(ctx context.Context, f Filter, act func(triagetype.Priority, queue.Received, *task.Task) (bool, error), skipped *int) error {
	var hs []held
	defer d.release(ctx, &hs)
	done := map[string]bool{}
	acted := 0
	for pass := 0; ; pass++ {
		cut := map[triagetype.Priority]bool{}
		if err := d.eachPass(ctx, f, act, skipped, &hs, done, &acted, cut); err != nil || acted >= f.Limit || pass == len(rescanWaits) {
			return err
		}
		unseen := d.unseen(ctx, f.Priorities, hs, cut)
		if unseen == 0 {
			return nil
		}
		d.rescans.Add(1)
		d.log.Debug("a DLQ holds messages a replay or purge could not see; looking again", "unseen", unseen, "pass", pass+1)
		time.Sleep(rescanWaits[pass])
	}
}

// unseen counts the messages the DLQs of prios (but those in cut, read
// only up to MaxScan) hold beyond the hs this call holds: messages another
// reader held while this call read, or that arrived since. A count that
// cannot be read counts as one.
func (d *DLQ) unseen(ctx context.Context, prios []triagetype.Priority, hs []held, cut map[triagetype.Priority]bool) int {
	n := 0
	for _, p := range prios {
		if cut[p] {
			continue
		}
		total, err := d.queues.DLQCount(ctx, p)
		if err != nil {
			d.log.Warn("could not count a DLQ's messages; looking again", "priority", p, "error", err)
			n++
			continue
		}
		for _, h := range hs {
			if h.p == p {
				total--
			}
		}
		n += max(total, 0)
	}
	return n
}

// eachPass is one pass of each over the DLQs of f.
// Priorities whose scan stopped at MaxScan are set in cut.
func (d *DLQ) eachPass(ctx context.Context, f Filter, act func(triagetype.Priority, queue.Received, *task.Task) (bool, error), skipped *int, hsp *[]held, done map[string]bool, actedp *int, cut map[triagetype.Priority]bool) error {
	hs, acted := *hsp, *actedp
	defer func() { *hsp, *actedp = hs, acted }()
	for _, p := range f.Priorities {
		for read := 0; acted < f.Limit; {
			if read >= MaxScan {
				cut[p] = true
				break
			}
			msgs, err := d.queues.ReceiveDLQ(ctx, p, queue.MaxBatch, 0, peekVisibility)
			if err != nil {
				return err
			}
			if len(msgs) == 0 {
				break
			}
			read += len(msgs)
			tasks, err := d.tasksOf(ctx, msgs)
			if err != nil {
				return err
			}
			for _, m := range msgs {
				desc, seen := describe(p, m, tasks)
				id, v := taskIDOf(m)
				// The type filter is safe to apply on the eventually
				// consistent read: a task's type never changes.
				if acted >= f.Limit || done[id] || !f.matches(desc, seen) {
					hs = append(hs, heldMsg(p, m)) // not ours, or failed again since this call acted on its task
					continue
				}
				var t *task.Task
				if id != "" {
					t, err = d.store.Get(ctx, id)
					switch {
					case errors.Is(err, store.ErrNotFound):
						if err := d.queues.DeleteDLQ(ctx, p, m.ReceiptHandle); err != nil {
							return err
						}
						continue
					case err != nil:
						return err
					}
					if stale(t, v) {
						if err := d.queues.DeleteDLQ(ctx, p, m.ReceiptHandle); err != nil {
							return err
						}
						continue
					}
				}
				ok, err := act(p, m, t)
				if err != nil {
					hs = append(hs, heldMsg(p, m))
					return err
				}
				if !ok {
					*skipped++
					hs = append(hs, heldMsg(p, m))
					continue
				}
				acted++
				if id != "" {
					done[id] = true
				}
			}
		}
	}
	return nil
}

// stale reports whether a DLQ message naming t at version v is a leftover
// to delete: not t's own copy, and not a message SQS redrove that the
// promoter has yet to reconcile (t still waiting or running at v's
// dispatch version).
func stale(t *task.Task, v int64) bool {
	if ownCopy(t, v) {
		return false
	}
	if t.Status.Terminal() {
		return true // dead at another version, completed or cancelled
	}
	return v != t.DispatchVersion
}
