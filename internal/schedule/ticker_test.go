package schedule_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/promote"
	"github.com/triagehq/triage/internal/schedule"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

func TestMain(m *testing.M) { stacktest.Main(m) }

// clock is a test clock shared by every promoter of a test.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Set(t time.Time)     { c.mu.Lock(); c.now = t; c.mu.Unlock() }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }
func newClock(t time.Time) *clock    { return &clock{now: t} }
func storeOn(a *app.App, c *clock) *schedule.Store {
	return schedule.NewStore(a.DynamoDB, a.Config.Table, a.Store.Shards(), c.Now)
}

// ticker is one promoter's ticker, on its own app (its own AWS clients),
// reading the test clock.
func ticker(a *app.App, c *clock, s schedule.Schedules) *schedule.Ticker {
	return schedule.NewTicker(s, a.Store, a.Enqueuer, schedule.TickerOptions{Now: c.Now, Logger: a.Log})
}

func create(t *testing.T, s *schedule.Store, sc schedule.Schedule) {
	t.Helper()
	c, err := schedule.Validate(&sc, task.KnownTypes{})
	if err != nil {
		t.Fatal(err)
	}
	if _, created, err := s.Put(context.Background(), sc, c); err != nil || !created {
		t.Fatalf("create schedule: created %v, %v", created, err)
	}
}

// tasksOf lists every task of type typ (the test's tasks are few).
func tasksOf(t *testing.T, a *app.App, typ string) []*task.Task {
	t.Helper()
	var all []*task.Task
	cursor := ""
	for {
		ts, next, err := a.Store.List(context.Background(), store.ListFilter{Type: typ}, 100, cursor)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, ts...)
		if cursor = next; cursor == "" {
			return all
		}
	}
}

// exactlyOnce fails unless the tasks of typ are exactly one per tick of
// want, each with its tick's id and the schedule's name.
func exactlyOnce(t *testing.T, a *app.App, typ, name string, want []time.Time) {
	t.Helper()
	got := tasksOf(t, a, typ)
	ids := map[string]bool{}
	for _, tk := range got {
		if ids[tk.ID] {
			t.Fatalf("task %s listed twice", tk.ID)
		}
		ids[tk.ID] = true
		if tk.Schedule != name {
			t.Errorf("task %s: schedule %q, want %q", tk.ID, tk.Schedule, name)
		}
	}
	for _, at := range want {
		if !ids[schedule.TickID(name, at)] {
			t.Errorf("no task for tick %s", at.Format(time.RFC3339))
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d tasks of %s, want %d (one per tick)", len(got), typ, len(want))
	}
}

// TestEveryMinuteTwoPromoters is the "Done when" case: a schedule every
// minute, two promoters (each its own app and clients) running at once
// against the DynamoDB emulator, a test clock stepping through five
// minutes, each step run twice by each promoter. Exactly one task per
// minute.
func TestEveryMinuteTwoPromoters(t *testing.T) {
	env := stacktest.New(t)
	a1, a2 := env.App(t, nil), env.App(t, nil)
	t0 := time.Now().UTC().Truncate(time.Minute).Add(20 * time.Second)
	clk := newClock(t0)
	create(t, storeOn(a1, clk), schedule.Schedule{Name: "every-minute", Cron: "* * * * *", Task: triagetype.SubmitRequest{Type: "tick"}})
	var promoters []*promote.Promoter
	for _, a := range []*app.App{a1, a2} {
		promoters = append(promoters, promote.New(a.Store, a.Enqueuer, a.Queues, promote.Options{Schedules: ticker(a, clk, storeOn(a, clk))}))
	}
	var want []time.Time
	ticked := 0
	for minute := 1; minute <= 5; minute++ {
		clk.Set(t0.Add(time.Duration(minute) * time.Minute))
		want = append(want, t0.Truncate(time.Minute).Add(time.Duration(minute)*time.Minute))
		var wg sync.WaitGroup
		var mu sync.Mutex
		for _, p := range append(promoters, promoters...) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := p.RunOnce(context.Background())
				if err != nil {
					t.Errorf("promoter run: %v", err)
				}
				mu.Lock()
				ticked += r.Ticked
				mu.Unlock()
			}()
		}
		wg.Wait()
		exactlyOnce(t, a1, "tick", "every-minute", want)
	}
	if ticked != 5 {
		t.Fatalf("promoters reported %d tasks made, want 5", ticked)
	}
	sc, err := storeOn(a1, newClock(time.Now())).Get(context.Background(), "every-minute")
	if err != nil {
		t.Fatal(err)
	}
	if !sc.LastTick.Equal(want[4]) || !sc.NextTick.Equal(want[4].Add(time.Minute)) || sc.LastTaskID != schedule.TickID("every-minute", want[4]) {
		t.Fatalf("schedule after five minutes: last %v next %v task %s", sc.LastTick, sc.NextTick, sc.LastTaskID)
	}
}

