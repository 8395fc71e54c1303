package enqueue

import (
	"context"
	"errors"

	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
)

// Linker prepares and settles new tasks that wait for parents or join a
// batch (*flow.Flow): Link runs before their messages are sent and their
// records written (it marks the parents and writes the edges, counts a
// request's batch members on their shard, and refuses a parent that does
// not exist, or a batch that does not exist or is sealed, with a
// *task.FieldError), Settle after, with every task Link accepted (it
// applies parents that had already finished, and settles the members'
// count with the records that were written).
type Linker interface {
	Link(ctx context.Context, ts []*task.Task) []error
	Settle(ctx context.Context, ls []Linked)
}

// Linked is a task Link accepted, after its send and record: Written when
// this request recorded it, Unsure when its record's write failed in a way
// that may have landed all the same (neither written nor surely not).
type Linked struct {
	Task    *task.Task
	Written bool
	Unsure  bool
}

// ErrNoLinker refuses a task naming parents on an Enqueuer without a
// Linker (a wiring mistake: app.Assemble sets one).
var ErrNoLinker = errors.New("dependencies are not enabled on this enqueuer")

// SetLinker makes e hand tasks that name parents to l. Call it once, while
// assembling.
func (e *Enqueuer) SetLinker(l Linker) { e.links = l }

// link runs Link for the waiting tasks and batch members among sent
// (indexes into ts) and returns those that may be sent and recorded; the
// others get their refusal in res.
func (e *Enqueuer) link(ctx context.Context, ts []*task.Task, sent []int, res []Result) []int {
	var waiting []*task.Task
	var at []int
	for _, i := range sent {
		if len(ts[i].After) > 0 || ts[i].BatchID != "" {
			waiting = append(waiting, ts[i])
			at = append(at, i)
		}
	}
	if len(waiting) == 0 {
		return sent
	}
	refused := map[int]bool{}
	if e.links == nil {
		for _, i := range at {
			if len(ts[i].After) > 0 {
				res[i], refused[i] = Result{Err: ErrNoLinker}, true
			}
		}
	} else {
		for j, err := range e.links.Link(ctx, waiting) {
			if err != nil {
				res[at[j]], refused[at[j]] = Result{Err: err}, true
			}
		}
	}
	out := sent[:0:0]
	for _, i := range sent {
		if !refused[i] {
			out = append(out, i)
		}
	}
	return out
}

// settle runs Settle for the tasks Link accepted among sent.
func (e *Enqueuer) settle(ctx context.Context, ts []*task.Task, sent []int, res []Result) {
	if e.links == nil {
		return
	}
	var ls []Linked
	for _, i := range sent {
		t := ts[i]
		if len(t.After) == 0 && t.BatchID == "" {
			continue
		}
		r := res[i]
		l := Linked{Task: t, Written: r.Err == nil && r.Created}
		if l.Written {
			l.Task = r.Task
		}
		// A record that failed other than by a refusal may have landed.
		var fe *task.FieldError
		l.Unsure = errors.Is(r.Err, ErrNotRecorded) && !errors.As(r.Err, &fe) && !errors.Is(r.Err, store.ErrAddExpired)
		ls = append(ls, l)
	}
	if len(ls) > 0 {
		e.links.Settle(ctx, ls)
	}
}
