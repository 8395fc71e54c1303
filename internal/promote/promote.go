// Package promote is the promoter: a periodic sweep that keeps every task
// moving.
//
// Each run it (1) ages tasks: a low task queued for LowAfter moves to
// medium, a medium task at medium for MediumAfter moves to high; (2)
// releases scheduled tasks and parked retries that come due within the
// direct-send window, with DelaySeconds so they start on time, and re-sends
// retries whose message went missing; and (3) reconciles the DLQs, marking
// tasks whose message SQS redrove there.
//
// Aging finds waiting tasks two ways, so that a task's ordinary life writes
// nothing for it (see store's index layout). A task still waiting where it
// was created is found by a sweep of the by-created index: per shard and
// priority, a persisted mark moves over tasks as they pass their
// threshold, each read once. A task whose wait began later (promoted,
// re-queued, released, or delayed by run_at) has a by-due entry of its own.
//
// The starvation bound follows from (1): a task submitted at t0 reaches
// the high queue by t0 + LowAfter + MediumAfter + 2 × interval, because
// each step waits at most one interval after its threshold passes.
//
// There is no sweep of executing tasks: an executing task's message stays
// on its queue until the task finishes, hidden by the worker's heartbeat,
// so when a worker dies its message reappears after the lease and the next
// receive reclaims the task. A message that stops coming back is redriven
// to the DLQ, which (3) reconciles.
package promote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/triagehq/triage/internal/cleanup"
	"github.com/triagehq/triage/internal/enqueue"
	"github.com/triagehq/triage/internal/flow"
	"github.com/triagehq/triage/internal/metrics"
	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/internal/schedule"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/internal/tracing"
	"github.com/triagehq/triage/triageconfig"
	"github.com/triagehq/triage/triagetype"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Store is the part of the task store the promoter uses.
type Store interface {
	Get(ctx context.Context, id string) (*task.Task, error)
	Due(ctx context.Context, c store.DueClass, shard int, before time.Time, after string, limit int32) ([]*task.Task, string, error)
	Created(ctx context.Context, p triagetype.Priority, shard int, after string, before time.Time, limit int32) ([]*task.Task, string, error)
	SweepMarks(ctx context.Context) (map[string]string, error)
	SetSweepMark(ctx context.Context, key, mark string) error
	AnyCreated(ctx context.Context, shard int, after string, before time.Time) (bool, error)
	Shards() int
	Transition(ctx context.Context, cur *task.Task, to triagetype.Status, apply func(*task.Task)) (*task.Task, error)
	Touch(ctx context.Context, cur *task.Task, apply func(*task.Task)) (*task.Task, error)
	Now() time.Time
}

// Mover re-dispatches tasks to a queue.
type Mover interface {
	RedispatchBatch(ctx context.Context, to triagetype.Status, p triagetype.Priority, moves []enqueue.Move) ([]*task.Task, error)
}

// DLQs is the part of the queues DLQ reconciliation uses.
type DLQs interface {
	ReceiveDLQ(ctx context.Context, p triagetype.Priority, n int, wait, visibility time.Duration) ([]queue.Received, error)
	DeleteDLQ(ctx context.Context, p triagetype.Priority, receipt string) error
	SendDLQ(ctx context.Context, p triagetype.Priority, body, reason string) error
	Send(ctx context.Context, p triagetype.Priority, body string, delay time.Duration) (string, error)
	ChangeVisibilityBatchDLQ(ctx context.Context, p triagetype.Priority, receipts []string, d time.Duration) error
}

