package workers

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/triagehq/triage/triagetype"
)

// Registrar is the registry a Beacon writes to (*Registry).
type Registrar interface {
	Register(ctx context.Context, in Instance) error
	Heartbeat(ctx context.Context, in Instance, busy int, state triagetype.WorkerState) error
	Deregister(ctx context.Context, id string) error
}

// writeTimeout bounds each registry write, so a hanging write can delay a
// heartbeat but never stall the beacon (or a consumer's shutdown) for
// long.
const writeTimeout = 5 * time.Second

// Beacon keeps one instance's registry item current: it registers at
// Start, heartbeats every interval with the busy count busy reports, turns
// draining at Drain and deregisters at Stop. A failed write is logged and
// the beacon carries on: the registry reports on consumers and must never
// fail one. A heartbeat that finds no item (it expired while the instance
// could not write) registers again. The methods of a nil *Beacon do
// nothing, so a consumer without a registry needs no checks.
type Beacon struct {
	reg       Registrar
	self      Instance
	busy      func() int
	log       *slog.Logger
	drain     chan struct{}
	drainOnce sync.Once
	stop      chan struct{}
	done      chan struct{}
}

// Start registers self (after self.RegisterAfter, when set) and
// heartbeats it until Stop. ctx carries values
// only: the beacon outlives its cancellation, since a consumer keeps
// heartbeating while it drains.
func Start(ctx context.Context, reg Registrar, self Instance, busy func() int, log *slog.Logger) *Beacon {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	self.Every = every(self)
	b := &Beacon{
		reg: reg, self: self, busy: busy, log: log.With("worker_id", self.ID),
		drain: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{}),
	}
	go b.run(context.WithoutCancel(ctx))
	return b
}

func (b *Beacon) run(ctx context.Context) {
	defer close(b.done)
	if b.self.RegisterAfter > 0 {
		wait := time.NewTimer(b.self.RegisterAfter)
		select {
		case <-wait.C:
		case <-b.stop:
			wait.Stop()
			return // never registered: nothing to remove
		}
	}
	register := func(ctx context.Context) error {
		in := b.self
		in.Busy = b.busy() // a delayed registration finds tasks running
		return b.reg.Register(ctx, in)
	}
	// registered: the item exists as far as the beacon knows. It turns
	// false when a registration failed or a heartbeat found no item; the
	// next tick registers again.
	registered := b.write(ctx, "register", register) == nil
	state := triagetype.WorkerActive
	tick := time.NewTicker(b.self.Every)
	defer tick.Stop()
	drain := b.drain
	for {
		select {
		case <-tick.C:
		case <-drain:
			state, drain = triagetype.WorkerDraining, nil // say so at once, then on every tick
		case <-b.stop:
			_ = b.write(ctx, "deregister", func(ctx context.Context) error { return b.reg.Deregister(ctx, b.self.ID) })
			return
		}
		if !registered {
			if registered = b.write(ctx, "register", register) == nil; !registered || state == triagetype.WorkerActive {
				continue // failed, or the registration was this tick's heartbeat
			}
		}
		err := b.write(ctx, "heartbeat", func(ctx context.Context) error {
			return b.reg.Heartbeat(ctx, b.self, b.busy(), state)
		})
		registered = !errors.Is(err, ErrNotRegistered)
	}
}

// write runs one registry write with its own timeout; a failure is logged
// and returned.
func (b *Beacon) write(ctx context.Context, what string, f func(context.Context) error) error {
	wctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	err := f(wctx)
	if err != nil {
		b.log.Warn("worker registry: "+what+" failed; the consumer carries on", "error", err)
	}
	return err
}

// Drain marks the instance draining: it takes no new tasks and finishes
// the ones it runs. The registry hears of it at once.
func (b *Beacon) Drain() {
	if b == nil {
		return
	}
	b.drainOnce.Do(func() { close(b.drain) })
}

// Stop ends the heartbeats and removes the instance's item, waiting for
// that last write (at most writeTimeout). Call it once.
func (b *Beacon) Stop() {
	if b == nil {
		return
	}
	close(b.stop)
	<-b.done
}
