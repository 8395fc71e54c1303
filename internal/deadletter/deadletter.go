// Package deadletter reads and replays the three dead-letter queues.
//
// A DLQ message is either a copy of a task's message that triage put there
// (with the reason attached) or a body nobody could parse. Reading a DLQ
// hides its messages only for a moment and then hands them back, so listing
// never consumes them; replaying puts dead-lettered tasks back on their
// queue and deletes their DLQ message.
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
	"slices"
	"time"

	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Queues is the part of the queues the DLQ tools use.
type Queues interface {
	ReceiveDLQ(ctx context.Context, p task.Priority, n int, wait, visibility time.Duration) ([]queue.Received, error)
	DeleteDLQ(ctx context.Context, p task.Priority, receipt string) error
	ChangeVisibilityDLQ(ctx context.Context, p task.Priority, receipt string, d time.Duration) error
}

// Store reads tasks.
type Store interface {
	Get(ctx context.Context, id string) (*task.Task, error)
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
}

// New returns the DLQ tools.
func New(q Queues, s Store, r Retrier) *DLQ { return &DLQ{queues: q, store: s, retry: r} }

// peekVisibility is how long a listed message stays hidden if handing it
// back fails.
const peekVisibility = 5 * time.Second

// List returns up to limit messages from the DLQs of prios, without
// consuming them.
func (d *DLQ) List(ctx context.Context, prios []task.Priority, limit int) ([]Message, error) {
	var out []Message
	var held []held
	defer d.release(ctx, &held)
	for _, p := range prios {
		for len(out) < limit {
			msgs, err := d.queues.ReceiveDLQ(ctx, p, min(queue.MaxBatch, limit-len(out)), 0, peekVisibility)
			if err != nil {
				return nil, err
			}
			if len(msgs) == 0 {
				break
			}
			for _, m := range msgs {
				held = append(held, heldMsg(p, m))
				out = append(out, d.describe(ctx, p, m))
			}
		}
	}
	slices.SortStableFunc(out, func(a, b Message) int {
		return cmp.Or(cmp.Compare(a.Priority.Rank(), b.Priority.Rank()), a.SentAt.Compare(b.SentAt), cmp.Compare(a.MessageID, b.MessageID))
	})
	return out, nil
}

type held struct {
	p       task.Priority
	receipt string
}

func heldMsg(p task.Priority, m queue.Received) held { return held{p, m.ReceiptHandle} }

// release hands back messages this call was holding.
func (d *DLQ) release(ctx context.Context, hs *[]held) {
	for _, h := range *hs {
		_ = d.queues.ChangeVisibilityDLQ(context.WithoutCancel(ctx), h.p, h.receipt, 0)
	}
}

func (d *DLQ) describe(ctx context.Context, p task.Priority, m queue.Received) Message {
	out := Message{Priority: p, MessageID: m.MessageID, Reason: m.Reason, Body: m.Body, SentAt: m.SentAt, ReceiveCount: m.ReceiveCount}
	if out.Reason == "" {
		out.Reason = "redriven by SQS (not yet reconciled)"
	}
	var msg task.Message
	if json.Unmarshal([]byte(m.Body), &msg) == nil && msg.ID != "" {
		out.TaskID = msg.ID
		if t, err := d.store.Get(ctx, msg.ID); err == nil {
			out.Type = t.Type
		}
	}
	return out
}

// ReplayFilter selects what Replay puts back.
type ReplayFilter struct {
	Priorities []task.Priority
	Type       string // "" for any
	Limit      int
}

// ReplayResult counts what Replay did (the public type).
type ReplayResult = triagetype.ReplayResult

// Replay puts back on their queues the dead-lettered tasks whose DLQ
// messages match f, with attempts reset, and deletes those messages. A
// message whose task is gone or finished some other way is deleted too
// (there is nothing to replay); poison bodies and non-matching messages are
// left in place. Each task is replayed at most once per call, even if it
// fails again and lands back in the DLQ while the call is still reading.
func (d *DLQ) Replay(ctx context.Context, f ReplayFilter) (ReplayResult, error) {
	var r ReplayResult
	var held []held
	defer d.release(ctx, &held)
	replayed := map[string]bool{}
	for _, p := range f.Priorities {
		for r.Replayed < f.Limit {
			msgs, err := d.queues.ReceiveDLQ(ctx, p, queue.MaxBatch, 0, peekVisibility)
			if err != nil {
				return r, err
			}
			if len(msgs) == 0 {
				break
			}
			for _, m := range msgs {
				if r.Replayed >= f.Limit {
					held = append(held, heldMsg(p, m))
					continue
				}
				var msg task.Message
				if json.Unmarshal([]byte(m.Body), &msg) == nil && replayed[msg.ID] {
					held = append(held, heldMsg(p, m)) // failed again since: leave it for next time
					continue
				}
				done, err := d.replayOne(ctx, p, m, f.Type)
				if err != nil {
					return r, err
				}
				if done {
					replayed[msg.ID] = true
					r.Replayed++
				} else {
					r.Skipped++
					held = append(held, heldMsg(p, m))
				}
			}
		}
	}
	return r, nil
}

func (d *DLQ) replayOne(ctx context.Context, p task.Priority, m queue.Received, typ string) (bool, error) {
	var msg task.Message
	if json.Unmarshal([]byte(m.Body), &msg) != nil || msg.ID == "" {
		return false, nil // poison: nothing to replay
	}
	t, err := d.store.Get(ctx, msg.ID)
	if errors.Is(err, store.ErrNotFound) {
		return false, d.queues.DeleteDLQ(ctx, p, m.ReceiptHandle)
	}
	if err != nil {
		return false, err
	}
	if typ != "" && t.Type != typ {
		return false, nil
	}
	if t.Status != task.DeadLetter {
		// Retried by hand already, or redriven but not yet reconciled: the
		// promoter deals with the latter; a stale copy is dropped.
		if t.Status.Terminal() || msg.Version != t.DispatchVersion {
			return false, d.queues.DeleteDLQ(ctx, p, m.ReceiptHandle)
		}
		return false, nil
	}
	if _, err := d.retry.Retry(ctx, d.store.Get, t.ID); err != nil {
		return false, fmt.Errorf("replay task %s: %w", t.ID, err)
	}
	return true, d.queues.DeleteDLQ(ctx, p, m.ReceiptHandle)
}
