// Package promote is the promoter: a periodic sweep that keeps every task
// moving.
//
// Each run it (1) ages tasks: a low task queued for LowAfter moves to
// medium, a medium task at medium for MediumAfter moves to high; (2)
// releases scheduled tasks and parked retries that come due within the
// direct-send window, with DelaySeconds so they start on time; (3)
// reconciles the DLQs, marking tasks whose message SQS redrove there; and
// (4) recovers tasks stuck executing after their worker vanished.
//
// The starvation bound follows from (1): a task submitted at t0 reaches
// the high queue by t0 + LowAfter + MediumAfter + 2 × interval, because
// each step waits at most one interval after its threshold passes.
package promote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/triagehq/triage/internal/enqueue"
	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
)

// Store is the part of the task store the promoter uses.
type Store interface {
	Get(ctx context.Context, id string) (*task.Task, error)
	Waiting(ctx context.Context, q store.WaitingQuery) (store.Page, error)
	Transition(ctx context.Context, cur *task.Task, to task.Status, apply func(*task.Task)) (*task.Task, error)
	Now() time.Time
}

// Mover re-dispatches tasks to a queue.
type Mover interface {
	RedispatchBatch(ctx context.Context, to task.Status, p task.Priority, moves []enqueue.Move) ([]*task.Task, error)
}

// DLQs is the part of the queues DLQ reconciliation uses.
type DLQs interface {
	ReceiveDLQ(ctx context.Context, p task.Priority, n int, wait, visibility time.Duration) ([]queue.Received, error)
	DeleteDLQ(ctx context.Context, p task.Priority, receipt string) error
	SendDLQ(ctx context.Context, p task.Priority, body, reason string) error
	ChangeVisibilityDLQ(ctx context.Context, p task.Priority, receipt string, d time.Duration) error
}

// Options tunes the promoter. Zero values take the defaults in parentheses.
type Options struct {
	LowAfter    time.Duration // low -> medium after this long queued (10 min)
	MediumAfter time.Duration // medium -> high after this long at medium (20 min)
	// DirectWindow: scheduled tasks and parked retries due within it are
	// sent with a delay (15 min, SQS's longest delay).
	DirectWindow time.Duration
	// RecoverAfter: a task still executing this long after its lease ended
	// has lost its message too, and gets a new one (2 min).
	RecoverAfter time.Duration
	// Limit bounds the tasks each step handles per priority per run (500).
	Limit int
	// DLQLimit bounds the DLQ messages read per priority per run (100).
	DLQLimit int
	Logger   *slog.Logger
}