// TestTicksAcrossDST steps a test clock through DST changes with two
// tickers at once: every minute through New York's fall-back (each real
// minute once), a daily 01:30 through it (once, in the first pass), and a
// daily 02:30 through the spring-forward (once, at 03:30 EDT).
func TestTicksAcrossDST(t *testing.T) {
	env := stacktest.New(t)
	a1, a2 := env.App(t, nil), env.App(t, nil)
	utc := func(s string) time.Time { v, _ := time.Parse(time.RFC3339, s); return v }
	cases := []struct {
		name, cron string
		from, to   time.Time
		step       time.Duration
		want       []time.Time
	}{
		{"ny-every-minute", "* * * * *", utc("2026-11-01T05:57:30Z"), utc("2026-11-01T06:03:30Z"), time.Minute,
			[]time.Time{utc("2026-11-01T05:58:00Z"), utc("2026-11-01T05:59:00Z"), utc("2026-11-01T06:00:00Z"), utc("2026-11-01T06:01:00Z"), utc("2026-11-01T06:02:00Z"), utc("2026-11-01T06:03:00Z")}},
		{"ny-daily-0130", "30 1 * * *", utc("2026-11-01T04:50:00Z"), utc("2026-11-01T07:20:00Z"), 10 * time.Minute,
			[]time.Time{utc("2026-11-01T05:30:00Z")}}, // 01:30 EDT; 01:30 EST (06:30Z) does not run
		{"ny-daily-0230", "30 2 * * *", utc("2026-03-08T06:40:00Z"), utc("2026-03-08T08:40:00Z"), 10 * time.Minute,
			[]time.Time{utc("2026-03-08T07:30:00Z")}}, // 02:30 does not exist: 03:30 EDT
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock(tc.from)
			create(t, storeOn(a1, clk), schedule.Schedule{Name: tc.name, Cron: tc.cron, Timezone: "America/New_York", Task: triagetype.SubmitRequest{Type: tc.name}})
			tickers := []*schedule.Ticker{ticker(a1, clk, storeOn(a1, clk)), ticker(a2, clk, storeOn(a2, clk))}
			for at := tc.from; !at.After(tc.to); at = at.Add(tc.step) {
				clk.Set(at)
				var wg sync.WaitGroup
				for _, tk := range tickers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if _, err := tk.Tick(context.Background()); err != nil {
							t.Errorf("tick at %s: %v", at, err)
						}
					}()
				}
				wg.Wait()
			}
			exactlyOnce(t, a1, tc.name, tc.name, tc.want)
		})
	}
}

// failing wraps the schedule store and fails Advance while fail is set:
// the promoter "crashes" after the tick's task was made and before the
// tick was written.
type failing struct {
	*schedule.Store
	fail bool
}

var errCrash = errors.New("injected crash")

func (f *failing) Advance(ctx context.Context, cur *schedule.Stored, last time.Time, id string, next time.Time) error {
	if f.fail {
		return errCrash
	}
	return f.Store.Advance(ctx, cur, last, id, next)
}

// failingEnqueuer fails before anything is sent: a crash before the
// enqueue.
type failingEnqueuer struct {
	schedule.Enqueuer
	fail bool
}

func (f *failingEnqueuer) Submit(ctx context.Context, tk *task.Task) (*task.Task, bool, error) {
	if f.fail {
		return nil, false, errCrash
	}
	return f.Enqueuer.Submit(ctx, tk)
}

