// Package cleanup deletes finished tasks older than a cut as a job, not
// a request: Start records the job and returns at once; a Runner (the
// promoter, each run) works through it page by page for a bounded time,
// saving its cursor and counts after every page, so a crash loses at
// most one page of progress and the next run resumes from the cursor.
//
// Invariants:
//   - At most one job runs at a time (store.StartCleanup), and one runner
//     works on it at a time: it holds a lease on the job, renewed with
//     every save, and every save is conditional on the version it read,
//     so a runner that lost the job stops at its next save.
//   - A page is one index query and a batch read (BatchGetItem calls of
//     100, a few at a time) of at most Page tasks
//     (store.CleanupPage): no step reads O(all tasks).
//   - A dead letter or a cancelled task is deleted conditionally on its
//     status and version as read, so one retried or changed since is
//     left alone; completed tasks, which never change again, go 25 to a
//     BatchWriteItem. A page done twice (after a crash) finds the tasks
//     it deleted gone.
//   - The DLQ copies of the dead letters a page deleted are removed with
//     it (deadletter.DLQ.RemoveCopies), as a single delete removes them.
package cleanup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Store is the part of the task store a cleanup uses (*store.Store).
type Store interface {
	StartCleanup(ctx context.Context, olderThan time.Time) (*store.CleanupJob, error)
	CleanupJob(ctx context.Context, id string) (*store.CleanupJob, error)
	ActiveCleanup(ctx context.Context) (*store.CleanupJob, error)
	SaveCleanup(ctx context.Context, j *store.CleanupJob) error
	CleanupPage(ctx context.Context, olderThan time.Time, at store.CleanupCursor, limit int32) ([]*task.Task, int, store.CleanupCursor, bool, error)
	Delete(ctx context.Context, cur *task.Task) error
	DeleteCompleted(ctx context.Context, ts []*task.Task) (int, error)
	Now() time.Time
}

// Copies removes the DLQ copies of deleted dead letters (*deadletter.DLQ).
type Copies interface {
	RemoveCopies(ctx context.Context, dead []*task.Task)
}

// Start records a cleanup of the tasks that finished before olderThan and
// returns it, running; a runner does the work. While another runs, the
// error wraps store.ErrCleanupRunning (a *store.CleanupRunningError
// naming it).
func Start(ctx context.Context, s Store, olderThan time.Time) (*store.CleanupJob, error) {
	return s.StartCleanup(ctx, olderThan)
}

// DefaultPage is Options.Page's default. A runner killed mid-page has
// deleted up to this many tasks it never counted: the job's count can fall
// short by that much, never more.
const DefaultPage = 500

// Options tune a Runner. Zero values take the defaults in parentheses.
type Options struct {
	// Owner names this runner in the job's lease (required).
	Owner string
	// Page is how many index entries a page reads (DefaultPage, 500: one
	// Query, five BatchGetItem calls and up to twenty BatchWriteItem calls,
	// in parallel).
	Page int32
	// Parallel is how many deletes run at once (16).
	Parallel int
	// Lease is how long the job is this runner's after each save: another
	// runner takes over a job whose runner died this long after its last
	// save (2 min).
	Lease time.Duration
	// Copies, if set, removes the DLQ copies of deleted dead letters.
	Copies Copies
	Logger *slog.Logger
}

// Runner works on the running cleanup job.
type Runner struct {
	store Store
	opt   Options
	log   *slog.Logger
}