// Options tunes the promoter. Zero values take the defaults in parentheses.
type Options struct {
	LowAfter    time.Duration // low -> medium after this long queued (triageconfig.DefaultLowAfter)
	MediumAfter time.Duration // medium -> high after this long at medium (triageconfig.DefaultMediumAfter)
	// DirectWindow: scheduled tasks and parked retries due within it are
	// sent with a delay (15 min, SQS's longest delay).
	DirectWindow time.Duration
	// RecoverAfter: a retrying task this long past its retry time has lost
	// its message, and gets a new one (2 min).
	RecoverAfter time.Duration
	// Limit bounds the tasks each step reads per shard per run (500).
	Limit int
	// DLQLimit bounds the DLQ messages read per priority per run (100).
	DLQLimit int
	// RescueWithin is how long after a consumer dead-lettered a message
	// because its task's record was missing or behind (queue.ReasonNoTask,
	// queue.ReasonAhead) the reconciliation still looks the task up, and
	// re-sends the message if the task now waits for it (15 min). A
	// record lands within its submit's request or never, so this is far
	// longer than needed; it bounds the reads such messages cost.
	RescueWithin time.Duration
	Logger       *slog.Logger
	// Tracing records each promotion as a span in its task's trace
	// (tracing.Global()).
	Tracing *tracing.Provider
	// Metrics, if set, counts promotions, recoveries and the tasks DLQ
	// reconciliation dead-letters (nil: nothing is recorded).
	Metrics Metrics
	// Schedules, if set, enqueues the due ticks of the periodic tasks
	// each run (*schedule.Ticker; nil: none).
	Schedules Ticker
	// Flow, if set, is swept each run: waiting tasks whose parents
	// finished while a crash kept their walk from releasing them.
	Flow Sweeper
	// Cleanup, if set, works on the running cleanup job (*cleanup.Runner):
	// in RunOnce after the sweeps, for at most CleanupBudget and ending
	// 10 s before ctx's deadline (a Lambda invocation's); under Run, in a
	// loop of its own beside the sweeps, so it never delays an aging.
	Cleanup CleanupRunner
	// CleanupBudget bounds the time RunOnce gives a cleanup (45 s, so a
	// cleanup fits a minute's tick with the sweeps).
	CleanupBudget time.Duration
	// Held, if set, releases set-aside tasks whose scope can run, each run:
	// the safety net behind the releases a resume or a freed slot makes
	// (hold.Sweeper).
	Held HeldSweeper
	// Counts, if set, lets a run skip the sweeps that have nothing to do:
	// the counters (*counters.Keeper, kept from the table's stream) are
	// read first, and a sweep runs only when they count tasks in its
	// statuses (see pending). Set it only where the counters are kept.
	Counts Counts
}

// Counts counts retained tasks by status and effective priority
// (*counters.Keeper: one read of half a unit).
type Counts interface {
	Tasks(ctx context.Context) (map[triagetype.Status]map[triagetype.Priority]int64, error)
}

// FullSweepEvery is the longest a promoter with Counts goes without a run
// that sweeps everything whatever the counters say: the bound on what
// counters that lag or fail (their function down) can delay, and on how
// far a skipped aging sweep's mark falls behind the index.
const FullSweepEvery = 10 * time.Minute

// CleanupRunner works on the running cleanup job for up to budget
// (*cleanup.Runner).
type CleanupRunner interface {
	Run(ctx context.Context, budget time.Duration) (cleanup.Report, error)
}

// cleanupMargin is the time RunOnce leaves before its context's deadline
// when it works on a cleanup: a page and its save take well under it.
const cleanupMargin = 10 * time.Second

// Ticker enqueues the due ticks of the schedules (*schedule.Ticker).
type Ticker interface {
	Tick(ctx context.Context) (schedule.Report, error)
}

// FlowSweepEvery is the least time between two flow sweeps: the sweep
// leaves tasks younger than its grace (30 s) to their walks anyway, and
// this keeps it out of most runs' time.
const FlowSweepEvery = 30 * time.Second

// Sweeper repairs dependencies a crash left unresolved (*flow.Flow).
type Sweeper interface {
	Sweep(ctx context.Context) (flow.SweepReport, error)
}

// HeldSweeper releases set-aside tasks (hold.Sweeper).
type HeldSweeper interface {
	Sweep(ctx context.Context) (int, error)
}

// Metrics is what the promoter reports (*metrics.Recorder); it must make
// no request of AWS.
type Metrics interface {
	Promoted(from, to triagetype.Priority, n int)
	Recovered(how metrics.Recovery)
	Failed(t *task.Task, why metrics.Failure)
	Finished(t *task.Task, o metrics.Outcome)
}

