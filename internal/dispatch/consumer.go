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
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/internal/tracing"
	"github.com/triagehq/triage/internal/workers"
	"github.com/triagehq/triage/triageconfig"
	"github.com/triagehq/triage/triagetype"
	"go.opentelemetry.io/otel/trace"
)

// Store is the part of the task store the consumer uses.
type Store interface {
	Get(ctx context.Context, id string) (*task.Task, error)
	Create(ctx context.Context, t *task.Task) (*task.Task, bool, error)
	Transition(ctx context.Context, cur *task.Task, to triagetype.Status, apply func(*task.Task)) (*task.Task, error)
	Claim(ctx context.Context, c store.Claim) (*task.Task, error)
	Touch(ctx context.Context, cur *task.Task, apply func(*task.Task)) (*task.Task, error)
	CancelRequested(ctx context.Context, id string) (bool, error)
	Payload(ctx context.Context, t *task.Task) (json.RawMessage, error)
	DropPayload(ctx context.Context, id string)
	Now() time.Time
}

// Queues is the part of the SQS queues the consumer uses.
type Queues interface {
	Receive(ctx context.Context, p triagetype.Priority, n int, wait, visibility time.Duration) ([]queue.Received, error)
	DeleteBatch(ctx context.Context, p triagetype.Priority, receipts []string) error
	ChangeVisibility(ctx context.Context, p triagetype.Priority, receipt string, d time.Duration) error
	Send(ctx context.Context, p triagetype.Priority, body string, delay time.Duration) (string, error)
	Replace(ctx context.Context, m queue.Received, body string, delay time.Duration) error
	SendDLQ(ctx context.Context, p triagetype.Priority, body, reason string) error
}

// Redispatcher sends a task a fresh message when its own is gone.
type Redispatcher interface {
	Redispatch(ctx context.Context, cur *task.Task, to triagetype.Status, p triagetype.Priority, delay time.Duration, apply func(*task.Task)) (*task.Task, error)
}

// Handlers finds the handler of a task type.
type Handlers interface {
	Lookup(typ string) (handler.Handler, error)
}

