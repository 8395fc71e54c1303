// Package dispatch is the consumer: it polls the three priority queues with
// weights, claims each task in DynamoDB, runs the handler for its type and
// records the outcome.
//
// Correctness rests on the store's conditional writes. A claim succeeds only
// for the message that matches the task's dispatch version while the task is
// claimable; every later write is conditional on the claim's version, so a
// worker whose lease was lost writes nothing. SQS's receive count is never
// used for retry accounting: attempts in DynamoDB is.
package dispatch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/triagehq/triage/internal/config"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/internal/tracing"
	"github.com/triagehq/triage/internal/workers"
	"go.opentelemetry.io/otel/trace"
)

// Store is the part of the task store the consumer uses.
type Store interface {
	Get(ctx context.Context, id string) (*task.Task, error)
	Create(ctx context.Context, t *task.Task) (*task.Task, bool, error)
	Transition(ctx context.Context, cur *task.Task, to task.Status, apply func(*task.Task)) (*task.Task, error)
	Touch(ctx context.Context, cur *task.Task, apply func(*task.Task)) (*task.Task, error)
	CancelRequested(ctx context.Context, id string) (bool, error)
	Payload(ctx context.Context, t *task.Task) (json.RawMessage, error)
	DropPayload(ctx context.Context, id string)
	Now() time.Time
}

// Queues is the part of the SQS queues the consumer uses.
type Queues interface {
	Receive(ctx context.Context, p task.Priority, n int, wait, visibility time.Duration) ([]queue.Received, error)
	DeleteBatch(ctx context.Context, p task.Priority, receipts []string) error
	ChangeVisibility(ctx context.Context, p task.Priority, receipt string, d time.Duration) error
	Send(ctx context.Context, p task.Priority, body string, delay time.Duration) (string, error)
	SendDLQ(ctx context.Context, p task.Priority, body, reason string) error
}

// Redispatcher sends a task a fresh message when its own is gone.
type Redispatcher interface {
	Redispatch(ctx context.Context, cur *task.Task, to task.Status, p task.Priority, delay time.Duration, apply func(*task.Task)) (*task.Task, error)
}

// Handlers finds the handler of a task type.
type Handlers interface {
	Lookup(typ string) (handler.Handler, error)
}

// Options tunes a Consumer. Zero values take the defaults in parentheses.
type Options struct {
	Weights      map[task.Priority]int // shares of weighted polling (config.DefaultWeights)
	Strict       *bool                 // always take the highest non-empty queue (nil: no; app.Consumer: TRIAGE_STRICT)
	Concurrency  int                   // tasks run at once (config.DefaultConcurrency)
	ReservedHigh int                   // of those, slots only high tasks may use (0 here; the assembly passes config.Config's)
	// PollWait is the long-poll wait used when every queue looked empty
	// (config.DefaultPollWait).
	PollWait time.Duration
	// EmptyBackoff is how long a queue that returned nothing is skipped
	// (200 ms). It bounds how late a busy consumer notices new work on a
	// queue it found empty, so it is short: the cost is one receive per
	// empty queue per EmptyBackoff while busy.
	EmptyBackoff time.Duration
	// Lease is how long a claim holds a task before it must be renewed by a
	// heartbeat (config.DefaultLease, or the task timeout if shorter); heartbeats
	// come every Lease/3. It bounds crash recovery: the message of a task
	// whose worker died becomes visible again at most Lease + 2×LeaseMargin
	// after the worker's last heartbeat, and the next receive reclaims it.
	Lease       time.Duration
	LeaseMargin time.Duration // slack on leases and visibility (5 s, or Lease/4 if shorter)
	// CancelCheck is how often a running task's cancel request is looked
	// for, between heartbeats (1 s; a negative value leaves it to the
	// heartbeat). Each check is one eventually consistent read of the
	// task's cancel flag, made only while the task runs.
	CancelCheck time.Duration
	// ProgressInterval is the least time between two writes of a running
	// task that carry its handler's progress reports (task.ProgressInterval);
	// heartbeats carry them too. See Consumer.heartbeat.
	ProgressInterval time.Duration
	// APIURL is the API's base address (TRIAGE_API_URL), from which each
	// attempt's progress_url is made for external handlers ("": none is
	// given; they still get the token).
	APIURL string
	// BatchWait is how long a busy consumer waits for more free slots
	// before a receive, so receives carry several messages (20 ms; a
	// negative value does not wait).
	BatchWait time.Duration
	// DrainTimeout is how long Run waits for running tasks after its context
	// ends before it cancels them and hands them back to the queue (30 s).
	DrainTimeout time.Duration
	Backoff      map[task.Priority]config.Backoff // retry waits (config.DefaultBackoff)
	WorkerID     string                           // names this consumer in claims (host-random)
	Rand         *mrand.Rand                      // source for weighted picks and jitter
	Logger       *slog.Logger
	// Tracing starts a span per attempt, a child of the task's submit span
	// (tracing.Global()).
	Tracing *tracing.Provider
	// Gate, if set, is asked before each claim (pause, rate and concurrency controls).
	Gate Gate
	// Holds, if set with a Gate that is a Decider, sets aside the tasks the
	// gate refuses instead of hiding their messages (aside.go).
	Holds Holder
	// OrphanAfter is how long after its send a message may wait for its
	// task's record to appear (or to catch up with the message's version)
	// before it is moved to the DLQ as belonging to no task (1 min). A new
	// task's message is sent just before its record is written, so normally
	// the wait is milliseconds; a submit that failed or crashed in between
	// leaves a message that never finds its task.
	OrphanAfter time.Duration
	// MaxReceiveCount is the queues' redrive threshold. A message put off
	// (paused, throttled, busy) that has been received one time short of it
	// is replaced by a fresh copy, so waiting never sends a task to the DLQ.
	MaxReceiveCount int
	// Metrics, if set, is told what the consumer does (nil: nothing is
	// recorded). It must make no request of AWS.
	Metrics Metrics
	// Workers, if set, is the worker registry this consumer reports to
	// (workers.Registry): registered when Run starts, heartbeated every
	// WorkerHeartbeat with its capacity and busy slots, draining once Run's
	// context ends, removed when Run returns. A failed registry write is
	// logged; it never stops the consumer.
	Workers workers.Registrar
	// Kind names what runs this consumer in the registry
	// (triagetype.WorkerKind*; "worker" when empty).
	Kind string
	// WorkerHeartbeat is the registry heartbeat interval
	// (workers.DefaultHeartbeat, 10 s).
	WorkerHeartbeat time.Duration
	// UnhandledAfter is how long a task whose type this consumer has no
	// handler for is handed back while no live worker advertises the type,
	// before it is dead-lettered (config.DefaultUnhandledAfter). See
	// unhandled.go.
	UnhandledAfter time.Duration
}

