package dispatch

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/triagetype"
)

// deleter batches message deletes: ten per request, or whatever is pending
// once the oldest pending delete has waited hold (looked at every
// flushEvery), and everything when the run ends. A finished task's message
// is still hidden for at least the lease margin (the visibility its
// receive or last heartbeat set runs that far past the lease), so holding
// its delete for half of it (deleteHold) costs nothing; a delete that
// fails or comes late only means the message comes back, finds its task
// finished, and is deleted then.
type deleter struct {
	queues  Queues
	log     *slog.Logger
	hold    time.Duration
	in      chan pendingDelete
	pending map[triagetype.Priority][]string
	since   map[triagetype.Priority]time.Time // when each pending batch began

	// watched maps the receipt handles an event-started run must account
	// for to whether SQS confirmed their delete (nil: none watched).
	watchMu sync.Mutex
	watched map[string]bool
}

type pendingDelete struct {
	p       triagetype.Priority
	receipt string
}

const (
	flushEvery    = 50 * time.Millisecond
	maxDeleteHold = time.Second
)

// deleteHold is how long a delete waits for nine others: half the lease
// margin, at most maxDeleteHold, at least flushEvery.
func deleteHold(margin time.Duration) time.Duration {
	return max(flushEvery, min(maxDeleteHold, margin/2))
}

func newDeleter(q Queues, log *slog.Logger, hold time.Duration) *deleter {
	return &deleter{queues: q, log: log, hold: hold, in: make(chan pendingDelete, 256), pending: map[triagetype.Priority][]string{}, since: map[triagetype.Priority]time.Time{}}
}

// watch starts recording which of receipts are deleted.
func (d *deleter) watch(receipts []string) {
	d.watchMu.Lock()
	defer d.watchMu.Unlock()
	d.watched = make(map[string]bool, len(receipts))
	for _, r := range receipts {
		d.watched[r] = false
	}
}

// unwatch stops recording and returns the watched receipts whose delete
// SQS confirmed, as true. Call it after run has returned, so every delete
// asked for has been sent.
func (d *deleter) unwatch() map[string]bool {
	d.watchMu.Lock()
	defer d.watchMu.Unlock()
	w := d.watched
	d.watched = nil
	return w
}

// confirm records the outcome of a delete request for rs: err nil, or a
// *queue.BatchError naming the ones that failed; any other error fails all.
func (d *deleter) confirm(rs []string, err error) {
	d.watchMu.Lock()
	defer d.watchMu.Unlock()
	if d.watched == nil {
		return
	}
	var be *queue.BatchError
	partial := errors.As(err, &be)
	for _, r := range rs {
		if _, ok := d.watched[r]; !ok {
			continue
		}
		switch {
		case err == nil:
			d.watched[r] = true
		case partial:
			_, failed := be.Failed[r]
			d.watched[r] = !failed
		}
	}
}

func (d *deleter) add(p triagetype.Priority, receipt string) { d.in <- pendingDelete{p, receipt} }

// run flushes until ctx ends, then flushes what is left.
func (d *deleter) run(ctx context.Context) {
	t := time.NewTicker(flushEvery)
	defer t.Stop()
	for {
		select {
		case pd := <-d.in:
			if len(d.pending[pd.p]) == 0 {
				d.since[pd.p] = time.Now()
			}
			d.pending[pd.p] = append(d.pending[pd.p], pd.receipt)
			if len(d.pending[pd.p]) >= queue.MaxBatch {
				d.flush(pd.p)
			}
		case now := <-t.C:
			for p := range d.pending {
				if now.Sub(d.since[p]) >= d.hold {
					d.flush(p)
				}
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
	err := d.queues.DeleteBatch(ctx, p, rs)
	d.confirm(rs, err)
	if err != nil {
		d.log.Warn("batch delete failed; the messages will come back and be dropped as finished", "priority", p, "count", len(rs), "error", err)
	}
}