// NewRunner returns a runner over s.
func NewRunner(s Store, opt Options) *Runner {
	if opt.Page <= 0 {
		opt.Page = DefaultPage
	}
	if opt.Parallel <= 0 {
		opt.Parallel = 16
	}
	if opt.Lease <= 0 {
		opt.Lease = 2 * time.Minute
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	return &Runner{store: s, opt: opt, log: opt.Logger}
}

// Report is what one Run did.
type Report struct {
	Job     string // the job worked on ("" when none was running)
	Deleted int    // tasks deleted by this run
	Pages   int
	Done    bool // the job finished in this run
}

// Run works on the running job, if any and if no live runner holds it,
// until it is done, ctx ends, or budget has passed (checked between
// pages; a page takes about one query, one batch read and Page deletes).
func (r *Runner) Run(ctx context.Context, budget time.Duration) (Report, error) {
	j, err := r.store.ActiveCleanup(ctx)
	if err != nil || j == nil {
		return Report{}, err
	}
	now := r.store.Now()
	if j.Owner != "" && j.Owner != r.opt.Owner && now.Before(j.LeaseUntil) {
		return Report{Job: j.ID}, nil // another runner holds it
	}
	rep := Report{Job: j.ID}
	// Take (or renew) the lease with a save of the job as read.
	j.Owner, j.LeaseUntil = r.opt.Owner, now.Add(r.opt.Lease)
	if err := r.store.SaveCleanup(ctx, j); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return rep, nil // another runner took it first
		}
		return rep, err
	}
	deadline := now.Add(budget)
	for ctx.Err() == nil && r.store.Now().Before(deadline) {
		n, done, err := r.page(ctx, j)
		rep.Deleted += n
		rep.Pages++
		if errors.Is(err, store.ErrConflict) {
			r.log.Warn("cleanup taken over by another runner", "cleanup", j.ID)
			return rep, nil
		}
		if err != nil {
			return rep, err
		}
		if done {
			rep.Done = true
			r.log.Info("cleanup done", "cleanup", j.ID, "deleted", j.Deleted, "read", j.Read, "older_than", j.OlderThan)
			return rep, nil
		}
	}
	return rep, nil
}

// page does one page of j and saves j with its new cursor and counts. A
// page that fails is counted in j's errors and saved without moving the
// cursor, and its error returned: the next run tries it again.
func (r *Runner) page(ctx context.Context, j *store.CleanupJob) (int, bool, error) {
	eligible, read, next, done, err := r.store.CleanupPage(ctx, j.OlderThan, j.Cursor, r.opt.Page)
	var deleted atomic.Int64
	var dead []*task.Task
	if err == nil {
		var g errgroup.Group
		g.SetLimit(r.opt.Parallel)
		for i := 0; i < len(eligible); i += 25 {
			chunk := eligible[i:min(i+25, len(eligible))]
			g.Go(func() error {
				n, err := r.store.DeleteCompleted(ctx, chunk)
				deleted.Add(int64(n))
				return err
			})
		}
		gone := make([]bool, len(eligible))
		for i, t := range eligible {
			if t.Status == triagetype.Completed {
				continue
			}
			g.Go(func() error {
				err := r.store.Delete(ctx, t)
				switch {
				case err == nil:
					gone[i] = true
					deleted.Add(1)
				case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrNotFound):
					// Changed (retried, say) or deleted since it was read.
				default:
					return fmt.Errorf("delete task %s: %w", t.ID, err)
				}
				return nil
			})
		}
		err = g.Wait()
		for i, t := range eligible {
			if gone[i] && t.Status == triagetype.DeadLetter {
				dead = append(dead, t)
			}
		}
	}
	if len(dead) > 0 && r.opt.Copies != nil {
		r.opt.Copies.RemoveCopies(ctx, dead)
	}
	j.Deleted += deleted.Load()
	j.Read += int64(read)
	if err != nil {
		j.Errors++
		j.LastError = err.Error()
		r.log.Warn("cleanup page failed; it is tried again", "cleanup", j.ID, "error", err)
		done = false
	} else {
		j.Cursor = next
	}
	if done {
		t := r.store.Now()
		j.State, j.DoneAt = store.CleanupDone, &t
		j.Owner = ""
	} else {
		j.LeaseUntil = r.store.Now().Add(r.opt.Lease)
	}
	if serr := r.store.SaveCleanup(ctx, j); serr != nil {
		return int(deleted.Load()), false, serr
	}
	return int(deleted.Load()), done, err // a failed page ends this run; the next tries it again
}
