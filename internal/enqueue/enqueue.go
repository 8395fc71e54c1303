// Package enqueue hands tasks to their SQS queues.
//
// It is the one place that sends a task's message, so the rule that keeps
// messages and task records consistent lives here: a message is always sent
// before the record that points at it is written. A task's record names the
// version of its one live message (dispatch_version), and any other message
// for it is stale.
//
// For a new task that means: send, then create the record. A crash or a
// failed write in between leaves a message with no task, which the
// consumer recognises (no record appears within a grace period) and moves
// to the DLQ with a reason; it never leaves a recorded task without a
// message. So a task that exists and is queued always has a live message,
// and a submit that was answered with success can never be lost. A
// re-dispatch likewise sends the new message first and then points the
// record at it; if that write loses a race, the new message is stale and is
// dropped on receive.
package enqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Store is the part of the task store enqueueing needs.
type Store interface {
	Create(ctx context.Context, t *task.Task) (*task.Task, bool, error)
	ByIdempotencyKey(ctx context.Context, key string) (*task.Task, error)
	Transition(ctx context.Context, cur *task.Task, to triagetype.Status, apply func(*task.Task)) (*task.Task, error)
	Now() time.Time
}

// Sender is the part of the queues enqueueing needs.
type Sender interface {
	Send(ctx context.Context, p triagetype.Priority, body string, delay time.Duration) (string, error)
	SendBatch(ctx context.Context, p triagetype.Priority, msgs []queue.Outgoing) error
}

// Enqueuer creates and (re)dispatches tasks.
type Enqueuer struct {
	store  Store
	queues Sender
	links  Linker // nil: tasks naming parents are refused (see links.go)
}

// New returns an Enqueuer.
func New(s Store, q Sender) *Enqueuer { return &Enqueuer{store: s, queues: q} }

// ErrNotSent means a new task's message could not be sent; nothing was
// recorded, and the same request may be retried safely.
var ErrNotSent = errors.New("task message not sent")

// ErrNotRecorded means a new task's message was sent but its record could
// not be written. The task was not accepted: its message has no task and
// will be dead-lettered as such, and the same request may be retried
// safely (with the same idempotency key too: the key was not taken).
var ErrNotRecorded = errors.New("task not recorded")

// Body is the SQS body of t's message at dispatch version v.
func Body(t *task.Task, v int64) string {
	return encode(task.MessageFor(t, v))
}

// encode is a message's body: its JSON (a Message always marshals).
func encode(msg task.Message) string {
	b, _ := json.Marshal(msg)
	return string(b)
}

// Submit sends a new task's message (unless it is scheduled; with a delay
// when run_at is near) and then records the task. created is false when
// the task's idempotency key was already used: the existing task is
// returned and nothing is sent.
func (e *Enqueuer) Submit(ctx context.Context, t *task.Task) (*task.Task, bool, error) {
	res := e.SubmitBatch(ctx, []*task.Task{t})[0]
	return res.Task, res.Created, res.Err
}

// Result is the outcome of one task of a batch.
type Result struct {
	Task    *task.Task
	Created bool
	Err     error
}

// SubmitBatch submits many tasks as Submit does, batching the sends per
// priority. Items that repeat an idempotency key (within the batch, or one
// used before) get the first task and send nothing.
func (e *Enqueuer) SubmitBatch(ctx context.Context, ts []*task.Task) []Result {
	res := make([]Result, len(ts))
	first := map[string]int{} // idempotency key -> first item in this batch that has it
	sameAs := map[int]int{}   // item -> the earlier item it repeats
	var keyed []int           // first items of their key
	for i, t := range ts {
		if k := t.IdempotencyKey; k != "" {
			if j, dup := first[k]; dup {
				sameAs[i] = j
				continue
			}
			first[k] = i
			keyed = append(keyed, i)
		}
	}
	used := make([]bool, len(ts)) // the item's key named an existing task, or could not be looked up
	parallel(keyed, createConcurrency, func(i int) {
		existing, err := e.store.ByIdempotencyKey(ctx, ts[i].IdempotencyKey)
		switch {
		case err == nil:
			res[i], used[i] = Result{Task: existing}, true
		case !errors.Is(err, store.ErrNotFound):
			res[i], used[i] = Result{Err: err}, true
		}
	})
	var fresh []int // items that make a new task
	for i := range ts {
		if _, dup := sameAs[i]; !dup && !used[i] {
			fresh = append(fresh, i)
		}
	}

	fresh = e.link(ctx, ts, fresh, res) // dependencies and batches: links.go
	fresh0 := fresh                     // what Link accepted, for Settle
	// A task held at submit (its key past its fair window) waits in the
	// table with no message (package hold): its record is written before
	// any of the batch's messages is sent, so a consumer that starts one
	// of them and releases its key's next held task finds it. Written
	// after, the release could find the held set empty and lower the
	// key's flag, leaving the batch's held tasks to the promoter's sweep
	// and the key's next submits to the queue, out of its share.
	var held, rest []int
	for _, i := range fresh {
		if t := ts[i]; t.Status == triagetype.Queued && t.Held != "" {
			held = append(held, i)
		} else {
			rest = append(rest, i)
		}
	}
	e.create(ctx, ts, held, res)
	fresh = rest
	// Send first: a record is written only for a task whose message is out.
	byPrio := map[triagetype.Priority][]int{}
	for _, i := range fresh {
		if t := ts[i]; t.Status == triagetype.Queued && t.Held == "" {
			byPrio[t.EffectivePriority] = append(byPrio[t.EffectivePriority], i)
		}
	}
	for p, idx := range byPrio {
		msgs := make([]queue.Outgoing, len(idx))
		for j, i := range idx {
			msgs[j] = queue.Outgoing{ID: fmt.Sprint(j), Body: Body(ts[i], ts[i].DispatchVersion), Delay: e.delay(ts[i]), Traceparent: ts[i].Traceparent, Group: ts[i].FairKey()}
		}
		for j, reason := range sendFailures(e.queues.SendBatch(ctx, p, msgs), len(idx)) {
			res[idx[j]] = Result{Err: fmt.Errorf("%w: %s", ErrNotSent, reason)}
		}
	}
	var sent []int
	for _, i := range fresh {
		if res[i].Err == nil {
			sent = append(sent, i)
		}
	}

	e.create(ctx, ts, sent, res)
	e.settle(ctx, ts, fresh0, res)
	for i, j := range sameAs {
		res[i] = Result{Task: res[j].Task, Err: res[j].Err}
	}
	return res
}