// Options are a consumer's settings. Those a deployment sets are one
// projection of triageconfig.Config, made by OptionsFrom: that function
// and Config.WithDefaults are the one place every setting gets its
// default. The rest tune the consumer itself (and tests); OptionsFrom
// gives them their defaults too, in parentheses below. What a consumer
// talks to is in Deps.
type Options struct {
	Weights      map[triagetype.Priority]int // shares of weighted polling (Config.Weights)
	Strict       *bool                       // always take the highest non-empty queue (Config.Strict; nil in an overlay: the base's)
	Concurrency  int                         // tasks run at once (Config.Concurrency)
	ReservedHigh int                         // of those, slots only high tasks may use (Config.ReservedHigh; Off is 0 here)
	// PollWait is the long-poll wait used when every queue looked empty
	// (Config.PollWait).
	PollWait time.Duration
	// EmptyBackoff is how long a queue that returned nothing is skipped
	// (200 ms); medium and low are skipped twice as long for each empty
	// receive in a row, up to eight times as long. It bounds how late a busy
	// consumer notices new work on a queue it found empty: EmptyBackoff
	// for high, which is instead long-polled while reserved slots are free
	// (it notices at once then), and the longer bound for medium and low
	// (low's wait is bounded by aging anyway). The cost is one receive per
	// empty queue per backoff while busy.
	EmptyBackoff time.Duration
	// Lease is how long a claim holds a task before it must be renewed by a
	// heartbeat (Config.Lease, or the task timeout if shorter); heartbeats
	// come every Lease/3. It bounds crash recovery: the message of a task
	// whose worker died becomes visible again at most Lease + 2×LeaseMargin
	// after the worker's last heartbeat, and the next receive reclaims it.
	Lease time.Duration
	// LeaseMargin is the slack on leases and visibility (0: derived from
	// Lease by New, 5 s or Lease/4 if shorter).
	LeaseMargin time.Duration
	// CancelCheck is how often a running task's cancel request is looked
	// for, between heartbeats (1 s; a negative value leaves it to the
	// heartbeat). Each check is one eventually consistent read of the
	// task's cancel flag, made only while the task runs.
	CancelCheck time.Duration
	// ProgressInterval is the least time between two writes of a running
	// task that carry its handler's progress reports (task.ProgressInterval);
	// heartbeats carry them too. See Consumer.heartbeat.
	ProgressInterval time.Duration
	// APIURL is the API's base address (Config.APIURL), from which each
	// attempt's progress_url is made for external handlers ("": none is
	// given; they still get the token).
	APIURL string
	// BatchWait is how long a busy consumer waits for more free slots
	// before a receive, so receives carry several messages (20 ms; a
	// negative value does not wait).
	BatchWait time.Duration
	// MaxBatchWait bounds how long a busy consumer waits for free slots
	// when the slots' turnover says the batch needs longer than BatchWait
	// (200 ms): under load, receives carry as many messages as slots
	// freed meanwhile, at most this much later, and never more than the
	// slots free when they are made.
	MaxBatchWait time.Duration
	// DrainTimeout is how long Run waits for running tasks after its context
	// ends before it cancels them and hands them back to the queue (30 s).
	DrainTimeout time.Duration
	Backoff      map[triagetype.Priority]triageconfig.Backoff // retry waits (Config.RetryBackoff)
	// OrphanAfter is how long after its send a message may wait for its
	// task's record to appear (or to catch up with the message's version)
	// before it is moved to the DLQ as belonging to no task (1 min). A new
	// task's message is sent just before its record is written, so normally
	// the wait is milliseconds; a submit that failed or crashed in between
	// leaves a message that never finds its task.
	OrphanAfter time.Duration
	// MaxReceiveCount is the queues' redrive threshold (the spec's). A
	// message put off (paused, throttled, busy) that has been received one
	// time short of it is replaced by a fresh copy, so waiting never sends
	// a task to the DLQ.
	MaxReceiveCount int
	// IdleStop bounds how long an event-started run (RunEvent) keeps
	// polling once no task runs and no receive brings a message (250 ms).
	// Such a run, which never long-polls (pollOnce), returns as soon as
	// nothing runs and every queue's last receive in it came back empty,
	// and otherwise (a queue paused or set aside, so not probed) once idle
	// for IdleStop. An invocation is billed by the millisecond
	// (0.5 GB-s a second at 512 MB, $6.7 a million seconds) while the
	// queues' own pollers start a new one for the next message ($0.20 a
	// million): for sparse traffic a short tail is the cheaper side, and
	// busy traffic never idles.
	IdleStop time.Duration
	// WorkerHeartbeat is the registry heartbeat interval
	// (workers.DefaultHeartbeat, 10 s).
	WorkerHeartbeat time.Duration
	// UnhandledAfter is how long a task whose type this consumer has no
	// handler for is handed back while no live worker advertises the type,
	// before it is dead-lettered (Config.UnhandledAfter). See unhandled.go.
	UnhandledAfter time.Duration
}

// OptionsFrom is a consumer's settings for the deployment cfg describes:
// its part of cfg (after WithDefaults) and every other setting at its
// default.
func OptionsFrom(cfg triageconfig.Config) Options {
	cfg = cfg.WithDefaults()
	o := Options{
		Weights:          cfg.Weights,
		Strict:           new(cfg.Strict),
		Concurrency:      cfg.Concurrency,
		ReservedHigh:     max(cfg.ReservedHigh, 0), // Off: none
		PollWait:         cfg.PollWait,
		EmptyBackoff:     200 * time.Millisecond,
		Lease:            cfg.Lease,
		CancelCheck:      time.Second,
		ProgressInterval: task.ProgressInterval,
		APIURL:           cfg.APIURL,
		BatchWait:        20 * time.Millisecond,
		MaxBatchWait:     200 * time.Millisecond,
		DrainTimeout:     30 * time.Second,
		Backoff:          cfg.RetryBackoff,
		OrphanAfter:      time.Minute,
		IdleStop:         250 * time.Millisecond,
		UnhandledAfter:   cfg.UnhandledAfter,
	}
	if q, ok := spec.Of(cfg.Prefix, cfg.Table, cfg.Bucket).Queue(triagetype.High); ok {
		o.MaxReceiveCount = q.MaxReceiveCount
	}
	return o
}

// Over returns o with every setting it leaves zero (nil, for Strict and
// the maps) taken from base: a caller's few choices over OptionsFrom's.
// ReservedHigh goes with Concurrency, since it only means something beside
// it: an o that sets Concurrency and not ReservedHigh reserves none.
func (o Options) Over(base Options) Options {
	noReserved := o.Concurrency != 0 && o.ReservedHigh == 0
	ov, bv := reflect.ValueOf(&o).Elem(), reflect.ValueOf(base)
	for i := range ov.NumField() {
		if f := ov.Field(i); f.IsZero() {
			f.Set(bv.Field(i))
		}
	}
	if noReserved {
		o.ReservedHigh = 0
	}
	return o
}