func (o *Options) defaults() {
	if o.LowAfter <= 0 {
		o.LowAfter = triageconfig.DefaultLowAfter
	}
	if o.MediumAfter <= 0 {
		o.MediumAfter = triageconfig.DefaultMediumAfter
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
	if o.CleanupBudget <= 0 {
		o.CleanupBudget = 45 * time.Second
	}
	if o.RescueWithin <= 0 {
		o.RescueWithin = 15 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Tracing == nil {
		o.Tracing = tracing.Global()
	}
	if o.Metrics == nil {
		o.Metrics = (*metrics.Recorder)(nil) // records nothing
	}
}

// Promoter runs the sweeps.
type Promoter struct {
	swept time.Time // the last flow sweep (RunOnce runs one at a time)
	full  time.Time // the last run that swept everything (with Counts)
	// cleanupApart: Run works on cleanups in a loop of its own, so its
	// RunOnce calls leave them alone.
	cleanupApart bool
	store        Store
	mover        Mover
	dlqs         DLQs
	opt          Options
	log          *slog.Logger
	tracer       trace.Tracer
}

// New returns a promoter.
func New(s Store, m Mover, d DLQs, opt Options) *Promoter {
	opt.defaults()
	return &Promoter{store: s, mover: m, dlqs: d, opt: opt, log: opt.Logger, tracer: opt.Tracing.Tracer()}
}

// Report counts what one run did.
type Report struct {
	Promoted   map[triagetype.Priority]int `json:"promoted"` // by the priority promoted to
	Released   int                         `json:"released"`
	Reconciled int                         `json:"reconciled"`
	// Rescued counts tasks whose message a consumer had given up as an
	// orphan before their record landed, sent again.
	Rescued int `json:"rescued"`
	// Tracked counts delayed tasks the sweep found not yet due and gave a
	// by-due entry of their own.
	Tracked int `json:"tracked"`
	// ConsumersStarted counts the extra consumer invocations of a fan-out.
	ConsumersStarted int `json:"consumers_started"`
	Errors           int `json:"errors"`
	// Ticked counts the tasks schedules' ticks made.
	Ticked int `json:"ticked"`
	// Cleaned counts the tasks a cleanup job deleted in this run.
	Cleaned int `json:"cleaned"`
}

// RunOnce does one sweep. It keeps going past individual failures, counts
// them in the report and returns the first.
func (p *Promoter) RunOnce(ctx context.Context) (Report, error) {
	r := Report{Promoted: map[triagetype.Priority]int{}}
	var errs []error
	note := func(err error) {
		if err != nil {
			r.Errors++
			errs = append(errs, err)
		}
	}
	has := p.pending(ctx)
	for _, step := range []struct {
		from  triagetype.Priority
		after time.Duration
	}{{triagetype.Medium, p.opt.MediumAfter}, {triagetype.Low, p.opt.LowAfter}} {
		if has(triagetype.Queued, step.from) {
			note(p.age(ctx, step.from, step.after, &r))
		}
	}
	var statuses []triagetype.Status
	for _, st := range []triagetype.Status{triagetype.Scheduled, triagetype.Retrying} {
		if has(st, "") {
			statuses = append(statuses, st)
		}
	}
	n, err := p.release(ctx, statuses)
	r.Released += n
	note(err)
	n, rescued, err := p.reconcile(ctx)
	r.Reconciled += n
	r.Rescued += rescued
	note(err)
	if p.opt.Schedules != nil {
		tr, err := p.opt.Schedules.Tick(ctx)
		r.Ticked = tr.Enqueued
		note(err)
	}
	// Released children wait for their claim, queued, in the waiting
	// partitions the flow sweep reads: it ages them too.
	if now := p.store.Now(); p.opt.Flow != nil && now.Sub(p.swept) >= FlowSweepEvery &&
		(has(triagetype.Waiting, "") || has(triagetype.Queued, triagetype.Low) || has(triagetype.Queued, triagetype.Medium)) {
		p.swept = now
		sr, err := p.opt.Flow.Sweep(ctx)
		r.Released += sr.Released
		note(err)
		note(p.ageParked(ctx, sr.Parked, &r))
	}
	if p.opt.Held != nil && has(triagetype.Queued, "") {
		n, err = p.opt.Held.Sweep(ctx)
		r.Released += n
		note(err)
	}
	if p.opt.Cleanup != nil && !p.cleanupApart {
		budget := p.opt.CleanupBudget
		if d, ok := ctx.Deadline(); ok {
			budget = min(budget, time.Until(d)-cleanupMargin)
		}
		if budget > 0 {
			cr, err := p.opt.Cleanup.Run(ctx, budget)
			r.Cleaned = cr.Deleted
			note(err)
		}
	}
	if r.Promoted[triagetype.High]+r.Promoted[triagetype.Medium]+r.Released+r.Reconciled+r.Rescued+r.Tracked+r.Cleaned+r.Errors > 0 {
		p.log.Info("promoter run", "promoted_to_high", r.Promoted[triagetype.High], "promoted_to_medium", r.Promoted[triagetype.Medium],
			"released", r.Released, "reconciled", r.Reconciled, "rescued", r.Rescued, "tracked", r.Tracked, "cleaned", r.Cleaned, "errors", r.Errors)
	}
	return r, errors.Join(errs...)
}

// pending says which sweeps a run makes: has(st, p) reports whether the
// counters count a task in status st at effective priority p (any
// priority when p is ""), and is true for everything without Counts,
// when they cannot be read, and on a run FullSweepEvery after the last
// full one. So an idle deployment's run costs one read, not a query per
// shard and class.
//
// Skipping loses nothing while the counters are current: a task is
// counted within seconds of its write (the stream's delay), well before
// any sweep has anything to do for it (an aging threshold, a due time in
// the direct-send window, a flow sweep's 30 s grace). When they lag or
// fail, the full runs bound the delay by FullSweepEvery. A skipped aging
// sweep leaves its marks where they were; the next sweep pages over the
// entries created since (at most Limit a shard per run, as always).
func (p *Promoter) pending(ctx context.Context) func(triagetype.Status, triagetype.Priority) bool {
	all := func(triagetype.Status, triagetype.Priority) bool { return true }
	if p.opt.Counts == nil {
		return all
	}
	if now := p.store.Now(); now.Sub(p.full) >= FullSweepEvery {
		p.full = now
		return all
	}
	counts, err := p.opt.Counts.Tasks(ctx)
	if err != nil {
		p.log.Warn("task counters not read; sweeping everything", "error", err)
		return all
	}
	return func(st triagetype.Status, pr triagetype.Priority) bool {
		for q, n := range counts[st] {
			if n > 0 && (pr == "" || q == pr) {
				return true
			}
		}
		return false
	}
}

// Run sweeps every interval until ctx ends, and works on cleanup jobs
// beside the sweeps (looking for one every interval while none runs).
func (p *Promoter) Run(ctx context.Context, interval time.Duration) error {
	if p.opt.Cleanup != nil {
		p.cleanupApart = true
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); p.cleanLoop(ctx, interval) }()
		defer wg.Wait()
	}
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

// cleanLoop works on cleanup jobs until ctx ends: without a pause while
// one makes progress, and looking again every interval otherwise.
func (p *Promoter) cleanLoop(ctx context.Context, interval time.Duration) {
	for ctx.Err() == nil {
		rep, err := p.opt.Cleanup.Run(ctx, p.opt.CleanupBudget)
		if err != nil && ctx.Err() == nil {
			p.log.Warn("cleanup run failed", "cleanup", rep.Job, "error", err)
		}
		if err == nil && rep.Pages > 0 && !rep.Done {
			continue // more to do, and this runner holds the job
		}
		select {
		case <-ctx.Done():
		case <-time.After(interval):
		}
	}
}

// pages calls read with the resume key of the previous page ("" first)
// until it returns none or Limit tasks were read, and hands each page to fn.
// It returns the resume key after the last page ("" when read to the end).
func (p *Promoter) pages(read func(after string) ([]*task.Task, string, error), fn func([]*task.Task) error) (string, error) {
	after := ""
	for seen := 0; seen < p.opt.Limit; {
		ts, next, err := read(after)
		if err != nil {
			return after, err
		}
		seen += len(ts)
		if len(ts) > 0 {
			if err := fn(ts); err != nil {
				return after, err
			}
		}
		if after = next; after == "" {
			return "", nil
		}
	}
	return after, nil
}

func (p *Promoter) pageSize() int32 { return int32(min(100, p.opt.Limit)) }

// age promotes queued tasks of priority from that waited longer than after:
// tracked ones through by-due, the rest by sweeping by-created up to
// now - after from each shard's mark.
func (p *Promoter) age(ctx context.Context, from triagetype.Priority, after time.Duration, r *Report) error {
	if _, ok := from.Next(); !ok {
		return nil
	}
	class, _ := store.DueQueued(from)
	now := p.store.Now()
	cut := now.Add(-after)
	marks, err := p.store.SweepMarks(ctx)
	if err != nil {
		return err
	}
	var mu sync.Mutex // guards r and errs: shards run at once
	var errs []error
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	promote := func(ts []*task.Task) error {
		return p.promote(ctx, from, after, now, ts, r, &mu)
	}
	p.eachShard(func(sh int) {
		_, err := p.pages(func(a string) ([]*task.Task, string, error) {
			return p.store.Due(ctx, class, sh, cut, a, p.pageSize())
		}, promote)
		if err != nil {
			fail(err)
		}
		key := sweepKey(from, sh)
		seen := false // a task of from came back: the sweep moved past an entry
		resume, err := p.pages(func(a string) ([]*task.Task, string, error) {
			if a == "" {
				a = marks[key]
			}
			return p.store.Created(ctx, from, sh, a, cut, p.pageSize())
		}, func(ts []*task.Task) error { seen = true; return promote(ts) })
		if err != nil {
			fail(err)
			return
		}
		mark := resume
		if mark == "" {
			mark = store.SortableTime(cut) // every task created before cut is handled
		}
		if mark != marks[key] && resume == "" && !seen {
			// Only time moved the mark. When no entry lies behind it (an
			// idle deployment) the mark stays: the next sweep reads the
			// same empty window, and nothing is written. Entries of other
			// priorities alone do move it, so no sweep re-reads them.
			moved, err := p.store.AnyCreated(ctx, sh, marks[key], cut)
			if err != nil {
				fail(err)
				return
			}
			if !moved {
				mark = marks[key]
			}
		}
		if mark != marks[key] {
			if err := p.store.SetSweepMark(ctx, key, mark); err != nil {
				fail(err)
			}
		}
	})
	return errors.Join(errs...)
}

// promote promotes those of ts that are queued at priority from, not set
// aside, and waited at least after by now, to the next priority (r and
// its mutex count them); those not due yet get a by-due entry of their
// own when they have none (a delay began their wait after creation).
func (p *Promoter) promote(ctx context.Context, from triagetype.Priority, after time.Duration, now time.Time, ts []*task.Task, r *Report, mu *sync.Mutex) error {
	to, ok := from.Next()
	if !ok {
		return nil
	}
	var moves []enqueue.Move
	for _, t := range ts {
		if t.Status != triagetype.Queued || t.EffectivePriority != from || t.Held != "" {
			continue // moved on since it was indexed, or set aside (it waits for its scope, not a slot)
		}
		if now.Sub(t.AgingFrom()) < after {
			// Its wait began after its creation (a delay): give it an
			// entry of its own, read when it comes due.
			if !t.Tracked {
				if _, err := p.store.Touch(ctx, t, func(n *task.Task) { n.Tracked = true }); err == nil {
					mu.Lock()
					r.Tracked++
					mu.Unlock()
				}
			}
			continue
		}
		waited := now.Sub(t.AgingFrom())
		// The step is kept on the task in the update that promotes it.
		moves = append(moves, enqueue.Move{Task: t, Apply: func(n *task.Task) { n.AddPromotion(from, to, now, waited) }})
	}
	done, err := p.mover.RedispatchBatch(ctx, triagetype.Queued, to, moves)
	mu.Lock()
	r.Promoted[to] += len(done)
	mu.Unlock()
	p.opt.Metrics.Promoted(from, to, len(done))
	for _, t := range done {
		waited := now.Sub(t.EnqueuedAtOr(t.CreatedAt))
		p.log.Info("task promoted", "task_id", t.ID, "type", t.Type, "from", from, "to", to,
			"waited_ms", waited.Milliseconds(), "trace_id", t.TraceID)
		p.traceEvent(ctx, t, from, to, waited)
	}
	if err != nil && !errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("promote %s tasks: %w", from, err)
	}
	return nil
}