// Gate decides whether a task may start now. When it may not, the message
// is hidden for the returned delay and tried again then. release is called
// when an admitted task ends.
type Gate interface {
	Admit(ctx context.Context, t *task.Task) (release func(), delay time.Duration, err error)
}

func (o *Options) defaults() {
	if o.Weights == nil {
		o.Weights = config.DefaultWeights()
	}
	if o.Concurrency <= 0 {
		o.Concurrency = config.DefaultConcurrency
	}
	if o.ReservedHigh >= o.Concurrency {
		o.ReservedHigh = o.Concurrency - 1
	}
	if o.PollWait <= 0 {
		o.PollWait = config.DefaultPollWait
	}
	if o.EmptyBackoff <= 0 {
		o.EmptyBackoff = 200 * time.Millisecond
	}
	if o.Lease <= 0 {
		o.Lease = config.DefaultLease
	}
	if o.CancelCheck == 0 {
		o.CancelCheck = time.Second
	}
	if o.ProgressInterval <= 0 {
		o.ProgressInterval = task.ProgressInterval
	}
	if o.LeaseMargin <= 0 {
		o.LeaseMargin = min(5*time.Second, o.Lease/4)
	}
	if o.BatchWait == 0 {
		o.BatchWait = 20 * time.Millisecond
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = 30 * time.Second
	}
	if o.Backoff == nil {
		o.Backoff = config.DefaultBackoff()
	}
	if o.OrphanAfter <= 0 {
		o.OrphanAfter = time.Minute
	}
	if o.UnhandledAfter <= 0 {
		o.UnhandledAfter = config.DefaultUnhandledAfter
	}
	if o.WorkerID == "" {
		o.WorkerID = NewWorkerID()
	}
	if o.Rand == nil {
		o.Rand = mrand.New(mrand.NewPCG(mrand.Uint64(), mrand.Uint64()))
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Tracing == nil {
		o.Tracing = tracing.Global()
	}
}

// NewWorkerID returns "<hostname>-<random>", unique per consumer instance.
func NewWorkerID() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return host + "-" + hex.EncodeToString(b)
}

// Consumer polls, claims and runs tasks.
type Consumer struct {
	store    Store
	queues   Queues
	redisp   Redispatcher
	handlers Handlers
	opt      Options
	log      *slog.Logger
	tracer   trace.Tracer
	slots    *slots
	del      *deleter

	rngMu  sync.Mutex
	picker picker

	counts counters
	mx     Metrics

	unhandled typeDirectoryCache // the registry's advertised types (unhandled.go)
	asideState

	emptyMu    sync.Mutex
	emptyUntil map[task.Priority]time.Time
	polling    map[task.Priority]bool // queues with an idle long-poll under way
	pollNews   chan struct{}          // an idle long-poll ended
}