// TestCrashBetweenEnqueueAndTickWrite: a run that made the tick's task
// and died before advancing the schedule is followed by runs that make
// no second task and advance it; a run that died before the enqueue
// loses nothing: the next one makes the task.
func TestCrashBetweenEnqueueAndTickWrite(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	t0 := time.Now().UTC().Truncate(time.Minute).Add(10 * time.Second)
	clk := newClock(t0)
	s := &failing{Store: storeOn(a, clk), fail: true}
	enq := &failingEnqueuer{Enqueuer: a.Enqueuer}
	create(t, s.Store, schedule.Schedule{Name: "crashy", Cron: "* * * * *", Task: triagetype.SubmitRequest{Type: "crashy"}})
	tk := schedule.NewTicker(s, a.Store, enq, schedule.TickerOptions{Now: clk.Now})
	ctx := context.Background()
	tick1 := t0.Truncate(time.Minute).Add(time.Minute)

	clk.Set(tick1.Add(5 * time.Second))
	r, err := tk.Tick(ctx)
	if !errors.Is(err, errCrash) || r.Enqueued != 1 {
		t.Fatalf("crashed run: %+v, %v; want the task made and the crash", r, err)
	}
	exactlyOnce(t, a, "crashy", "crashy", []time.Time{tick1})
	s.fail = false
	for range 2 { // the retry, and a second promoter after it
		if r, err := tk.Tick(ctx); err != nil || r.Enqueued != 0 {
			t.Fatalf("run after the crash: %+v, %v; want nothing new", r, err)
		}
	}
	exactlyOnce(t, a, "crashy", "crashy", []time.Time{tick1})
	sc, _ := s.Get(ctx, "crashy")
	if !sc.NextTick.Equal(tick1.Add(time.Minute)) {
		t.Fatalf("next tick %v, want %v", sc.NextTick, tick1.Add(time.Minute))
	}

	// A crash before the enqueue: the tick stays due and is made next run.
	tick2 := tick1.Add(time.Minute)
	clk.Set(tick2.Add(5 * time.Second))
	enq.fail = true
	if _, err := tk.Tick(ctx); !errors.Is(err, errCrash) {
		t.Fatalf("want the injected crash, got %v", err)
	}
	enq.fail = false
	clk.Add(40 * time.Second)
	if r, err := tk.Tick(ctx); err != nil || r.Enqueued != 1 {
		t.Fatalf("run after a crash before the enqueue: %+v, %v", r, err)
	}
	exactlyOnce(t, a, "crashy", "crashy", []time.Time{tick1, tick2})
}

// TestMissedTicks: twenty minutes without a promoter; "skip" makes only
// the ticks within the grace period, "catch_up" with a limit of 5 the
// newest 5 missed ones too. A paused schedule makes nothing, and resumes
// at the next tick after the resume.
func TestMissedTicks(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	ctx := context.Background()
	t0 := time.Now().UTC().Truncate(time.Minute).Add(30 * time.Second)
	clk := newClock(t0)
	s := storeOn(a, clk)
	create(t, s, schedule.Schedule{Name: "skipper", Cron: "* * * * *", Task: triagetype.SubmitRequest{Type: "skipper"}})
	create(t, s, schedule.Schedule{Name: "catcher", Cron: "* * * * *", Missed: schedule.MissedCatchUp, CatchUpLimit: 5, Task: triagetype.SubmitRequest{Type: "catcher"}})
	create(t, s, schedule.Schedule{Name: "sleeper", Cron: "* * * * *", Paused: true, Task: triagetype.SubmitRequest{Type: "sleeper"}})
	mx := &tickCounts{}
	tk := schedule.NewTicker(s, a.Store, a.Enqueuer, schedule.TickerOptions{Now: clk.Now, Metrics: mx})
	clk.Add(20 * time.Minute) // ticks at +1..+20 min; on time: the last 3 (within schedule.Grace)
	r, err := tk.Tick(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := t0.Truncate(time.Minute)
	span := func(from, to int) []time.Time {
		var out []time.Time
		for i := from; i <= to; i++ {
			out = append(out, m.Add(time.Duration(i)*time.Minute))
		}
		return out
	}
	exactlyOnce(t, a, "skipper", "skipper", span(18, 20))
	exactlyOnce(t, a, "catcher", "catcher", span(13, 20))
	exactlyOnce(t, a, "sleeper", "sleeper", nil)
	if r.Enqueued != 3+8 || r.Skipped != 17+12 {
		t.Fatalf("report %+v, want 11 enqueued and 29 skipped", r)
	}
	if mx.by[schedule.TickEnqueued] != 11 || mx.by[schedule.TickSkipped] != 29 || mx.submitted != 11 {
		t.Fatalf("metrics %+v, want 11 enqueued (and submitted) and 29 skipped", mx)
	}

	if _, err := s.SetPaused(ctx, "sleeper", false); err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Minute)
	if _, err := tk.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	exactlyOnce(t, a, "sleeper", "sleeper", span(21, 21))
	exactlyOnce(t, a, "skipper", "skipper", span(18, 21))
}

