package schedule

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
)

// Schedules is the part of the schedule store the ticker uses (*Store).
type Schedules interface {
	Due(ctx context.Context, shard int, now time.Time, after string, limit int32) ([]string, string, error)
	Get(ctx context.Context, name string) (*Stored, error)
	Advance(ctx context.Context, cur *Stored, last time.Time, lastTaskID string, next time.Time) error
	Start(ctx context.Context, cur *Stored, next time.Time) error
	Shards() int
}

// Tasks reads tasks (*store.Store).
type Tasks interface {
	Get(ctx context.Context, id string) (*task.Task, error)
}

// Enqueuer sends and records a new task (*enqueue.Enqueuer).
type Enqueuer interface {
	Submit(ctx context.Context, t *task.Task) (*task.Task, bool, error)
}

// Metrics counts ticks (*metrics.Recorder); it must make no request of AWS.
type Metrics interface {
	Ticked(outcome string, n int)
	Submitted(t *task.Task)
}

// Tick outcomes, the metric's label.
const (
	TickEnqueued = "enqueued" // a task was made for the tick
	TickSkipped  = "skipped"  // a missed tick the policy skipped
)

// Ticker enqueues the due ticks of every schedule: the promoter runs Tick
// once a run.
type Ticker struct {
	schedules Schedules
	tasks     Tasks
	enq       Enqueuer
	now       func() time.Time
	log       *slog.Logger
	mx        Metrics
	window    time.Duration
}

// TickerOptions tunes a Ticker; zero values take the defaults in parentheses.
type TickerOptions struct {
	// Now is the clock (time.Now); the promoter passes the task store's.
	Now    func() time.Time
	Logger *slog.Logger
	// Metrics, if set, counts ticks enqueued and skipped.
	Metrics Metrics
}

// NewTicker returns a ticker.
func NewTicker(s Schedules, t Tasks, enq Enqueuer, o TickerOptions) *Ticker {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Ticker{schedules: s, tasks: t, enq: enq, now: o.Now, log: o.Logger, mx: o.Metrics, window: queue.MaxDelay}
}

// Report counts what one Tick did.
type Report struct {
	Enqueued int // tasks made (ticks whose task already existed are not counted)
	Skipped  int // missed ticks skipped by policy
	Errors   int
}

// dueLimit bounds the due schedules read per shard and page.
const dueLimit = 100

// Tick handles every due schedule once. It keeps going past single
// failures, counts them, and returns them joined; a schedule that failed
// stays due and is handled by the next run. The shards are read at once,
// as the promoter's other sweeps read theirs, so a run's length does not
// grow with the shard count.
func (tk *Ticker) Tick(ctx context.Context) (Report, error) {
	var mu sync.Mutex // guards r and errs
	var r Report
	var errs []error
	fail := func(err error) {
		mu.Lock()
		r.Errors++
		errs = append(errs, err)
		mu.Unlock()
	}
	now := tk.now()
	var wg sync.WaitGroup
	for sh := range tk.schedules.Shards() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var sr Report
			after := ""
			for read := 0; read < MaxSchedules; {
				names, next, err := tk.schedules.Due(ctx, sh, now, after, dueLimit)
				if err != nil {
					fail(err)
					break
				}
				read += len(names)
				for _, n := range names {
					if err := tk.fire(ctx, n, now, &sr); err != nil {
						fail(err)
					}
				}
				if after = next; after == "" {
					break
				}
			}
			mu.Lock()
			r.Enqueued += sr.Enqueued
			r.Skipped += sr.Skipped
			mu.Unlock()
		}()
	}
	wg.Wait()
	return r, errors.Join(errs...)
}