// New returns a consumer.
func New(s Store, q Queues, r Redispatcher, h Handlers, opt Options) *Consumer {
	opt.defaults()
	c := &Consumer{
		store: s, queues: q, redisp: r, handlers: h, opt: opt, log: opt.Logger, tracer: opt.Tracing.Tracer(),
		slots:      newSlots(opt.Concurrency, opt.ReservedHigh),
		emptyUntil: map[task.Priority]time.Time{},
		polling:    map[task.Priority]bool{},
		pollNews:   make(chan struct{}, 8),
	}
	c.picker = picker{weights: opt.Weights, strict: opt.Strict != nil && *opt.Strict, rng: opt.Rand}
	c.del = newDeleter(q, c.log)
	c.mx = opt.Metrics
	if c.mx == nil {
		c.mx = noMetrics{}
	}
	c.reportSlots()
	return c
}

// Counts are what a consumer did with the messages it did not run.
type Counts struct {
	Stale  int64 // copies whose task has moved on (promoted, retried, finished): deleted
	NoTask int64 // messages whose task never appeared: moved to the DLQ
	Ahead  int64 // messages with a version no write of their task will reach: moved to the DLQ
	Poison int64 // every message moved to the DLQ as unusable (NoTask and Ahead included)
	// HandedBack counts running tasks returned to their queue at shutdown.
	HandedBack int64
}

type counters struct{ stale, noTask, ahead, poison, handedBack atomic.Int64 }

// Counts returns the consumer's message counts so far.
func (c *Consumer) Counts() Counts {
	return Counts{Stale: c.counts.stale.Load(), NoTask: c.counts.noTask.Load(), Ahead: c.counts.ahead.Load(), Poison: c.counts.poison.Load(), HandedBack: c.counts.handedBack.Load()}
}

// WorkerID names this consumer in the claims it makes.
func (c *Consumer) WorkerID() string { return c.opt.WorkerID }

// Run polls until ctx ends, then stops receiving and waits up to
// DrainTimeout for running tasks. Tasks still running then are cancelled
// and handed back to their queue, with the attempt counted. Run returns
// once every task it started has been recorded.
func (c *Consumer) Run(ctx context.Context) error {
	work, stopWork := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopWork(nil)
	delCtx, stopDel := context.WithCancel(context.WithoutCancel(ctx))
	delDone := make(chan struct{})
	go func() { c.del.run(delCtx); close(delDone) }()

	beacon := c.announce(ctx)
	defer beacon.Stop()

	var wg sync.WaitGroup
	for ctx.Err() == nil {
		c.pollOnce(ctx, work, &wg)
	}
	beacon.Drain()

	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(c.opt.DrainTimeout):
		stopWork(errShutdown)
		<-done
	}
	stopDel()
	<-delDone
	return nil
}

// pollOnce waits for a free slot, receives from one queue and starts what it got.
func (c *Consumer) pollOnce(ctx, work context.Context, wg *sync.WaitGroup) {
	gen, res, released := c.slots.free()
	if gen+res == 0 {
		select {
		case <-released:
		case <-ctx.Done():
		}
		return
	}
	if c.globallyPaused(ctx) {
		// Everything is paused: receive nothing until it is not.
		c.waits.pausedSleeps.Add(1)
		sleep(ctx, pausedPoll)
		return
	}
	if want := min(queue.MaxBatch, c.opt.Concurrency); gen+res < want {
		// Busy: give running tasks a moment to free more slots, so one
		// receive fetches several messages instead of one.
		gen, res = c.waitForSlots(ctx, want, c.opt.BatchWait)
	}
	eligible := task.Priorities()
	if gen == 0 {
		eligible = []task.Priority{task.High}
	}
	cands := c.nonEmpty(eligible)
	if len(cands) == 0 {
		c.idlePoll(ctx, work, wg, eligible)
		return
	}
	c.rngMu.Lock()
	p := c.picker.pick(cands)
	c.rngMu.Unlock()
	n := gen
	if p == task.High {
		n += res
	}
	msgs, err := c.receive(ctx, p, min(n, queue.MaxBatch), 0)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("receive failed", "priority", p, "error", err)
			sleep(ctx, time.Second)
		}
		return
	}
	if len(msgs) == 0 {
		c.markEmpty(p)
		return
	}
	c.start(ctx, work, wg, msgs)
}