func (o *Options) defaults() {
	if o.LowAfter <= 0 {
		o.LowAfter = 10 * time.Minute
	}
	if o.MediumAfter <= 0 {
		o.MediumAfter = 20 * time.Minute
	}
	if o.DirectWindow <= 0 {
		o.DirectWindow = queue.MaxDelay
	}
	if o.RecoverAfter <= 0 {
		o.RecoverAfter = 2 * time.Minute
	}
	if o.Limit <= 0 {
		o.Limit = 500
	}
	if o.DLQLimit <= 0 {
		o.DLQLimit = 100
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Promoter runs the sweeps.
type Promoter struct {
	store Store
	mover Mover
	dlqs  DLQs
	opt   Options
	log   *slog.Logger
}

// New returns a promoter.
func New(s Store, m Mover, d DLQs, opt Options) *Promoter {
	opt.defaults()
	return &Promoter{store: s, mover: m, dlqs: d, opt: opt, log: opt.Logger}
}

// Report counts what one run did.
type Report struct {
	Promoted   map[task.Priority]int `json:"promoted"` // by the priority promoted to
	Released   int                   `json:"released"`
	Reconciled int                   `json:"reconciled"`
	Recovered  int                   `json:"recovered"`
	// ConsumersStarted counts the extra consumer invocations of a fan-out.
	ConsumersStarted int `json:"consumers_started"`
	Errors           int `json:"errors"`
}

// RunOnce does one sweep. It keeps going past individual failures, counts
// them in the report and returns the first.
func (p *Promoter) RunOnce(ctx context.Context) (Report, error) {
	r := Report{Promoted: map[task.Priority]int{}}
	var errs []error
	note := func(err error) {
		if err != nil {
			r.Errors++
			errs = append(errs, err)
		}
	}
	for _, step := range []struct {
		from  task.Priority
		after time.Duration
	}{{task.Medium, p.opt.MediumAfter}, {task.Low, p.opt.LowAfter}} {
		n, err := p.age(ctx, step.from, step.after)
		to, _ := step.from.Next()
		r.Promoted[to] += n
		note(err)
	}
	n, err := p.release(ctx)
	r.Released += n
	note(err)
	n, err = p.reconcile(ctx)
	r.Reconciled += n
	note(err)
	n, err = p.recover(ctx)
	r.Recovered += n
	note(err)
	if r.Promoted[task.High]+r.Promoted[task.Medium]+r.Released+r.Reconciled+r.Recovered+r.Errors > 0 {
		p.log.Info("promoter run", "promoted_to_high", r.Promoted[task.High], "promoted_to_medium", r.Promoted[task.Medium],
			"released", r.Released, "reconciled", r.Reconciled, "recovered", r.Recovered, "errors", r.Errors)
	}
	return r, errors.Join(errs...)
}

// Run sweeps every interval until ctx ends.
func (p *Promoter) Run(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := p.RunOnce(ctx); err != nil && ctx.Err() == nil {
			p.log.Warn("promoter run had errors", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// each pages through the tasks q selects, at most Limit of them.
func (p *Promoter) each(ctx context.Context, q store.WaitingQuery, fn func([]*task.Task) error) error {
	seen := 0
	for seen < p.opt.Limit {
		q.Limit = int32(min(100, p.opt.Limit-seen))
		page, err := p.store.Waiting(ctx, q)
		if err != nil {
			return err
		}
		seen += len(page.Tasks)
		if len(page.Tasks) > 0 {
			if err := fn(page.Tasks); err != nil {
				return err
			}
		}
		if len(page.Next) == 0 {
			return nil
		}
		q.Start = page.Next
	}
	return nil
}

// age promotes queued tasks of priority from that waited longer than after.
func (p *Promoter) age(ctx context.Context, from task.Priority, after time.Duration) (int, error) {
	to, ok := from.Next()
	if !ok {
		return 0, nil
	}
	now := p.store.Now()
	moved := 0
	err := p.each(ctx, store.WaitingQuery{Status: task.Queued, Priority: from, Before: now.Add(-after)}, func(ts []*task.Task) error {
		var moves []enqueue.Move
		for _, t := range ts {
			// A task sent with a delay starts waiting at its run_at.
			if t.RunAt != nil && now.Sub(*t.RunAt) < after {
				continue
			}
			moves = append(moves, enqueue.Move{Task: t})
		}
		done, err := p.mover.RedispatchBatch(ctx, task.Queued, to, moves)
		moved += len(done)
		for _, t := range done {
			p.log.Info("task promoted", "task_id", t.ID, "type", t.Type, "from", from, "to", to,
				"waited_ms", now.Sub(t.EnqueuedAtOr(t.CreatedAt)).Milliseconds(), "trace_id", t.TraceID)
		}
		if err != nil && !errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("promote %s tasks: %w", from, err)
		}
		return nil
	})
	return moved, err
}

// release sends scheduled tasks and parked retries that come due within the
// direct-send window, and re-sends retries whose message went missing.
func (p *Promoter) release(ctx context.Context) (int, error) {
	now := p.store.Now()
	released := 0
	var firstErr error
	for _, st := range []task.Status{task.Scheduled, task.Retrying} {
		for _, prio := range task.Priorities() {
			err := p.each(ctx, store.WaitingQuery{Status: st, Priority: prio, Before: now.Add(p.opt.DirectWindow)}, func(ts []*task.Task) error {
				var moves []enqueue.Move
				for _, t := range ts {
					due := t.DueAt()
					lost := st == task.Retrying && t.DispatchVersion != task.NoMessage && now.Sub(due) > p.opt.RecoverAfter
					if st == task.Retrying && t.DispatchVersion != task.NoMessage && !lost {
						continue // its own message brings it back
					}
					moves = append(moves, enqueue.Move{Task: t, Delay: due.Sub(now)})
				}
				done, err := p.mover.RedispatchBatch(ctx, task.Queued, prio, moves)
				released += len(done)
				if err != nil && !errors.Is(err, store.ErrConflict) {
					return fmt.Errorf("release %s %s tasks: %w", st, prio, err)
				}
				return nil
			})
			if err != nil && firstErr == nil {
				firstErr = err
			}
		}
	}
	return released, firstErr
}

// recover re-queues tasks whose worker vanished and whose message is gone:
// still executing RecoverAfter past the end of their lease. The lost attempt
// stays counted; with no attempts left the task is dead-lettered.
func (p *Promoter) recover(ctx context.Context) (int, error) {
	now := p.store.Now()
	recovered := 0
	var firstErr error
	for _, prio := range task.Priorities() {
		err := p.each(ctx, store.WaitingQuery{Status: task.Executing, Priority: prio, Before: now}, func(ts []*task.Task) error {
			var moves []enqueue.Move
			for _, t := range ts {
				if t.LeaseUntil == nil || now.Sub(*t.LeaseUntil) < p.opt.RecoverAfter {
					continue
				}
				lost := task.Attempt{Attempt: t.Attempts, WorkerID: t.WorkerID, FinishedAt: now, Error: "lease expired and the message was lost: recovered by the promoter"}
				if t.StartedAt != nil {
					lost.StartedAt = *t.StartedAt
				}
				if t.Attempts >= t.MaxAttempts {
					if _, err := p.store.Transition(ctx, t, task.DeadLetter, func(n *task.Task) {
						n.Error = &task.Error{Message: "lease expired on the last attempt (worker lost)", Retriable: true}
						n.CompletedAt = &now
						n.WorkerID, n.LeaseUntil = "", nil
						n.AddAttempt(lost)
					}); err == nil {
						recovered++
					}
					continue
				}
				moves = append(moves, enqueue.Move{Task: t, Apply: func(n *task.Task) {
					n.WorkerID, n.LeaseUntil = "", nil
					n.AddAttempt(lost)
				}})
			}
			done, err := p.mover.RedispatchBatch(ctx, task.Queued, prio, moves)
			recovered += len(done)
			for _, t := range done {
				p.log.Warn("recovered task whose worker vanished", "task_id", t.ID, "attempts", t.Attempts)
			}
			if err != nil && !errors.Is(err, store.ErrConflict) {
				return fmt.Errorf("recover %s tasks: %w", prio, err)
			}
			return nil
		})
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return recovered, firstErr
}

// ReasonMaxReceives is the dead-letter reason of a message SQS redrove.
const ReasonMaxReceives = "max receives exceeded"

// reconcile looks at DLQ messages that SQS redrove there (they carry no
// triage reason): their task is marked dead_letter and the message is put
// back with the reason, readable for replay. Copies for tasks that moved
// on are deleted. Messages that already carry a reason are left visible.
func (p *Promoter) reconcile(ctx context.Context) (int, error) {
	n := 0
	var firstErr error
	type held struct {
		prio    task.Priority
		receipt string
	}
	var keep []held
	// Hand the already-reconciled messages back only once this run is done
	// reading, so it does not read them twice.
	defer func() {
		for _, h := range keep {
			_ = p.dlqs.ChangeVisibilityDLQ(context.WithoutCancel(ctx), h.prio, h.receipt, 0)
		}
	}()
	for _, prio := range task.Priorities() {
		for read := 0; read < p.opt.DLQLimit; {
			msgs, err := p.dlqs.ReceiveDLQ(ctx, prio, queue.MaxBatch, 0, 30*time.Second)
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				break
			}
			if len(msgs) == 0 {
				break
			}
			read += len(msgs)
			for _, m := range msgs {
				if m.Reason != "" {
					keep = append(keep, held{prio, m.ReceiptHandle})
					continue
				}
				ok, err := p.reconcileOne(ctx, prio, m)
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if ok {
					n++
				}
			}
		}
	}
	return n, firstErr
}

func (p *Promoter) reconcileOne(ctx context.Context, prio task.Priority, m queue.Received) (bool, error) {
	var msg task.Message
	if err := json.Unmarshal([]byte(m.Body), &msg); err != nil || msg.ID == "" {
		// A body the consumer could never parse: keep it, with the reason.
		return true, p.requeueWithReason(ctx, prio, m, m.Body, ReasonMaxReceives+"; body is not a triage message")
	}
	t, err := p.store.Get(ctx, msg.ID)
	if errors.Is(err, store.ErrNotFound) {
		return false, p.dlqs.DeleteDLQ(ctx, prio, m.ReceiptHandle)
	}
	if err != nil {
		return false, err
	}
	if t.Status.Terminal() || t.Status == task.Scheduled || msg.Version != t.DispatchVersion {
		// A stale copy: the task has moved on and has a live message of its own.
		return false, p.dlqs.DeleteDLQ(ctx, prio, m.ReceiptHandle)
	}
	now := p.store.Now()
	dead, err := p.store.Transition(ctx, t, task.DeadLetter, func(n *task.Task) {
		n.Error = &task.Error{Message: ReasonMaxReceives, Retriable: false}
		n.CompletedAt = &now
		n.WorkerID, n.LeaseUntil = "", nil
	})
	if err != nil {
		return false, fmt.Errorf("mark task %s dead_letter: %w", t.ID, err)
	}
	p.log.Warn("task dead-lettered: its message exceeded the queue's maxReceiveCount", "task_id", t.ID, "type", t.Type)
	return true, p.requeueWithReason(ctx, prio, m, enqueue.Body(dead, dead.Version), ReasonMaxReceives)
}

func (p *Promoter) requeueWithReason(ctx context.Context, prio task.Priority, m queue.Received, body, reason string) error {
	if err := p.dlqs.SendDLQ(ctx, prio, body, reason); err != nil {
		return err
	}
	return p.dlqs.DeleteDLQ(ctx, prio, m.ReceiptHandle)
}
