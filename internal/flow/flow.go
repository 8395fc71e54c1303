// Package flow runs tasks that wait for other tasks: dependencies (a task's
// after list), workflows (named nodes submitted in one call) and batches
// with a completion callback.
//
// # Dependencies
//
// A task that names parents is recorded waiting, with no message, and its
// waiting_on set holding the parents not finished yet. Its first
// unfinished parent is its edge parent (task.Task.EdgeParent): the child's
// own by-due entry is filed under that parent (store.EdgeKey), so the
// parent finds it with no item of its own. Each further parent gets an
// edge item (store.PutEdges), written before the child is recorded. Every
// unfinished parent is marked has_children. When a parent reaches a
// terminal status the store calls Finished in the writer's goroutine (the
// consumer's outcome path, a cancel, the promoter's DLQ reconciliation),
// which walks the parent's children (store.EdgeChildren, then
// store.Children) and resolves each:
//
//   - the parent completed, or the child's policy is run: one conditional
//     DELETE takes the parent out of the child's waiting_on
//     (store.ResolveParent), idempotent per edge because it is conditional
//     on the set holding it; the write that empties the set releases the
//     child through the same re-dispatch path as scheduled tasks
//     (enqueue.RedispatchBatch: send, then a conditional write).
//   - the parent was dead-lettered or cancelled and the child's policy is
//     cancel or dead_letter: the child moves there (a conditional write on
//     its version), with the parent's id and reason; the store calls
//     Finished for it in turn, so the policy reaches every descendant.
//
// The invariant: a waiting child is released once, when the last of its
// parents finished, and never while one is unfinished. Races are closed
// two ways. A child recorded after its parent finished finds that out
// itself: after its record is written it reads its parents (strongly
// consistent) and resolves the finished ones (Settle). A parent that
// finished after the child's check read it walks a child recorded before
// that read. And a crash between a parent's terminal write and its walk
// (or an entry the eventually consistent index did not show yet) is
// repaired by Sweep, which the promoter runs: it reads the waiting
// partitions a shard and a page at a time, from a resume mark that wraps
// around, and resolves every finished parent in the waiting_on sets of
// the tasks older than its grace.
//
// A child whose last parent completed is released by its message alone
// (announce): the walk sends it naming that parent (task.Message.ReleasedBy)
// and writes nothing; the child is waiting until the claim moves it from
// waiting to executing, having checked the parent completed and is all the
// child waits on (internal/dispatch, released.go). A message that is lost
// (a crash before the send) or not claimed within ReleaseGrace of the
// parent's finish (a backlog, a pause that put it off) is made up for by
// the sweep, which then releases the child with a write as below.
//
// A child released by a write (the sweep, a child of several parents
// resolved one by one, a parent's failure with the run policy) keeps its
// entry until its claim (store.Parked): the release changes no index key,
// and the claim removes the entry. It gets no aging entry either: Sweep
// returns the released children it reads (SweepReport.Parked) and the
// promoter promotes those past their aging threshold, so a released low or
// medium child is promoted at most one sweep pass after its threshold
// (after ReleaseGrace more when its release message was not claimed).
//
// Write units of a child of one parent, beyond a plain task's 5: none
// when the parent had completed at its submit (Link queues it as a plain
// task). With the parent pending: 1 to mark the parent (none when it is
// marked already: a fan-out's further children, a workflow's nodes), 1
// for the child's entry and 1 for the entry's removal at the claim; the
// release is its message: +3, +2 with the parent marked, at any priority
// (+1 when the sweep releases it with a write). Each further pending
// parent adds 4 (mark, edge item and its index entry, resolve). See
// docs/workflows.md for what each write guarantees.
package flow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/triagehq/triage/internal/enqueue"
	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Store is the part of the task store flow uses.