// waitForSlots waits up to d for at least want free slots and returns the
// free counts then.
func (c *Consumer) waitForSlots(ctx context.Context, want int, d time.Duration) (gen, res int) {
	if d <= 0 {
		gen, res, _ = c.slots.free()
		return gen, res
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		g, r, released := c.slots.free()
		if g+r >= want {
			return g, r
		}
		select {
		case <-released:
		case <-timer.C:
			return g, r
		case <-ctx.Done():
			return g, r
		}
	}
}

// idlePoll long-polls every eligible queue at once, one message each, so a
// new task on any queue starts within one round trip. Each poller starts
// what it receives itself (a message beyond the free slots is handed back
// at once); idlePoll returns at the first poller's news, and a queue that is
// still being long-polled is not polled twice.
func (c *Consumer) idlePoll(ctx, work context.Context, wg *sync.WaitGroup, eligible []task.Priority) {
	_, _, released := c.slots.free()
	for _, p := range eligible {
		if !c.beginPoll(p) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.endPoll(p)
			msgs, err := c.receive(ctx, p, 1, c.opt.PollWait)
			switch {
			case err != nil:
				if ctx.Err() == nil {
					c.log.Warn("receive failed", "priority", p, "error", err)
					sleep(ctx, time.Second)
				}
			case len(msgs) == 0:
				c.markEmpty(p)
			default:
				c.clearEmpty(p)
				c.start(ctx, work, wg, msgs)
			}
		}()
	}
	// Return at the first news: a poller finished, or a slot freed up (with
	// only reserved slots free, the loop was polling the high queue alone;
	// a general slot opens the other queues again).
	select {
	case <-c.pollNews:
	case <-released:
	case <-ctx.Done():
	}
}

func (c *Consumer) beginPoll(p task.Priority) bool {
	c.emptyMu.Lock()
	defer c.emptyMu.Unlock()
	if c.polling[p] {
		return false
	}
	c.polling[p] = true
	return true
}

func (c *Consumer) endPoll(p task.Priority) {
	c.emptyMu.Lock()
	delete(c.polling, p)
	c.emptyMu.Unlock()
	select {
	case c.pollNews <- struct{}{}:
	default:
	}
}

// receive reads up to n messages from p's queue, long-polling up to wait.
// A shutdown does not cut the request short: a receive cancelled in flight
// may have taken messages whose answer is then lost, hiding them for the
// whole visibility timeout. It runs to its end instead (wait is at most
// SQS's 20 s; PollWait, 1 s by default), and start makes what it brought
// visible again at once.
func (c *Consumer) receive(ctx context.Context, p task.Priority, n int, wait time.Duration) ([]queue.Received, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait+receiveSlack)
	defer cancel()
	c.waits.receives.Add(1)
	msgs, err := c.queues.Receive(rctx, p, n, wait, c.lease().receiveVisibility())
	c.waits.received.Add(int64(len(msgs)))
	return msgs, err
}

// receiveSlack bounds a receive beyond its long-poll wait.
const receiveSlack = 10 * time.Second

// start takes a slot for each message and processes it in its own
// goroutine; a message with no slot left, or received as the consumer
// stops, is made visible again at once.
func (c *Consumer) start(ctx, work context.Context, wg *sync.WaitGroup, msgs []queue.Received) {
	for _, m := range msgs {
		if ctx.Err() != nil {
			if err := c.queues.ChangeVisibility(context.WithoutCancel(ctx), m.Priority, m.ReceiptHandle, 0); err != nil {
				c.log.Warn("release message", "priority", m.Priority, "error", err)
			}
			continue
		}
		kind, ok := c.slots.take(m.Priority)
		if !ok {
			if err := c.queues.ChangeVisibility(context.WithoutCancel(ctx), m.Priority, m.ReceiptHandle, 0); err != nil {
				c.log.Warn("release message", "priority", m.Priority, "error", err)
			}
			continue
		}
		c.reportSlots()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.reportSlots()
			defer c.slots.release(kind)
			c.process(work, m)
		}()
	}
}

func (c *Consumer) nonEmpty(eligible []task.Priority) []task.Priority {
	c.emptyMu.Lock()
	defer c.emptyMu.Unlock()
	now := time.Now()
	var out []task.Priority
	for _, p := range eligible {
		if now.After(c.emptyUntil[p]) {
			out = append(out, p)
		}
	}
	return out
}

func (c *Consumer) markEmpty(p task.Priority) {
	c.emptyMu.Lock()
	c.emptyUntil[p] = time.Now().Add(c.opt.EmptyBackoff)
	c.emptyMu.Unlock()
}

func (c *Consumer) clearEmpty(p task.Priority) {
	c.emptyMu.Lock()
	delete(c.emptyUntil, p)
	c.emptyMu.Unlock()
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

var (
	errShutdown        = errors.New("consumer shutting down")
	errCancelRequested = errors.New("cancel requested")
	errLeaseLost       = errors.New("lease lost to another worker")
)