// ageParked promotes the released children the flow sweep read still
// parked in their edge parent's waiting partition (store.Parked): their
// release wrote no aging entry, so the flow sweep is what finds them, and
// a low or medium child is promoted at its threshold plus at most one
// pass of the flow sweep over the waiting partitions.
func (p *Promoter) ageParked(ctx context.Context, parked []*task.Task, r *Report) error {
	var mu sync.Mutex
	now := p.store.Now()
	var errs []error
	for from, after := range map[triagetype.Priority]time.Duration{triagetype.Low: p.opt.LowAfter, triagetype.Medium: p.opt.MediumAfter} {
		var ts []*task.Task
		for _, t := range parked {
			// Only those due: promote would give a younger one a tracked
			// mark (a write) that a parked task has no use for.
			if t.EffectivePriority == from && now.Sub(t.AgingFrom()) >= after {
				ts = append(ts, t)
			}
		}
		if len(ts) > 0 {
			errs = append(errs, p.promote(ctx, from, after, now, ts, r, &mu))
		}
	}
	return errors.Join(errs...)
}

// eachShard runs fn for every shard at once: a run's reads are one query
// per shard and step, and done one after another they would make a run's
// length grow with the shard count.
func (p *Promoter) eachShard(fn func(shard int)) {
	var wg sync.WaitGroup
	for sh := range p.store.Shards() {
		wg.Add(1)
		go func() { defer wg.Done(); fn(sh) }()
	}
	wg.Wait()
}