type Store interface {
	Get(ctx context.Context, id string) (*task.Task, error)
	GetMany(ctx context.Context, ids []string) ([]*task.Task, error)
	GetManyConsistent(ctx context.Context, ids []string) ([]*task.Task, error)
	Transition(ctx context.Context, cur *task.Task, to triagetype.Status, apply func(*task.Task)) (*task.Task, error)
	MarkParent(ctx context.Context, id string) (*task.Task, error)
	PutEdges(ctx context.Context, child string, parents []string) error
	PutEdgeBatch(ctx context.Context, edges []store.Edge) error
	Children(ctx context.Context, parent, after string, limit int32) ([]string, string, error)
	EdgeChildren(ctx context.Context, parent, after string, limit int32) ([]string, string, error)
	Waiting(ctx context.Context, shard int, before time.Time, after string, limit int32) ([]*task.Task, string, error)
	ResolveParent(ctx context.Context, child, parent string) (*task.Task, bool, error)
	FlowMark(ctx context.Context, key string) (string, error)
	SetFlowMark(ctx context.Context, key, mark string) error
	Shards() int
	Now() time.Time

	// Member adds (store/memberadd.go).
	NewMemberAdd(batch string, members []string) *store.MemberAdd
	CountMembers(ctx context.Context, a *store.MemberAdd) error
	SettleAdd(ctx context.Context, a *store.MemberAdd, missing int) (bool, error)
	MemberAddAt(ctx context.Context, ref store.AddRef) (*store.MemberAdd, error)

	// Workflows and batches (store/batch.go, store/workflow.go).
	Create(ctx context.Context, t *task.Task) (*task.Task, bool, error)
	CreateFresh(ctx context.Context, ts []*task.Task) error
	CreateBatch(ctx context.Context, h *store.BatchHead, added []int) error
	Batch(ctx context.Context, id string) (*store.BatchHead, error)
	BatchShardsOf(ctx context.Context, id string, n int) ([]store.BatchShard, error)
	BatchShardsAt(ctx context.Context, id string, idx []int) ([]store.BatchShard, error)
	SealHead(ctx context.Context, id, state string) (*store.BatchHead, error)
	SealShard(ctx context.Context, id string, i int) (store.BatchShard, error)
	ReportShard(ctx context.Context, id string, i int) (bool, error)
	ClaimCallback(ctx context.Context, id string, shards int) (bool, error)
	CompleteBatch(ctx context.Context, id string, final store.BatchShard, callbackID string) (bool, error)
	OpenBatches(ctx context.Context, shard int, after string, limit int32) ([]string, []store.AddRef, string, error)
	PutWorkflowNodes(ctx context.Context, id string, nodes []store.WorkflowNodeRecord) error
	AbandonHead(ctx context.Context, id string) (bool, error)
	HoldFinished(ctx context.Context, id, taskID string) (bool, error)
	WorkflowNodes(ctx context.Context, id string, n int) ([]store.WorkflowNodeRecord, error)
	ClaimWorkflowKey(ctx context.Context, key, id, hash string) (string, string, error)
}

// Mover re-dispatches tasks to a queue, and submits the tasks flow makes
// (a batch's callback) (*enqueue.Enqueuer).
type Mover interface {
	RedispatchBatch(ctx context.Context, to triagetype.Status, p triagetype.Priority, moves []enqueue.Move) ([]*task.Task, error)
	SendReleases(ctx context.Context, p triagetype.Priority, parent string, moves []enqueue.Move) ([]*task.Task, error)
	SubmitBatch(ctx context.Context, ts []*task.Task) []enqueue.Result
}

// Options tunes a Flow; zero values take the defaults in parentheses.
type Options struct {
	// DirectWindow: a released child whose run_at is further away than
	// this becomes scheduled instead of queued (queue.MaxDelay).
	DirectWindow time.Duration
	// SweepGrace: the sweep leaves waiting tasks younger than this to
	// their parents' walks (30 s).
	SweepGrace time.Duration
	// ReleaseGrace: the sweep leaves a waiting child whose last parent
	// completed less than this long ago to the release message the
	// parent's walk sent (announce), and releases it with a write after
	// (2 minutes: under a backlog or a pause a child may wait that long
	// for its claim, then costs the write it saved).
	ReleaseGrace time.Duration
	// SweepLimit bounds the waiting tasks the sweep reads per shard per
	// run (500).
	SweepLimit int
	// AbandonAfter: a workflow still uncommitted (pending) this long after
	// its submit began is abandoned by the sweep, its nodes cancelled (1
	// hour; see abandon.go).
	AbandonAfter time.Duration
	// AddStale: the sweep settles a member add this old (its writer
	// crashed; store.MemberAddStale, 5 minutes, far past the writes'
	// deadline).
	AddStale time.Duration
	Logger   *slog.Logger
	// OnComplete, if set, is called once when a batch or workflow
	// completes (the completing writer's goroutine).
	OnComplete func(ctx context.Context, c Completion)
}

