package flow

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// SweepReport counts what one sweep did.
type SweepReport struct {
	// Checked counts the waiting tasks read.
	Checked int `json:"checked"`
	// Resolved counts the finished parents applied to their children
	// (edges a walk had missed).
	Resolved int `json:"resolved"`
	// Released counts the tasks this Flow released while the sweep ran
	// (its own releases, and any walk in the same process meanwhile).
	Released int `json:"released"`
	// Abandoned counts the workflows abandoned: still uncommitted
	// Options.AbandonAfter after their submit began (abandon.go).
	Abandoned int `json:"abandoned"`
	// Parked are the released children the sweep read that are still
	// queued and unclaimed in their edge parent's waiting partition
	// (store.Parked): the promoter ages them (their release wrote no
	// aging entry).
	Parked []*task.Task `json:"-"`
}

// Sweep repairs what a crash left behind: it reads the waiting
// partitions, at most SweepLimit entries per shard, from each shard's
// resume mark (starting over at the end), and applies every finished
// parent in the waiting_on sets of the tasks older than SweepGrace,
// releasing children whose parents all finished; a parent that completed
// less than ReleaseGrace ago and is all its child waits on is left to the
// release message its walk sent (announced). Every action is the
// same conditional write a walk makes, so a sweep racing a walk changes
// nothing twice. It also returns the released children it read that are
// still parked (SweepReport.Parked), for the promoter to age.
//
// The partitions are sorted by edge parent, not by time (store.EdgeKey),
// so the grace is a check of the creation time in each sort key, and an
// entry younger than the grace is left to the next pass. Cost per run:
// one query page per 100 entries and one batch read per 100 entries older
// than the grace, plus one batch read of their parents; a backlog of W
// entries (waiting and parked children) is read once every
// W / (shards × SweepLimit) runs, whatever its size, and a left-behind
// child waits one such pass after its grace (or after ReleaseGrace from
// its last parent's finish) at most.
func (f *Flow) Sweep(ctx context.Context) (SweepReport, error) {
	var mu sync.Mutex
	var r SweepReport
	var errs []error
	cut := f.store.Now().Add(-f.opt.SweepGrace)
	before := f.released.Load()
	parallel(f.store.Shards(), f.store.Shards(), func(sh int) {
		sr, err := f.sweepShard(ctx, sh, cut)
		if berr := f.sweepBatches(ctx, sh); berr != nil {
			err = errors.Join(err, berr)
		}
		mu.Lock()
		defer mu.Unlock()
		r.Checked += sr.Checked
		r.Resolved += sr.Resolved
		r.Released += sr.Released
		r.Abandoned += sr.Abandoned
		r.Parked = append(r.Parked, sr.Parked...)
		if err != nil {
			errs = append(errs, err)
		}
	})
	r.Released = int(f.released.Load() - before)
	return r, errors.Join(errs...)
}

func (f *Flow) sweepShard(ctx context.Context, sh int, cut time.Time) (SweepReport, error) {
	var r SweepReport
	key := "waiting#" + strconv.Itoa(sh)
	mark, err := f.store.FlowMark(ctx, key)
	if err != nil {
		return r, err
	}
	start := mark
	page := min(100, f.opt.SweepLimit)
	for read := 0; read < f.opt.SweepLimit; read += page {
		ts, next, err := f.store.Waiting(ctx, sh, cut, mark, int32(page))
		if err != nil {
			return r, err
		}
		var waiting []*task.Task
		for _, t := range ts {
			switch {
			case t.Status == triagetype.Waiting:
				waiting = append(waiting, t)
			case store.Parked(t):
				r.Parked = append(r.Parked, t)
			}
		}
		r.Checked += len(waiting)
		waiting, abandoned := f.committed(ctx, waiting)
		r.Abandoned += abandoned
		r.Resolved += f.check(ctx, waiting)
		if mark = next; mark == "" {
			break
		}
	}
	if mark != start {
		return r, f.store.SetFlowMark(ctx, key, mark)
	}
	return r, nil
}

// check applies the finished parents of waiting tasks ts.
func (f *Flow) check(ctx context.Context, ts []*task.Task) (resolved int) {
	var ids []string
	seen := map[string]bool{}
	var ready []*task.Task
	for _, t := range ts {
		if t.Status != triagetype.Waiting {
			continue
		}
		if len(t.WaitingOn) == 0 {
			ready = append(ready, t) // resolved, release lost
			continue
		}
		for _, p := range t.WaitingOn {
			if !isGate(p) && !seen[p] {
				seen[p] = true
				ids = append(ids, p)
			}
		}
	}
	f.released.Add(int64(f.release(ctx, ready)))
	parents := map[string]*task.Task{}
	if len(ids) > 0 {
		ps, err := f.store.GetMany(ctx, ids)
		if err != nil {
			f.log.Warn("sweep could not read parents", "error", err)
			return 0
		}
		for _, p := range ps {
			parents[p.ID] = p
		}
	}
	for _, t := range ts {
		if t.Status != triagetype.Waiting {
			continue
		}
		for _, pid := range t.WaitingOn {
			if isGate(pid) {
				if f.gateOpen(ctx, pid) && f.take(ctx, t.ID, pid) {
					resolved++
				}
				continue
			}
			p, ok := parents[pid]
			if !ok {
				// Gone: only finished tasks expire. Its outcome is unknown,
				// so it counts as a parent that ended badly.
				p = &task.Task{ID: pid, Status: triagetype.Cancelled, Error: task.NewError("the parent no longer exists", false)}
			}
			if f.announced(t, p) {
				continue // its release message may be on its queue still
			}
			if p.Status.Terminal() && f.resolve(ctx, t.ID, p) {
				resolved++
			}
		}
	}
	return resolved
}

// announced reports whether waiting child t may still be released by the
// message its last parent p's walk sent (announce): p is all t waits on
// and completed less than ReleaseGrace ago, or t's run_at (its message's
// delay) is less than ReleaseGrace ago. The sweep leaves it until then.
func (f *Flow) announced(t, p *task.Task) bool {
	if p.Status != triagetype.Completed || p.CompletedAt == nil || len(t.WaitingOn) != 1 || t.WaitingOn[0] != p.ID {
		return false
	}
	due := *p.CompletedAt
	if t.RunAt != nil && t.RunAt.After(due) {
		due = *t.RunAt
	}
	return f.store.Now().Sub(due) < f.opt.ReleaseGrace
}