// create writes the records of ts[idx], each into its res. Each record
// is its own conditional write on its own key, so they go out side by
// side: a batch of 100 costs a few round trips, not 100.
func (e *Enqueuer) create(ctx context.Context, ts []*task.Task, idx []int, res []Result) {
	parallel(idx, createConcurrency, func(i int) {
		saved, created, err := e.store.Create(ctx, ts[i])
		var fe *task.FieldError
		switch {
		case err == nil || errors.As(err, &fe): // a field error (a sealed batch) is the caller's
		case errors.Is(err, store.ErrAddExpired): // surely not written (Linked)
			err = fmt.Errorf("%w: %w", ErrNotRecorded, err)
		default:
			err = fmt.Errorf("%w: %v", ErrNotRecorded, err)
		}
		res[i] = Result{Task: saved, Created: created, Err: err}
	})
}

// createConcurrency bounds the record writes one batch has in flight. 16
// keeps a 100-task batch to ~7 round trips while staying far below the
// SDK's connection pool and any one Lambda's share of the table's capacity.
const createConcurrency = 16

// parallel runs fn for every element of idx, at most limit at a time, and
// returns when all have returned. fn must write only its own element's
// state.
func parallel(idx []int, limit int, fn func(int)) {
	var g errgroup.Group
	g.SetLimit(limit)
	for _, i := range idx {
		g.Go(func() error { fn(i); return nil })
	}
	_ = g.Wait() // every call returns nil
}

// sendFailures maps a batch send's error to the reason each failed entry
// failed, by entry position (entries are named by position).
func sendFailures(err error, n int) map[int]string {
	if err == nil {
		return nil
	}
	out := map[int]string{}
	var be *queue.BatchError
	if !errors.As(err, &be) {
		for j := range n {
			out[j] = err.Error()
		}
		return out
	}
	for j := range n {
		if reason, failed := be.Failed[fmt.Sprint(j)]; failed {
			out[j] = reason
		}
	}
	return out
}

func (e *Enqueuer) delay(t *task.Task) time.Duration {
	if t.RunAt == nil {
		return 0
	}
	return t.RunAt.Sub(e.store.Now())
}

// Redispatch moves cur to status to (queued or retrying) with a fresh
// message on priority p's queue, visible after delay. apply may edit the
// next state further. The message is sent first and then the record is
// pointed at it; if the record write loses a race, the message is stale and
// the consumer drops it.
func (e *Enqueuer) Redispatch(ctx context.Context, cur *task.Task, to triagetype.Status, p triagetype.Priority, delay time.Duration, apply func(*task.Task)) (*task.Task, error) {
	moved, err := e.RedispatchBatch(ctx, to, p, []Move{{Task: cur, Delay: delay, Apply: apply}})
	if err != nil {
		return nil, fmt.Errorf("redispatch task %s: %w", cur.ID, err)
	}
	return moved[0], nil
}

// redispatchWrites is how many of a batch re-dispatch's writes are made at
// once: one SQS batch's worth.
const redispatchWrites = 10

// Move is one task of a batch re-dispatch.
type Move struct {
	Task  *task.Task
	Delay time.Duration
	Apply func(*task.Task)
}