// DefaultReleaseGrace is Options.ReleaseGrace's default.
const DefaultReleaseGrace = 2 * time.Minute

// Flow resolves dependencies.
type Flow struct {
	store Store
	mover Mover
	opt   Options
	log   *slog.Logger
	// released counts the tasks released since the Flow was made (Sweep
	// reports its own share by difference; a sweep runs one at a time).
	released atomic.Int64
}

// New returns a Flow over s, releasing tasks through m.
func New(s Store, m Mover, o Options) *Flow {
	if o.DirectWindow <= 0 || o.DirectWindow > queue.MaxDelay {
		o.DirectWindow = queue.MaxDelay
	}
	if o.SweepGrace <= 0 {
		o.SweepGrace = 30 * time.Second
	}
	if o.ReleaseGrace <= 0 {
		o.ReleaseGrace = DefaultReleaseGrace
	}
	if o.SweepLimit <= 0 {
		o.SweepLimit = 500
	}
	if o.AbandonAfter <= 0 {
		o.AbandonAfter = DefaultAbandonAfter
	}
	if o.AddStale <= 0 {
		o.AddStale = store.MemberAddStale
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Flow{store: s, mover: m, opt: o, log: o.Logger}
}

// gatePrefix starts a waiting_on entry that is not a task: a workflow's
// commit, which its roots wait for (see workflow.go).
const gatePrefix = "wf:"

// isGate reports whether a waiting_on entry is a workflow gate.
func isGate(entry string) bool { return strings.HasPrefix(entry, gatePrefix) }

// Link prepares new tasks that name parents, before they are recorded.
// It reads their parents first (strongly consistent, one read unit each,
// no write), which proves they exist: a parent that is no task refuses
// the task with a *task.FieldError naming the after entry (400). Then:
//   - every parent already completed: the task needs no waiting at all.
//     It is made queued, to be sent and recorded as a plain task (no
//     edge, no mark, no waiting index entry, no release: the price of a
//     plain task). Its After still names its parents, for its handler.
//   - otherwise each unfinished parent not marked yet is marked
//     has_children (MarkParent: a parent marked already is not written
//     again, so a fan-out of n children marks its parent once), and an
//     edge is written for each unfinished parent. A parent that finished
//     (any terminal status) needs neither: Settle applies it once the
//     child is recorded, and the sweep if Settle does not.
//
// It returns, per task, nil or the refusal.
func (f *Flow) Link(ctx context.Context, ts []*task.Task) []error {
	errs := make([]error, len(ts))
	f.checkBatches(ctx, ts, errs)
	f.countMembers(ctx, ts, errs) // memberadd.go
	parallel(len(ts), 4, func(i int) {
		t := ts[i]
		if len(t.After) == 0 || errs[i] != nil {
			return
		}
		errs[i] = f.link(ctx, t)
	})
	return errs
}

// link is Link for one task.
func (f *Flow) link(ctx context.Context, t *task.Task) error {
	ps, err := f.store.GetManyConsistent(ctx, t.After)
	if err != nil {
		return err
	}
	byID := make(map[string]*task.Task, len(ps))
	for _, p := range ps {
		byID[p.ID] = p
	}
	var open, unmarked []string
	for j, id := range t.After {
		p := byID[id]
		if p == nil {
			return &task.FieldError{Field: fmt.Sprintf("after[%d]", j), Message: fmt.Sprintf("no task %s", id)}
		}
		if p.Status.Terminal() {
			continue
		}
		open = append(open, id)
		if !p.HasChildren {
			unmarked = append(unmarked, id)
		}
	}
	if len(open) == 0 && f.runnableNow(t, byID) {
		// Every parent completed: queued now, as a plain task.
		now := f.store.Now()
		t.Status, t.DispatchVersion, t.WaitingOn = triagetype.Queued, 1, nil
		t.EnqueuedAt = &now
		return nil
	}
	var mu sync.Mutex
	var first error
	parallel(len(unmarked), 16, func(j int) {
		if _, err := f.store.MarkParent(ctx, unmarked[j]); err != nil {
			if errors.Is(err, store.ErrNotFound) { // removed since the read
				err = &task.FieldError{Field: "after", Message: fmt.Sprintf("no task %s", unmarked[j])}
			}
			mu.Lock()
			defer mu.Unlock()
			if first == nil {
				first = err
			}
		}
	})
	if first != nil {
		return first
	}
	if len(open) == 0 {
		return nil
	}
	// The first unfinished parent finds the child through the child's own
	// waiting entry (store.EdgeKey); the others through edge items.
	t.EdgeParent = open[0]
	if len(open) == 1 {
		return nil
	}
	return f.store.PutEdges(ctx, t.ID, open[1:])
}

// runnableNow says whether waiting task t, whose parents (byID) all
// finished, may be queued at its submit: every parent completed, and its
// run_at, if any, within the direct window.
func (f *Flow) runnableNow(t *task.Task, byID map[string]*task.Task) bool {
	for _, id := range t.After {
		if byID[id].Status != triagetype.Completed {
			return false
		}
	}
	return t.RunAt == nil || t.RunAt.Sub(f.store.Now()) <= f.opt.DirectWindow
}

// Settle finishes what Link began once the tasks are recorded: it reads
// each new waiting task's parents (strongly consistent) and resolves those
// that had already finished, so a parent that finished before its walk
// could see the edge still releases the child.
func (f *Flow) Settle(ctx context.Context, ls []enqueue.Linked) {
	f.settleMembers(ctx, ls) // memberadd.go
	for _, l := range ls {
		t := l.Task
		if !l.Written || t.Status != triagetype.Waiting || len(t.After) == 0 {
			continue
		}
		parents, err := f.store.GetManyConsistent(ctx, t.After)
		if err != nil {
			f.log.Warn("could not check the parents of a new task; the sweep will", "task_id", t.ID, "error", err)
			continue
		}
		for _, p := range parents {
			if p.Status.Terminal() {
				f.resolve(ctx, t.ID, p)
			}
		}
	}
}

// Finished is the store's hook (store.OnFinish) for a task that reached a
// terminal status: it resolves each of its children. Failures are logged;
// the sweep repairs them. A workflow node that finished without ever
// being released (cancelled while waiting) resolves its children only if
// its workflow is committed (see walkNow in workflow.go). A batch
// member's finish is counted from the stream, not here (ShardsCounted).
func (f *Flow) Finished(ctx context.Context, t *task.Task) {
	if !t.HasChildren {
		return
	}
	if t.WorkflowID != "" && t.EnqueuedAt == nil && !f.walkNow(ctx, t) {
		return
	}
	f.walk(ctx, t)
}

// walk resolves each child of finished task t: those it is the edge
// parent of (their own waiting entries), then those of its edge items.
func (f *Flow) walk(ctx context.Context, t *task.Task) {
	for _, children := range []func(ctx context.Context, parent, after string, limit int32) ([]string, string, error){
		f.store.EdgeChildren, f.store.Children,
	} {
		after := ""
		for {
			ids, next, err := children(ctx, t.ID, after, 100)
			if err != nil {
				f.log.Warn("could not walk a finished task's children; the sweep will", "task_id", t.ID, "error", err)
				break
			}
			if t.Status == triagetype.Completed {
				ids = f.releaseLast(ctx, t.ID, ids)
			}
			parallel(len(ids), 16, func(i int) { f.resolve(ctx, ids[i], t) })
			if after = next; after == "" {
				break
			}
		}
	}
}

// resolve applies finished parent p to child id, once, and reports
// whether this call did.
func (f *Flow) resolve(ctx context.Context, id string, p *task.Task) bool {
	if p.Status == triagetype.Completed {
		return f.take(ctx, id, p.ID)
	}
	for range 5 {
		child, err := f.store.Get(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return false // its submit failed after its edges were written
		}
		if err != nil {
			f.log.Warn("could not read a waiting task", "task_id", id, "error", err)
			return false
		}
		if child.Status != triagetype.Waiting || !contains(child.WaitingOn, p.ID) {
			return false
		}
		policy := child.OnParentFailure
		if policy == "" {
			policy = triagetype.OnParentCancel
		}
		if policy == triagetype.OnParentRun {
			return f.take(ctx, id, p.ID)
		}
		to := triagetype.Cancelled
		if policy == triagetype.OnParentDeadLetter {
			to = triagetype.DeadLetter
		}
		reason := fmt.Sprintf("parent %s is %s", p.ID, p.Status)
		if p.Error != nil && p.Error.Message != "" {
			reason += ": " + p.Error.Message
		}
		now := f.store.Now()
		_, err = f.store.Transition(ctx, child, to, func(n *task.Task) {
			n.Error = task.NewError(reason, false)
			n.CompletedAt = &now
		})
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		if err != nil {
			f.log.Warn("could not apply a parent's failure to its child; the sweep will", "task_id", id, "parent", p.ID, "error", err)
			return false
		}
		return true
	}
	return false
}

// releaseLast releases, together, the children among ids whose last
// unfinished parent is parent (which completed): one batch read of the
// page (eventually consistent: a stale read of waiting_on shows a
// superset, never a subset, of the parents left), then one release
// message per child, sent ten to a request and written nowhere
// (announce). It returns the children left to resolve one by one: those
// that wait on other parents too, those the read did not show, and those
// whose message was not sent.
func (f *Flow) releaseLast(ctx context.Context, parent string, ids []string) []string {
	kids, err := f.store.GetMany(ctx, ids)
	if err != nil {
		return ids
	}
	byID := make(map[string]*task.Task, len(kids))
	for _, k := range kids {
		byID[k.ID] = k
	}
	var last []*task.Task
	var rest []string
	for _, id := range ids {
		k := byID[id]
		switch {
		case k == nil:
			rest = append(rest, id) // not visible yet: take reads it strongly
		case k.Status != triagetype.Waiting || !contains(k.WaitingOn, parent):
			// resolved already (waiting_on only shrinks)
		case len(k.WaitingOn) == 1:
			last = append(last, k)
		default:
			rest = append(rest, id)
		}
	}
	moved := f.announce(ctx, parent, last)
	f.released.Add(int64(len(moved)))
	for _, k := range last {
		if !moved[k.ID] {
			rest = append(rest, k.ID)
		}
	}
	return rest
}

// take resolves the edge parent -> id, releases the child when it was the
// last one, and reports whether this call resolved the edge.
//
// The last edge costs one write, not two: the child is read first (half a
// read unit; waiting_on only shrinks, so a stale read shows a superset),
// and when parent is all it still waits on, its release takes it out in
// the same conditional write (on the child's version) that moves it to
// its queue. A conflict (another parent resolved meanwhile, a cancel)
// falls back to the resolve below.
func (f *Flow) take(ctx context.Context, id, parent string) bool {
	if c, err := f.store.Get(ctx, id); err == nil && c.Status == triagetype.Waiting &&
		len(c.WaitingOn) == 1 && c.WaitingOn[0] == parent {
		if n := f.release(ctx, []*task.Task{c}); n == 1 {
			f.released.Add(1)
			return true
		}
	}
	child, resolved, err := f.store.ResolveParent(ctx, id, parent)
	if err != nil {
		f.log.Warn("could not resolve a parent; the sweep will", "task_id", id, "parent", parent, "error", err)
		return false
	}
	if resolved && child.Status == triagetype.Waiting && len(child.WaitingOn) == 0 {
		f.released.Add(int64(f.release(ctx, []*task.Task{child})))
	}
	return resolved
}

// announce releases waiting children ts whose last parent, parent,
// completed, by their message alone (enqueue.SendReleases): no write, so
// a child of one parent costs the write units of a plain task plus its
// entry and the parent's mark, and the claim that starts it moves it from
// waiting (internal/dispatch checks the parent). A child is waiting until
// that claim. If the message is lost (a crash before the send, a failed
// send) or not claimed within ReleaseGrace of the parent's finish (a
// backlog, a pause, a message put off until the DLQ), the sweep releases
// the child with a write as before (check). A child whose run_at is
// beyond the direct window is moved to scheduled by a write, as release
// does. It returns the ids released.
func (f *Flow) announce(ctx context.Context, parent string, ts []*task.Task) map[string]bool {
	now := f.store.Now()
	byPrio := map[triagetype.Priority][]enqueue.Move{}
	var later []*task.Task
	for _, t := range ts {
		if t.Status != triagetype.Waiting {
			continue
		}
		delay, scheduled := f.releaseDelay(t, now)
		if scheduled {
			later = append(later, t)
			continue
		}
		byPrio[t.EffectivePriority] = append(byPrio[t.EffectivePriority], enqueue.Move{Task: t, Delay: delay})
	}
	moved := f.releaseMoved(ctx, later)
	for p, moves := range byPrio {
		sent, err := f.mover.SendReleases(ctx, p, parent, moves)
		for _, t := range sent {
			moved[t.ID] = true
		}
		if err != nil {
			f.log.Warn("could not send the release of waiting tasks; the sweep will release them", "priority", p, "parent", parent, "error", err)
		}
	}
	return moved
}

// release moves waiting tasks whose parents all finished to their queue
// (or to scheduled, when their run_at is further away than the direct
// window): every parent still in their waiting_on must be one the caller
// has applied (take's last edge), and the move empties it. Each move is
// conditional on the task's version, so a task released twice at once
// moves once, and one whose waiting_on changed since it was read does
// not move.
func (f *Flow) release(ctx context.Context, ts []*task.Task) int {
	return len(f.releaseMoved(ctx, ts))
}

// releaseMoved is release, returning the ids of the tasks it moved.
func (f *Flow) releaseMoved(ctx context.Context, ts []*task.Task) map[string]bool {
	now := f.store.Now()
	byPrio := map[triagetype.Priority][]enqueue.Move{}
	moved := map[string]bool{}
	resolved := func(n *task.Task) { n.WaitingOn = nil }
	for _, t := range ts {
		if t.Status != triagetype.Waiting {
			continue
		}
		delay, scheduled := f.releaseDelay(t, now)
		if scheduled {
			if _, err := f.store.Transition(ctx, t, triagetype.Scheduled, resolved); err == nil {
				moved[t.ID] = true
			}
			continue
		}
		byPrio[t.EffectivePriority] = append(byPrio[t.EffectivePriority], enqueue.Move{Task: t, Delay: delay, Apply: resolved})
	}
	for p, moves := range byPrio {
		done, err := f.mover.RedispatchBatch(ctx, triagetype.Queued, p, moves)
		for _, d := range done {
			if d != nil {
				moved[d.ID] = true
			}
		}
		if err != nil && !errors.Is(err, store.ErrConflict) {
			f.log.Warn("could not release waiting tasks; the sweep will", "priority", p, "error", err)
		}
	}
	return moved
}

// releaseDelay is how a released task t reaches its queue at now: its
// message delayed until its run_at, or, when run_at is further away than
// the direct window, scheduled (no message; the promoter sends it).
func (f *Flow) releaseDelay(t *task.Task, now time.Time) (delay time.Duration, scheduled bool) {
	if t.RunAt == nil {
		return 0, false
	}
	if t.RunAt.Sub(now) > f.opt.DirectWindow {
		return 0, true
	}
	return max(0, t.RunAt.Sub(now)), false
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// parallel runs fn(0..n-1), at most limit at a time, and returns when all
// have returned. fn reports its own failures (each call's are its own).
func parallel(n, limit int, fn func(int)) {
	var g errgroup.Group
	g.SetLimit(limit)
	for i := range n {
		g.Go(func() error { fn(i); return nil })
	}
	_ = g.Wait() // every call returns nil
}