// sweepKey names the sweep mark of one priority and shard.
func sweepKey(p triagetype.Priority, shard int) string { return string(p) + "#" + strconv.Itoa(shard) }

// release sends the tasks of statuses (scheduled, retrying) that come due
// within the direct-send window, and re-sends retries whose message went
// missing.
func (p *Promoter) release(ctx context.Context, statuses []triagetype.Status) (int, error) {
	now := p.store.Now()
	var mu sync.Mutex // guards released and errs: shards run at once
	released := 0
	var errs []error
	for _, st := range statuses {
		class, _ := store.DueStatus(st)
		p.eachShard(func(sh int) {
			_, err := p.pages(func(a string) ([]*task.Task, string, error) {
				return p.store.Due(ctx, class, sh, now.Add(p.opt.DirectWindow), a, p.pageSize())
			}, func(ts []*task.Task) error {
				byPrio := map[triagetype.Priority][]enqueue.Move{}
				lostIDs := map[string]bool{}
				for _, t := range ts {
					if t.Status != st {
						continue
					}
					due := t.DueAt()
					lost := st == triagetype.Retrying && t.DispatchVersion != task.NoMessage && now.Sub(due) > p.opt.RecoverAfter
					if st == triagetype.Retrying && t.DispatchVersion != task.NoMessage && !lost {
						continue // its own message brings it back
					}
					if lost {
						lostIDs[t.ID] = true
					}
					byPrio[t.EffectivePriority] = append(byPrio[t.EffectivePriority], enqueue.Move{Task: t, Delay: due.Sub(now)})
				}
				for prio, moves := range byPrio {
					done, err := p.mover.RedispatchBatch(ctx, triagetype.Queued, prio, moves)
					mu.Lock()
					released += len(done)
					mu.Unlock()
					for _, t := range done {
						if lostIDs[t.ID] {
							p.opt.Metrics.Recovered(metrics.RecoveredMessage)
						}
					}
					if err != nil && !errors.Is(err, store.ErrConflict) {
						return fmt.Errorf("release %s %s tasks: %w", st, prio, err)
					}
				}
				return nil
			})
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	return released, errors.Join(errs...)
}

// ReasonMaxReceives is the dead-letter reason of a message SQS redrove.
const ReasonMaxReceives = "max receives exceeded"

// reconcile looks at DLQ messages that SQS redrove there (they carry no
// triage reason): their task is marked dead_letter and the message is put
// back with the reason, readable for replay. Copies for tasks that moved
// on are deleted. Messages that already carry a reason are left alone.
//
// It hides what it reads as briefly as SQS allows, because every other
// reader of a DLQ (a replay, a purge, a retry's search for its copy, all in
// package deadletter) can act only on what it sees: each receive's
// messages that carry a reason are handed back at once, in one
// ChangeMessageVisibilityBatch, before the receive's redriven messages are
// worked on (those stay hidden until replaced or deleted; a replay skips
// them anyway). A message is thus out of sight for the time of one request
// after its receive, not for the run. Since what it hands back can come
// back to it, it tells messages apart by id and ends a priority at the
// first receive that brings none it has not seen (or an empty one, or
// DLQLimit messages read).
//
// Cost per run, for a priority whose DLQ holds n messages, all with a
// reason: ⌈n/10⌉ + 1 receives and as many ChangeMessageVisibilityBatch
// requests (one receive and none when empty); from n = 100 on, DLQLimit
// stops it at 10 + 10. Plus, per redriven message, a GetItem, an
// UpdateItem, a SendMessage and a DeleteMessage. Holding every message
// until the run ended, as it did before, took the same receives and n
// single ChangeMessageVisibility requests: n = 5 cost 7 requests (now 4),
// n = 50 cost 56 (now 12), n >= 100 cost 110 (now 20); and every replay or
// purge paid 2 s of rescans for what it might have hidden. With fauxqs, which
// puts a handed-back message at the end of the line, a run reads each
// message once; SQS's receives sample its servers, so a run may meet some
// messages twice and miss others, which a later run meets.
func (p *Promoter) reconcile(ctx context.Context) (int, int, error) {
	n, rescued := 0, 0
	var firstErr error
	fail := func(err error) {
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	for _, prio := range triagetype.Priorities() {
		seen := map[string]bool{}
		for read := 0; read < p.opt.DLQLimit; {
			msgs, err := p.dlqs.ReceiveDLQ(ctx, prio, queue.MaxBatch, 0, 30*time.Second)
			if err != nil {
				fail(err)
				break
			}
			if len(msgs) == 0 {
				break
			}
			read += len(msgs)
			fresh := 0
			var back []string
			var redriven []queue.Received
			for _, m := range msgs {
				if !seen[m.MessageID] {
					seen[m.MessageID] = true
					fresh++
				}
				switch {
				case p.rescuable(m):
					ok, err := p.rescue(ctx, prio, m)
					fail(err)
					if ok {
						rescued++
					} else {
						back = append(back, m.ReceiptHandle)
					}
				case m.Reason != "":
					back = append(back, m.ReceiptHandle)
				default:
					redriven = append(redriven, m)
				}
			}
			if len(back) > 0 {
				if err := p.dlqs.ChangeVisibilityBatchDLQ(context.WithoutCancel(ctx), prio, back, 0); err != nil {
					// They come back by themselves after the receive's 30 s.
					p.log.Warn("could not hand back DLQ messages the reconciliation read", "priority", prio, "messages", len(back), "error", err)
					fail(err)
				}
			}
			for _, m := range redriven {
				ok, err := p.reconcileOne(ctx, prio, m)
				fail(err)
				if ok {
					n++
				}
			}
			if fresh == 0 {
				break // only messages it handed back itself: it has been round
			}
		}
	}
	return n, rescued, firstErr
}

// rescuable reports whether m is a message a consumer dead-lettered
// because its task's record was missing or behind, recently enough
// (RescueWithin) that the record may have landed since.
func (p *Promoter) rescuable(m queue.Received) bool {
	if !strings.HasPrefix(m.Reason, queue.ReasonNoTask) && !strings.HasPrefix(m.Reason, queue.ReasonAhead) {
		return false
	}
	return !m.SentAt.IsZero() && p.store.Now().Sub(m.SentAt) < p.opt.RescueWithin
}

// rescue sends m back to its queue and removes it from the DLQ when its
// task now waits for exactly this message (claimable, at the message's
// version): the task was accepted, and without its message it would stay
// queued forever. It reports false, leaving m alone, otherwise: the
// record is still missing (a genuine orphan stays dead-lettered with its
// reason) or the task has moved on. A duplicate of a live message is
// harmless: a claim is conditional on the version, so one copy runs it.
func (p *Promoter) rescue(ctx context.Context, prio triagetype.Priority, m queue.Received) (bool, error) {
	var msg task.Message
	if err := json.Unmarshal([]byte(m.Body), &msg); err != nil || msg.ID == "" {
		return false, nil
	}
	t, err := p.store.Get(ctx, msg.ID)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("look up task %s of a dead-lettered orphan: %w", msg.ID, err)
	}
	if !t.Status.Claimable() || t.DispatchVersion != msg.Version {
		return false, nil
	}
	if _, err := p.dlqs.Send(ctx, prio, m.Body, 0); err != nil {
		return false, fmt.Errorf("re-send task %s: %w", t.ID, err)
	}
	p.opt.Metrics.Recovered(metrics.RecoveredOrphan)
	p.log.Warn("task re-sent: a consumer had dead-lettered its message before its record landed", "task_id", t.ID, "priority", prio, "reason", m.Reason)
	return true, p.dlqs.DeleteDLQ(ctx, prio, m.ReceiptHandle)
}

// reconcileOne settles a message SQS redrove to prio's DLQ (it has no
// reason of triage's): a stale copy is deleted; the current message of an
// executing task with attempts left goes back to its queue (its worker was
// lost; attempts bound a task that kills its workers); any other task
// whose current message it is is dead-lettered with ReasonMaxReceives,
// and the message is kept with that reason.
func (p *Promoter) reconcileOne(ctx context.Context, prio triagetype.Priority, m queue.Received) (bool, error) {
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
	if t.Status.Terminal() || t.Status == triagetype.Scheduled || msg.Version != t.DispatchVersion {
		// A stale copy: the task has moved on and has a live message of its own.
		return false, p.dlqs.DeleteDLQ(ctx, prio, m.ReceiptHandle)
	}
	now := p.store.Now()
	if t.Status == triagetype.Executing && t.Attempts < t.MaxAttempts {
		// Its worker claimed it on the message's last receive and was lost
		// (the receives before were consumers killed holding it, or ones
		// with no free slot): its attempts, counted at each claim, bound
		// it, not SQS's receives. It goes back to its queue once its lease
		// has passed, as a reclaim would have taken it.
		if t.LeaseUntil != nil && now.Before(*t.LeaseUntil) {
			return false, nil // its worker may still be running it: look again next run
		}
		moved, err := p.mover.RedispatchBatch(ctx, triagetype.Queued, t.EffectivePriority, []enqueue.Move{{Task: t, Apply: func(n *task.Task) {
			n.WorkerID, n.LeaseUntil = "", nil
		}}})
		if err != nil && !errors.Is(err, store.ErrConflict) {
			return false, fmt.Errorf("re-send task %s whose message SQS redrove: %w", t.ID, err)
		}
		if len(moved) == 0 {
			return false, nil // it changed meanwhile; the next run looks again
		}
		p.opt.Metrics.Recovered(metrics.RecoveredMessage)
		p.log.Warn("task re-sent: SQS redrove its message after its worker was lost, with attempts left", "task_id", t.ID, "attempts", t.Attempts, "max_attempts", t.MaxAttempts)
		return true, p.dlqs.DeleteDLQ(ctx, prio, m.ReceiptHandle)
	}
	dead, err := p.store.Transition(ctx, t, triagetype.DeadLetter, func(n *task.Task) {
		n.Error = &triagetype.TaskError{Message: ReasonMaxReceives, Retriable: false}
		n.CompletedAt = &now
		n.WorkerID, n.LeaseUntil = "", nil
		n.WaitingOn = nil // a released child's (flow's release message) is resolved
	})
	if err != nil {
		return false, fmt.Errorf("mark task %s dead_letter: %w", t.ID, err)
	}
	p.opt.Metrics.Failed(dead, metrics.FailMaxReceives)
	p.opt.Metrics.Finished(dead, metrics.DeadLettered)
	p.log.Warn("task dead-lettered: its message exceeded the queue's maxReceiveCount", "task_id", t.ID, "type", t.Type)
	return true, p.requeueWithReason(ctx, prio, m, enqueue.Body(dead, dead.Version), ReasonMaxReceives)
}

func (p *Promoter) requeueWithReason(ctx context.Context, prio triagetype.Priority, m queue.Received, body, reason string) error {
	if err := p.dlqs.SendDLQ(ctx, prio, body, reason); err != nil {
		return err
	}
	return p.dlqs.DeleteDLQ(ctx, prio, m.ReceiptHandle)
}

// traceEvent records a promotion as a span in t's trace: a child of its
// submit span, named tracing.SpanPromote, with the priorities and the wait.
func (p *Promoter) traceEvent(ctx context.Context, t *task.Task, from, to triagetype.Priority, waited time.Duration) {
	if t.Traceparent == "" {
		return
	}
	_, span := p.tracer.Start(tracing.WithParent(ctx, t.Traceparent), tracing.SpanPromote, trace.WithAttributes(
		tracing.AttrTaskID.String(t.ID), tracing.AttrTaskType.String(t.Type),
		attribute.String("triage.promote.from", string(from)), attribute.String("triage.promote.to", string(to)),
		attribute.Int64("triage.promote.waited_ms", waited.Milliseconds())))
	span.End()
}