// RedispatchBatch re-dispatches many tasks to priority p's queue in status
// to: one batched send for the lot, then one conditional write per task.
// It returns the tasks moved; a task whose send or write failed is left as
// it was (its message, if sent, is stale and will be dropped).
func (e *Enqueuer) RedispatchBatch(ctx context.Context, to triagetype.Status, p triagetype.Priority, moves []Move) ([]*task.Task, error) {
	if len(moves) == 0 {
		return nil, nil
	}
	failed, err := e.sendMoves(ctx, p, moves, func(next *task.Task, m Move) string {
		if m.Apply != nil {
			m.Apply(next) // the message states the task as its write will leave it
		}
		return Body(next, m.Task.Version+1)
	})
	if err != nil {
		return nil, fmt.Errorf("redispatch batch to %s: %w", p, err)
	}
	// The writes are independent conditional writes: made side by side (at
	// most redispatchWrites at once), so a batch's messages, sent first,
	// find their records written after about one write's latency, not
	// len(moves) of them.
	now := e.store.Now()
	done := make([]*task.Task, len(moves))
	errs := make([]error, len(moves)) // by move: the first by position is returned
	var g errgroup.Group
	g.SetLimit(redispatchWrites)
	for i, m := range moves {
		if _, bad := failed[fmt.Sprint(i)]; bad {
			continue
		}
		g.Go(func() error {
			v := m.Task.Version + 1
			done[i], errs[i] = e.store.Transition(ctx, m.Task, to, func(n *task.Task) {
				n.EffectivePriority = p
				n.DispatchVersion = v
				if to == triagetype.Queued && m.Task.Status != triagetype.Queued {
					n.EnqueuedAt = &now
				}
				if m.Apply != nil {
					m.Apply(n)
				}
			})
			return nil // kept in errs[i]
		})
	}
	_ = g.Wait()
	var moved []*task.Task
	var firstErr error
	for i := range moves {
		if errs[i] != nil && firstErr == nil {
			firstErr = errs[i]
		}
		if done[i] != nil && errs[i] == nil {
			moved = append(moved, done[i])
		}
	}
	if len(failed) > 0 && firstErr == nil {
		firstErr = fmt.Errorf("redispatch batch to %s: %d sends failed", p, len(failed))
	}
	return moved, firstErr
}

// SendReleases sends a message for each waiting task of moves, to priority p's
// queue (after its Delay), naming parent, which completed as the last of
// their parents (task.Message.ReleasedBy), and writes nothing: the message
// stands in for the release write, and the claim moves the task from
// waiting (internal/dispatch), having checked that parent completed and
// is all the task still waits on. The message's version is the task's
// dispatch version as it is, so a write that moves the task any other way
// first (a cancel, the flow sweep's release) makes it stale. It returns
// the tasks whose message was sent.
func (e *Enqueuer) SendReleases(ctx context.Context, p triagetype.Priority, parent string, moves []Move) ([]*task.Task, error) {
	if len(moves) == 0 {
		return nil, nil
	}
	failed, err := e.sendMoves(ctx, p, moves, func(next *task.Task, m Move) string {
		msg := task.MessageFor(next, m.Task.DispatchVersion)
		msg.ReleasedBy = parent
		return encode(msg)
	})
	if err != nil {
		return nil, fmt.Errorf("send releases to %s: %w", p, err)
	}
	if len(failed) > 0 {
		err = fmt.Errorf("send releases to %s: %d sends failed", p, len(failed))
	}
	var sent []*task.Task
	for i, m := range moves {
		if _, bad := failed[fmt.Sprint(i)]; !bad {
			sent = append(sent, m.Task)
		}
	}
	return sent, err
}

// sendMoves sends one message per move to priority p's queue, ten to a
// request, each body made by body from the task as the message states it
// (a copy at priority p). It returns the sends that failed, by the move's
// position (fmt.Sprint(i)); an error when the whole send failed.
func (e *Enqueuer) sendMoves(ctx context.Context, p triagetype.Priority, moves []Move, body func(next *task.Task, m Move) string) (map[string]string, error) {
	msgs := make([]queue.Outgoing, len(moves))
	for i, m := range moves {
		next := m.Task.Clone()
		next.EffectivePriority = p
		msgs[i] = queue.Outgoing{ID: fmt.Sprint(i), Body: body(next, m), Delay: m.Delay, Group: m.Task.FairKey()}
	}
	if err := e.queues.SendBatch(ctx, p, msgs); err != nil {
		var be *queue.BatchError
		if !errors.As(err, &be) {
			return nil, err
		}
		return be.Failed, nil
	}
	return map[string]string{}, nil
}

// Retry puts a dead-lettered task back on its original priority's queue
// with its attempts reset and its error cleared; its history is kept. A
// task in any other status is a *store.StateError.
func (e *Enqueuer) Retry(ctx context.Context, get func(context.Context, string) (*task.Task, error), id string) (*task.Task, error) {
	for range 5 {
		t, err := get(ctx, id)
		if err != nil {
			return nil, err
		}
		if t.Status != triagetype.DeadLetter {
			return t, &store.StateError{ID: id, Status: t.Status, Op: "retry"}
		}
		next, err := e.Redispatch(ctx, t, triagetype.Queued, t.Priority, 0, func(n *task.Task) {
			n.Attempts = 0
			n.Error, n.Result = nil, nil
			n.ResultRef, n.ResultSize = "", 0
			n.CompletedAt, n.RetryAt, n.StartedAt = nil, nil, nil
			n.ExpiresAt = 0
			n.CancelRequested = false
		})
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		return next, err
	}
	return nil, fmt.Errorf("retry task %s: %w (it kept changing)", id, store.ErrConflict)
}
