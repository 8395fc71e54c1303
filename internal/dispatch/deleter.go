package dispatch

import (
	"context"
	"log/slog"
	"time"

	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/triagetype"
)

// deleter batches message deletes: ten per request, or whatever is pending
// after flushEvery. A delete that fails only means the message comes back,
// finds its task finished, and is deleted then.
type deleter struct {
	queues  Queues
	log     *slog.Logger
	in      chan pendingDelete
	pending map[triagetype.Priority][]string
}

type pendingDelete struct {
	p       triagetype.Priority
	receipt string
}

const flushEvery = 50 * time.Millisecond

func newDeleter(q Queues, log *slog.Logger) *deleter {
	return &deleter{queues: q, log: log, in: make(chan pendingDelete, 256), pending: map[triagetype.Priority][]string{}}
}

func (d *deleter) add(p triagetype.Priority, receipt string) { d.in <- pendingDelete{p, receipt} }

// run flushes until ctx ends, then flushes what is left.
func (d *deleter) run(ctx context.Context) {
	t := time.NewTicker(flushEvery)
	defer t.Stop()
	for {
		select {
		case pd := <-d.in:
			d.pending[pd.p] = append(d.pending[pd.p], pd.receipt)
			if len(d.pending[pd.p]) >= queue.MaxBatch {
				d.flush(pd.p)
			}
		case <-t.C:
			for p := range d.pending {
				d.flush(p)
			}
		case <-ctx.Done():
			for {
				select {
				case pd := <-d.in:
					d.pending[pd.p] = append(d.pending[pd.p], pd.receipt)
				default:
					for p := range d.pending {
						d.flush(p)
					}
					return
				}
			}
		}
	}
}

func (d *deleter) flush(p triagetype.Priority) {
	rs := d.pending[p]
	if len(rs) == 0 {
		return
	}
	delete(d.pending, p)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.queues.DeleteBatch(ctx, p, rs); err != nil {
		d.log.Warn("batch delete failed; the messages will come back and be dropped as finished", "priority", p, "count", len(rs), "error", err)
	}
}
