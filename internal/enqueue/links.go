package enqueue

import (
	"context"
	"errors"

	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Linker prepares and settles new tasks that wait for parents or join a
// batch (*flow.Flow): Link runs before their messages are sent and their
// records written (it marks the parents and writes the edges, and refuses
// a parent that does not exist, or a batch that does not exist or is
// sealed, with a *task.FieldError), Settle after (it applies parents that
// had already finished).
type Linker interface {
	Link(ctx context.Context, ts []*task.Task) []error
	Settle(ctx context.Context, ts []*task.Task)
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

// settle runs Settle for the waiting tasks among sent that were created.
func (e *Enqueuer) settle(ctx context.Context, sent []int, res []Result) {
	if e.links == nil {
		return
	}
	var created []*task.Task
	for _, i := range sent {
		if r := res[i]; r.Err == nil && r.Created && r.Task.Status == triagetype.Waiting {
			created = append(created, r.Task)
		}
	}
	if len(created) > 0 {
		e.links.Settle(ctx, created)
	}
}