// Deps are what a consumer is and talks to, beside its store, queues and
// handlers. Zero values get the defaults in parentheses.
type Deps struct {
	WorkerID string       // names this consumer in claims (NewWorkerID)
	Rand     *mrand.Rand  // source for weighted picks and jitter (seeded randomly)
	Logger   *slog.Logger // (none)
	// Tracing starts a span per attempt, a child of the task's submit span
	// (tracing.Global()).
	Tracing *tracing.Provider
	// Gate, if set, is asked before each claim (pause, rate and concurrency controls).
	Gate Gate
	// Holds, if set with a Gate that is a Decider, sets aside the tasks the
	// gate refuses instead of hiding their messages (aside.go).
	Holds Holder
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
}

// options is what a Consumer reads: its settings and its dependencies,
// one struct so each is c.opt.Name.
type options struct {
	Options
	Deps
}

// Gate decides whether a task may start now. When it may not, the message
// is hidden for the returned delay and tried again then. release is called
// when an admitted task ends.
type Gate interface {
	Admit(ctx context.Context, t *task.Task) (release func(), delay time.Duration, err error)
}

// resolve fills what New derives: settings o leaves zero from the default
// configuration's (OptionsFrom; a caller with a configuration passes
// o.Over(OptionsFrom(cfg))), the lease margin from the lease, and the
// dependencies' defaults. ReservedHigh is kept below Concurrency.
func resolve(o Options, d Deps) options {
	o = o.Over(OptionsFrom(triageconfig.Config{}))
	if o.ReservedHigh >= o.Concurrency {
		o.ReservedHigh = o.Concurrency - 1
	}
	if o.LeaseMargin <= 0 {
		o.LeaseMargin = min(5*time.Second, o.Lease/4)
	}
	if d.WorkerID == "" {
		d.WorkerID = NewWorkerID()
	}
	if d.Rand == nil {
		d.Rand = mrand.New(mrand.NewPCG(mrand.Uint64(), mrand.Uint64()))
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Tracing == nil {
		d.Tracing = tracing.Global()
	}
	return options{o, d}
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
	opt      options
	log      *slog.Logger
	tracer   trace.Tracer
	slots    *slots
	keyUse   *keyUse // running tasks per key, for heartbeats (keyuse.go)
	del      *deleter

	rngMu  sync.Mutex
	picker picker

	counts counters
	mx     Metrics

	unhandled typeDirectoryCache // the registry's advertised types (unhandled.go)
	parents   completedParents   // parents seen completed, for release messages (released.go)
	asideState

	emptyMu    sync.Mutex
	emptyUntil map[triagetype.Priority]time.Time
	emptyRun   map[triagetype.Priority]int  // empty receives in a row
	polling    map[triagetype.Priority]bool // queues with an idle long-poll under way
	pollNews   chan struct{}                // an idle long-poll ended
}

// New returns a consumer.
func New(s Store, q Queues, r Redispatcher, h Handlers, o Options, d Deps) *Consumer {
	opt := resolve(o, d)
	c := &Consumer{
		store: s, queues: q, redisp: r, handlers: h, opt: opt, log: opt.Logger, tracer: opt.Tracing.Tracer(),
		slots:      newSlots(opt.Concurrency, opt.ReservedHigh),
		keyUse:     newKeyUse(),
		emptyUntil: map[triagetype.Priority]time.Time{},
		emptyRun:   map[triagetype.Priority]int{},
		polling:    map[triagetype.Priority]bool{},
		pollNews:   make(chan struct{}, 8),
	}
	c.picker = picker{weights: opt.Weights, strict: opt.Strict != nil && *opt.Strict, rng: opt.Rand}
	c.del = newDeleter(q, c.log, deleteHold(opt.LeaseMargin))
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
	c.run(ctx, nil, 0)
	return nil
}

// RunEvent runs the messages an SQS event source handed to one invocation
// (msgs, each received from its priority's queue, with a receipt handle
// that Delete and ChangeVisibility accept) through the same claim, lease
// and outcome path as Run, then polls all three queues as Run does while
// there is work. It stops polling once nothing runs and every queue's
// last receive came back empty, or no receive has brought a message for
// IdleStop, or when ctx ends, then drains as Run does, so it never
// returns with a claimed task.
//
// It returns the messages of msgs the consumer did not delete: handed
// back, put off, retrying, or whose delete failed. They must live on, so
// an event source must not delete them (for Lambda, they are the batch
// item failures); every other message of msgs the consumer deleted
// itself. One Consumer runs one Run or RunEvent at a time, as a Lambda
// environment runs one invocation at a time.
func (c *Consumer) RunEvent(ctx context.Context, msgs []queue.Received) []queue.Received {
	receipts := make([]string, len(msgs))
	for i, m := range msgs {
		receipts[i] = m.ReceiptHandle
	}
	c.del.watch(receipts)
	c.run(ctx, msgs, c.opt.IdleStop)
	deleted := c.del.unwatch()
	var kept []queue.Received
	for _, m := range msgs {
		if !deleted[m.ReceiptHandle] {
			kept = append(kept, m)
		}
	}
	return kept
}

// run starts first, then polls until ctx ends or, when idleStop is
// positive (an event-started run), until nothing runs and every queue was
// found empty, or the consumer has been idle that long (no task running,
// no message received); then it drains: running tasks get DrainTimeout,
// then are cancelled and handed back. It returns once every task it started
// has been recorded and every delete it asked for has been sent.
func (c *Consumer) run(ctx context.Context, first []queue.Received, idleStop time.Duration) {
	pollCtx, stopPolling := context.WithCancel(ctx)
	defer stopPolling()
	work, stopWork := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopWork(nil)
	delCtx, stopDel := context.WithCancel(context.WithoutCancel(ctx))
	delDone := make(chan struct{})
	go func() { c.del.run(delCtx); close(delDone) }()

	event := idleStop > 0 // an invocation, started by its queues
	var registerAfter time.Duration
	if event { // sparse traffic leaves no registry trace
		registerAfter = eventRegisterAfter
		// A new invocation knows nothing of the queues yet: what an
		// earlier one found empty is no news of them now.
		for _, p := range triagetype.Priorities() {
			c.clearEmpty(p)
		}
	}
	beacon := c.announce(ctx, registerAfter)
	defer beacon.Stop()

	var wg sync.WaitGroup
	c.start(pollCtx, work, &wg, first)
	idle := idleClock{since: time.Now(), received: c.waits.received.Load()}
	for pollCtx.Err() == nil {
		if event {
			busy := c.busy()
			if busy == 0 && c.allFoundEmpty() {
				// Nothing runs and every queue's last receive in this
				// invocation came back empty: return now. Held, the
				// invocation would be billed by the second (0.5 GB-s at
				// 512 MB) for work the queues' own pollers start a new
				// invocation for anyway.
				break
			}
			if idle.idleFor(time.Now(), busy, c.waits.received.Load()) >= idleStop {
				break // idle, though not every queue was probed (paused, set aside)
			}
		}
		c.pollOnce(pollCtx, work, &wg, event)
	}
	stopPolling() // an idle long-poll still in flight hands back what it brings
	if c.busy() > 0 {
		// Say draining while tasks finish; with none running, the
		// deregistration below follows at once and says it all.
		beacon.Drain()
	}

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
}

// idleClock tells how long a consumer has been idle: since the last look
// that saw a task running or a message received since the look before.
type idleClock struct {
	since    time.Time
	received int64 // messages received as of the last look
}

// idleFor looks at the consumer now, with busy slots running tasks and
// received messages received so far, and returns how long it has been idle.
func (k *idleClock) idleFor(now time.Time, busy int, received int64) time.Duration {
	if busy > 0 || received != k.received {
		k.since, k.received = now, received
	}
	return now.Sub(k.since)
}

// pollOnce waits for a free slot, receives from one queue and starts what
// it got.
//
// An event-started run (event) never long-polls: a long poll runs to its
// end (see receive), so one under way when the last task finishes would
// keep the invocation, billed, for up to PollWait. It probes instead
// (high at most once a PollWait, medium and low on their empty backoff)
// and, with every queue found empty, waits for a slot to free or PollWait
// before it probes again; so the moment its last task ends it can see
// every queue empty and return. New work on a queue meanwhile starts at
// once all the same: the queue's own pollers invoke the function for it.
func (c *Consumer) pollOnce(ctx, work context.Context, wg *sync.WaitGroup, event bool) {
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
	if want := min(queue.MaxBatch, c.opt.Concurrency-c.opt.ReservedHigh); gen > 0 && gen < want {
		// Busy: give running tasks time to free more general slots, so one
		// receive fetches a full batch instead of a few messages. Slots
		// free at random, so the wait is twice what the slots' turnover
		// says want slots take (at least BatchWait, at most MaxBatchWait);
		// it ends as soon as they are free. Reserved slots do not count:
		// they run high work only, so a batch for medium or low must fit
		// the general ones. It never asks for more messages than there
		// are free slots: a message received is claimed at once, in the
		// order the weighted pick and the keys' fair windows decided,
		// never held here behind a local backlog. With only reserved
		// slots free nothing waits: the high queue alone is polled for
		// them, so high work is not held back by the batching.
		wait := c.opt.BatchWait
		if wait >= 0 {
			wait = max(wait, min(2*c.slots.turnover(want), c.opt.MaxBatchWait))
		}
		gen, res = c.waitForSlots(ctx, want, wait)
	}
	eligible := triagetype.Priorities()
	if gen == 0 {
		eligible = []triagetype.Priority{triagetype.High}
	}
	cands := c.nonEmpty(eligible)
	if res > 0 && c.foundEmpty(triagetype.High) && !event {
		// High was found empty: long-poll it for the reserved slots and
		// its share of the general ones instead of probing it, so new
		// high work starts at once and the high queue costs one receive
		// per PollWait, not one per EmptyBackoff.
		cands = slices.DeleteFunc(cands, func(p triagetype.Priority) bool { return p == triagetype.High })
		if len(cands) > 0 {
			c.longPoll(ctx, work, wg, triagetype.High, res+gen/len(eligible))
		}
	}
	if len(cands) == 0 {
		if event {
			wait := c.opt.PollWait
			if c.busy() == 0 { // the run ends at IdleStop: look by then
				wait = min(wait, max(c.opt.IdleStop, c.opt.EmptyBackoff))
			}
			timer := time.NewTimer(wait)
			defer timer.Stop()
			select {
			case <-released:
			case <-timer.C:
			case <-ctx.Done():
			}
			return
		}
		c.idlePoll(ctx, work, wg, eligible)
		return
	}
	c.rngMu.Lock()
	p := c.picker.pick(cands)
	c.rngMu.Unlock()
	n := gen
	if p == triagetype.High {
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
		c.markEmpty(p, event)
		return
	}
	c.clearEmpty(p)
	c.start(ctx, work, wg, msgs)
}

// waitForSlots waits up to d for at least want free general slots and
// returns the free counts then.
func (c *Consumer) waitForSlots(ctx context.Context, want int, d time.Duration) (gen, res int) {
	if d <= 0 {
		gen, res, _ = c.slots.free()
		return gen, res
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		g, r, released := c.slots.free()
		if g >= want {
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

// idlePoll long-polls every eligible queue at once, each for its share of
// the free slots, so a new task on any queue starts within one round trip
// and a burst comes in batches. Each poller starts what it receives itself
// (a message beyond the free slots, if slots were taken meanwhile, is
// handed back at once); idlePoll returns at the first poller's news, and a
// queue that is still being long-polled is not polled twice.
func (c *Consumer) idlePoll(ctx, work context.Context, wg *sync.WaitGroup, eligible []triagetype.Priority) {
	gen, res, released := c.slots.free()
	// Each poller asks for its share of the free general slots (at least
	// one; high adds the reserved ones), so together they ask for no more
	// than is free now.
	share := max(1, gen/len(eligible))
	aside := false
	for _, p := range eligible {
		if c.unhandled.asideFrom(p, time.Now()) { // unhandled.go: handBackAside
			aside = true
			continue
		}
		n := share
		if p == triagetype.High {
			n += res
		}
		c.longPoll(ctx, work, wg, p, n)
	}
	if aside && !c.pollingAny() {
		// Every queue not polled is left to other workers for a moment,
		// and no poller will bring news: look again shortly.
		sleep(ctx, c.opt.EmptyBackoff)
		return
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

// longPoll starts a long-poll of p for up to n messages, PollWait long,
// unless one is under way; the poller starts what it receives itself and
// tells pollNews when it ends.
func (c *Consumer) longPoll(ctx, work context.Context, wg *sync.WaitGroup, p triagetype.Priority, n int) {
	if !c.beginPoll(p) {
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer c.endPoll(p)
		msgs, err := c.receive(ctx, p, min(n, queue.MaxBatch), c.opt.PollWait)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				c.log.Warn("receive failed", "priority", p, "error", err)
				sleep(ctx, time.Second)
			}
		case len(msgs) == 0:
			c.markEmpty(p, false)
		default:
			c.clearEmpty(p)
			c.start(ctx, work, wg, msgs)
		}
	}()
}

func (c *Consumer) beginPoll(p triagetype.Priority) bool {
	c.emptyMu.Lock()
	defer c.emptyMu.Unlock()
	if c.polling[p] {
		return false
	}
	c.polling[p] = true
	return true
}

// pollingAny reports whether an idle long-poll is under way.
func (c *Consumer) pollingAny() bool {
	c.emptyMu.Lock()
	defer c.emptyMu.Unlock()
	return len(c.polling) > 0
}

func (c *Consumer) endPoll(p triagetype.Priority) {
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
func (c *Consumer) receive(ctx context.Context, p triagetype.Priority, n int, wait time.Duration) ([]queue.Received, error) {
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
			c.release(ctx, m)
			continue
		}
		kind, ok := c.slots.take(m.Priority)
		if !ok {
			c.release(ctx, m)
			continue
		}
		c.reportSlots()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.reportSlots()
			taken := time.Now()
			defer func() { c.slots.release(kind, time.Since(taken)) }()
			c.process(work, m)
		}()
	}
}

// release hands back a message this consumer will not start (no free
// slot, or it is stopping): visible again at once or, when it is one
// receive short of the redrive threshold, replaced by a fresh copy that
// keeps its origin (queue.Replace), so hand-backs alone never push a
// task's message to the DLQ, however many consumers pass it on.
func (c *Consumer) release(ctx context.Context, m queue.Received) {
	ctx = context.WithoutCancel(ctx)
	if c.lastReceive(m) {
		err := c.queues.Replace(ctx, m, m.Body, 0)
		if err == nil {
			c.del.add(m.Priority, m.ReceiptHandle)
			return
		}
		c.log.Warn("refresh of a handed-back message failed; releasing it instead", "priority", m.Priority, "error", err)
	}
	if err := c.queues.ChangeVisibility(ctx, m.Priority, m.ReceiptHandle, 0); err != nil {
		c.log.Warn("release message", "priority", m.Priority, "error", err)
	}
}

func (c *Consumer) nonEmpty(eligible []triagetype.Priority) []triagetype.Priority {
	c.emptyMu.Lock()
	defer c.emptyMu.Unlock()
	now := time.Now()
	var out []triagetype.Priority
	for _, p := range eligible {
		// A queue being long-polled is left to its poller, which brings
		// its messages as they come.
		if now.After(c.emptyUntil[p]) && !c.polling[p] && !c.unhandled.asideFrom(p, now) { // unhandled.go: handBackAside
			out = append(out, p)
		}
	}
	return out
}

// markEmpty skips p for EmptyBackoff after an empty receive; medium and
// low for twice as long after each further empty receive in a row, up to
// 2^maxEmptyDoublings times as long. High is not skipped longer: it is
// long-polled instead while reserved slots are free (pollOnce); in an
// event-started run (event), which long-polls nothing, it is skipped for
// PollWait, the long poll's one receive a PollWait.
func (c *Consumer) markEmpty(p triagetype.Priority, event bool) {
	c.emptyMu.Lock()
	defer c.emptyMu.Unlock()
	d := c.opt.EmptyBackoff
	switch {
	case p != triagetype.High:
		d <<= min(c.emptyRun[p], maxEmptyDoublings)
	case event:
		d = max(d, c.opt.PollWait)
	}
	c.emptyRun[p]++
	c.emptyUntil[p] = time.Now().Add(d)
}

// allFoundEmpty reports whether every queue's last receive brought
// nothing.
func (c *Consumer) allFoundEmpty() bool {
	c.emptyMu.Lock()
	defer c.emptyMu.Unlock()
	for _, p := range triagetype.Priorities() {
		if c.emptyRun[p] == 0 {
			return false
		}
	}
	return true
}

// foundEmpty reports whether p's last receive brought nothing.
func (c *Consumer) foundEmpty(p triagetype.Priority) bool {
	c.emptyMu.Lock()
	defer c.emptyMu.Unlock()
	return c.emptyRun[p] > 0
}

// maxEmptyDoublings bounds markEmpty's growth: 2³, eight times EmptyBackoff.
const maxEmptyDoublings = 3

func (c *Consumer) clearEmpty(p triagetype.Priority) {
	c.emptyMu.Lock()
	delete(c.emptyUntil, p)
	delete(c.emptyRun, p)
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