// TestDeployedSchedule: the pending item the CDK construct's custom
// resource writes (DeployItem, here put with the SDK as the resource's
// PutItem call does) is started by the next run at its first tick after
// that run, and ticks from then on, once per tick across two tickers.
func TestDeployedSchedule(t *testing.T) {
	env := stacktest.New(t)
	a1, a2 := env.App(t, nil), env.App(t, nil)
	ctx := context.Background()
	if _, err := schedule.DeployItem(schedule.Schedule{Name: "bad", Cron: "0 2 * * *", Timezone: "Europe/Atlantis", Task: triagetype.SubmitRequest{Type: "x"}}, 16, nil); err == nil || !strings.Contains(err.Error(), "timezone") {
		t.Fatalf("a bad schedule at deploy: %v, want an error naming timezone", err)
	}
	item, err := schedule.DeployItem(schedule.Schedule{Name: "deployed", Cron: "*/5 * * * *", Task: triagetype.SubmitRequest{Type: "deployed"}}, a1.Store.Shards(), nil)
	if err != nil {
		t.Fatal(err)
	}
	av := map[string]ddbtypes.AttributeValue{}
	for k, v := range item {
		m := v.(map[string]any)
		switch {
		case m["S"] != nil:
			av[k] = &ddbtypes.AttributeValueMemberS{Value: m["S"].(string)}
		case m["N"] != nil:
			av[k] = &ddbtypes.AttributeValueMemberN{Value: m["N"].(string)}
		default:
			av[k] = &ddbtypes.AttributeValueMemberBOOL{Value: m["BOOL"].(bool)}
		}
	}
	if _, err := a1.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: &a1.Config.Table, Item: av}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 6, 1, 10, 1, 30, 0, time.UTC)
	clk := newClock(t0)
	tickers := []*schedule.Ticker{ticker(a1, clk, storeOn(a1, clk)), ticker(a2, clk, storeOn(a2, clk))}
	run := func() {
		var wg sync.WaitGroup
		for _, tk := range tickers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := tk.Tick(ctx); err != nil {
					t.Errorf("tick: %v", err)
				}
			}()
		}
		wg.Wait()
	}
	run()
	sc, err := storeOn(a1, newClock(time.Now())).Get(ctx, "deployed")
	if err != nil || sc.NextTick == nil || !sc.NextTick.Equal(time.Date(2026, 6, 1, 10, 5, 0, 0, time.UTC)) {
		t.Fatalf("after the first run: %+v, %v; want next tick 10:05", sc, err)
	}
	exactlyOnce(t, a1, "deployed", "deployed", nil)
	for _, at := range []string{"10:05:20", "10:07:00", "10:10:05", "10:10:40"} {
		v, _ := time.Parse("15:04:05", at)
		clk.Set(time.Date(2026, 6, 1, v.Hour(), v.Minute(), v.Second(), 0, time.UTC))
		run()
	}
	exactlyOnce(t, a1, "deployed", "deployed", []time.Time{time.Date(2026, 6, 1, 10, 5, 0, 0, time.UTC), time.Date(2026, 6, 1, 10, 10, 0, 0, time.UTC)})
}

// tickCounts records what the ticker reports to its metrics.
type tickCounts struct {
	mu        sync.Mutex
	by        map[string]int
	submitted int
}

func (m *tickCounts) Ticked(outcome string, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.by == nil {
		m.by = map[string]int{}
	}
	m.by[outcome] += n
}

func (m *tickCounts) Submitted(*task.Task) { m.mu.Lock(); m.submitted++; m.mu.Unlock() }