// fire handles one due schedule: it enqueues the ticks its policy keeps,
// then advances it past now.
func (tk *Ticker) fire(ctx context.Context, name string, now time.Time, r *Report) error {
	sc, err := tk.schedules.Get(ctx, name)
	if errors.Is(err, ErrNotFound) {
		return nil // deleted since it was indexed
	}
	if err != nil {
		return err
	}
	if sc.Paused || sc.NextTick != nil && sc.NextTick.After(now) {
		return nil // paused, or advanced by another promoter since it was indexed
	}
	c, err := Parse(&sc.Schedule)
	if err != nil {
		return fmt.Errorf("schedule %s: stored expression: %w", name, err)
	}
	if sc.NextTick == nil {
		// Pending (written at deploy time): it starts at its first tick
		// after now.
		err := tk.schedules.Start(ctx, sc, c.Next(now).UTC())
		if errors.Is(err, ErrConflict) {
			return nil
		}
		return err
	}
	p := Plan(c, sc.Schedule, now)
	lastID := sc.LastTaskID
	for _, at := range p.Run {
		t, created, err := tk.enqueue(ctx, sc, at, now)
		if err != nil {
			return fmt.Errorf("schedule %s: tick %s: %w", name, at.Format(time.RFC3339), err)
		}
		lastID = t.ID
		if created {
			r.Enqueued++
			tk.count(TickEnqueued, 1)
			if tk.mx != nil {
				tk.mx.Submitted(t)
			}
			tk.log.Info("schedule ticked", "schedule", name, "tick", at, "task_id", t.ID, "type", t.Type, "late_ms", now.Sub(at).Milliseconds())
		}
	}
	if p.Skipped > 0 {
		tk.log.Warn("schedule missed ticks skipped", "schedule", name, "skipped", p.Skipped, "policy", sc.Missed)
	}
	last := p.Last
	err = tk.schedules.Advance(ctx, sc, last, lastID, p.Next)
	if errors.Is(err, ErrConflict) {
		return nil // another promoter advanced it, or it was edited: its tasks are the same ones
	}
	if err == nil && p.Skipped > 0 {
		// Counted once, by the promoter whose advance took: a skipped tick
		// leaves no task to deduplicate by.
		r.Skipped += p.Skipped
		tk.count(TickSkipped, p.Skipped)
	}
	return err
}

func (tk *Ticker) count(outcome string, n int) {
	if tk.mx != nil {
		tk.mx.Ticked(outcome, n)
	}
}

// enqueue makes tick at's task unless it exists already: the read first,
// so that a retried tick sends no second message; the conditional create
// then settles a race between two promoters (one task; the other's
// message is a duplicate delivery of the same task version, which the
// consumer runs once).
func (tk *Ticker) enqueue(ctx context.Context, sc *Stored, at, now time.Time) (*task.Task, bool, error) {
	id := TickID(sc.Name, at)
	if t, err := tk.tasks.Get(ctx, id); err == nil {
		return t, false, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, false, err
	}
	req := task.Request(sc.Task)
	t := req.NewTask(now.UTC(), tk.window)
	t.ID = id
	if sc.Task.TraceID == "" {
		t.TraceID = id
	}
	t.Schedule = sc.Name
	return tk.enq.Submit(ctx, t)
}

// TickID is the id of the task of schedule name's tick at: a ULID whose
// time is the tick's and whose randomness is a hash of the name and the
// tick, so every promoter makes the same id for the same tick. A schedule
// deleted and made again under the same name starts after the time it
// was made, so it never reuses an earlier tick's id.
func TickID(name string, at time.Time) string {
	h := sha256.Sum256([]byte(name + "\x00" + at.UTC().Format(time.RFC3339Nano)))
	var id ulid.ULID
	_ = id.SetTime(ulid.Timestamp(at))
	copy(id[6:], h[:10])
	return id.String()
}

// Ticks is what one run does with a due schedule.
type Ticks struct {
	Run     []time.Time // the ticks to enqueue, oldest first
	Skipped int         // missed ticks the policy skips
	Last    time.Time   // the newest tick at or before now
	Next    time.Time   // the first tick after now
}

// Plan decides a due schedule's ticks at now: every tick from its next
// tick to now is on time when at most Grace old, and otherwise missed.
// On-time ticks run; missed ones are skipped, or under catch_up the most
// recent CatchUpLimit of them run. Ticks older than Lookback are skipped
// unread.
func Plan(c *Cron, sc Schedule, now time.Time) Ticks {
	var p Ticks
	from := *sc.NextTick
	if floor := now.Add(-Lookback); from.Before(floor) {
		from = c.Next(floor)
		p.Skipped++ // at least one; the count of those before floor is not read
	}
	keep := 0
	if sc.Missed == MissedCatchUp {
		keep = sc.CatchUpLimit
	}
	var missed []time.Time // the newest keep missed ticks
	for at := from; !at.IsZero() && !at.After(now); at = c.Next(at) {
		p.Last = at
		if now.Sub(at) <= Grace {
			p.Run = append(p.Run, at)
			continue
		}
		if keep == 0 {
			p.Skipped++
			continue
		}
		if len(missed) == keep {
			missed = missed[1:]
			p.Skipped++
		}
		missed = append(missed, at)
	}
	p.Run = append(missed, p.Run...)
	if p.Last.IsZero() {
		p.Last = *sc.NextTick
	}
	p.Next = c.Next(now)
	return p
}
