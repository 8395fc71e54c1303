package waiting_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/api"
	"github.com/triagehq/triage/internal/app/consumerapp"
	"github.com/triagehq/triage/internal/auth"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/metrics"
	"github.com/triagehq/triage/internal/metrics/prom"
	"github.com/triagehq/triage/internal/service"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// TestKeyUseInStatsAndMetrics: a key at its concurrency limit shows
// running == limit in GET /stats (keys.limits and keys.top), a rate-limited
// (type, key) scope shows its window's starts, a key without controls is
// in keys.top by name; and the key metrics name only the keys with
// controls, counting every other key under #other.
func TestKeyUseInStatsAndMetrics(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	ctx := context.Background()
	if _, err := a.Controls.SetKeyControls(ctx, "", "acme", nil, nil, ptr(2)); err != nil {
		t.Fatal(err)
	}
	// One start per 10 s window: a window holding a start is current for
	// long enough to be seen.
	if _, err := a.Controls.SetKeyControls(ctx, "work", "beta", nil, ptr(0.1), nil); err != nil {
		t.Fatal(err)
	}

	gate := make(chan struct{})
	var mu sync.Mutex
	most := map[string]int{}
	now := map[string]int{}
	h := handler.Func(func(ctx context.Context, r handler.Request) (json.RawMessage, error) {
		mu.Lock()
		now[r.Key]++
		most[r.Key] = max(most[r.Key], now[r.Key])
		mu.Unlock()
		select {
		case <-gate:
		case <-ctx.Done():
		}
		mu.Lock()
		now[r.Key]--
		mu.Unlock()
		return nil, nil
	})
	sink, err := prom.New()
	if err != nil {
		t.Fatal(err)
	}
	opt := stacktest.FastDispatch()
	opt.Concurrency = 12
	// Each heartbeat's starts and finishes stand until the next: 2 s is
	// long enough for the polls below to see every report, even when a
	// /stats request takes a while on a loaded machine.
	opt.WorkerHeartbeat = 2 * time.Second
	stacktest.Run(t, consumerapp.New(a, stacktest.Registry("work", h), opt, dispatch.Deps{Metrics: metrics.New(sink)}))

	ids := append(submitKeyed(t, a, "work", "acme", 5), submitKeyed(t, a, "work", "free", 4)...)
	ids = append(ids, submitKeyed(t, a, "work", "beta", 2)...)

	toks, err := auth.Parse("ro:read")
	if err != nil {
		t.Fatal(err)
	}
	srv := api.New(api.Deps{Store: a.Store, Enqueuer: a.Enqueuer, Queues: a.Queues, Controls: a.Controls, Counters: a.Counters, Workers: a.Workers, Tokens: toks}, api.Options{})
	getStats := func() triagetype.Stats {
		req := httptest.NewRequest(http.MethodGet, "/api/v1/stats", nil)
		req.Header.Set("Authorization", "Bearer ro")
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET /stats: %d %s", rec.Code, rec.Body)
		}
		var st triagetype.Stats
		if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
			t.Fatal(err)
		}
		return st
	}

	var last triagetype.Stats
	seenAcme, seenBeta, seenStarts := false, false, false
	waitFor(t, "acme at its limit and beta's window start in /stats", 90*time.Second, func() bool {
		last = getStats()
		k := last.Keys
		if k == nil {
			t.Fatal("/stats has no keys section")
		}
		top := map[string]int{}
		for _, r := range k.Top {
			top[r.Key] = r.Running
			seenStarts = seenStarts || r.Key == "free" && r.StartsPerSecond > 0
		}
		if top["acme"] > 2 {
			t.Fatalf("/stats shows acme running %d, over its limit of 2", top["acme"])
		}
		for _, l := range k.Limits {
			switch {
			case l.Controls.Key == "acme" && l.Controls.Type == "":
				if l.Controls.MaxConcurrency != 2 || l.Running > 2 {
					t.Fatalf("acme's limit shows %+v", l)
				}
				seenAcme = seenAcme || l.Running == 2 && top["acme"] == 2
			case l.Controls.Key == "beta" && l.Controls.Type == "work":
				u := l.RateUse
				if u == nil || u.Limit != 1 || u.WindowSeconds != 10 || u.Starts > 1 {
					t.Fatalf("beta's rate use shows %+v", u)
				}
				seenBeta = seenBeta || u.Starts == 1 && l.Running >= 1
			default:
				t.Fatalf("unexpected keyed scope %+v", l.Controls)
			}
		}
		return seenAcme && seenBeta && seenStarts && top["free"] == 4 && len(k.Limits) == 2 && k.OtherLimits == 0
	})
	mu.Lock()
	t.Logf("keys: %+v; handler saw at most %v at once", *last.Keys, most)
	mu.Unlock()
	if last.Workers == nil || last.Workers.Used < 7 {
		t.Errorf("workers section: %+v, want at least 7 slots used (2 acme + 4 free + beta)", last.Workers)
	}

	close(gate)
	seenFinishes := false
	waitFor(t, "every task completed, and acme's finishes in /stats", 2*time.Minute, func() bool {
		for _, r := range getStats().Keys.Top {
			seenFinishes = seenFinishes || r.Key == "acme" && r.FinishesPerSecond > 0
		}
		if !seenFinishes {
			return false
		}
		for _, id := range ids {
			if tk, err := a.Store.Get(ctx, id); err != nil || tk.Status != triagetype.Completed {
				if err == nil && time.Now().Second()%10 == 0 {
					t.Logf("waiting for %s: key %s, %s, held %q", id, tk.Key, tk.Status, tk.Held)
				}
				return false
			}
		}
		return true
	})
	mu.Lock()
	if most["acme"] > 2 {
		t.Errorf("acme ran %d at once, limit 2", most["acme"])
	}
	mu.Unlock()

	// The metrics: acme and beta (keys with controls) by name, free as #other.
	rec := httptest.NewRecorder()
	sink.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	text := string(body)
	for _, want := range []string{
		`triage_key_tasks_started_total{key="acme"} 5`,
		`triage_key_tasks_started_total{key="beta"} 2`,
		`triage_key_tasks_started_total{key="#other"} 4`,
		`triage_key_tasks_finished_total{key="acme",outcome="completed"} 5`,
		`triage_key_tasks_finished_total{key="#other",outcome="completed"} 4`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
	if strings.Contains(text, `key="free"`) {
		t.Error("a key without controls is named in the metrics")
	}
	for _, want := range []string{`triage_key_putoffs_total{key="acme",reason="concurrency_limit"}`, `triage_key_putoffs_total{key="beta",reason="rate_limit"}`} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "triage_key_") {
			lines = append(lines, l)
		}
	}
	t.Log(fmt.Sprint(strings.Join(lines, "\n")))
}

// TestKeyRateUseInControlList: GET /control's rate_use shows a keyed
// scope's window (under its scope's name) beside a type's.
func TestKeyRateUseInControlList(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	ctx := context.Background()
	if _, err := a.Controls.SetKeyControls(ctx, "", "gamma", nil, ptr(0.2), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Controls.SetLimits(ctx, "work", 0.5, 0); err != nil {
		t.Fatal(err)
	}
	svc := service.New(service.Deps{Controls: a.Controls}, service.Options{})
	// The windows are fixed (2 s for work, 10 s for each key) and turn on
	// whole seconds, so a start and a read that fall in different windows
	// see different counts (a start at 1.99 s read at 2.01 s: 0 starts).
	// Each try starts just after a 2 s turn and checks the counts only
	// when its start and its read fell in the same windows, as the run's
	// own clock says; otherwise it tries again with a fresh key.
	for try := range 5 {
		k := fmt.Sprintf("beta%d", try)
		if _, err := a.Controls.SetKeyControls(ctx, "work", k, nil, ptr(0.1), nil); err != nil {
			t.Fatal(err)
		}
		for {
			now := time.Now()
			into := now.Sub(now.Truncate(2 * time.Second))
			if into < 200*time.Millisecond {
				break
			}
			time.Sleep(2*time.Second - into + 20*time.Millisecond)
		}
		began := time.Now()
		tk := (&task.Request{Type: "work", Key: k}).NewTask(began.UTC(), 0)
		if d, err := a.Controls.Decide(ctx, tk); err != nil || d.Release == nil {
			t.Fatalf("first start of %s refused: %+v, %v", k, d, err)
		}
		cs, ferr := svc.Controls(ctx)
		if ferr != nil {
			t.Fatal(ferr)
		}
		use, ferr := svc.RateUse(ctx, cs)
		if ferr != nil {
			t.Fatal(ferr)
		}
		read := time.Now()
		t.Logf("try %d: rate_use: %+v", try, use)
		if !began.Truncate(2*time.Second).Equal(read.Truncate(2*time.Second)) || !began.Truncate(10*time.Second).Equal(read.Truncate(10*time.Second)) {
			t.Logf("try %d: started at %v, read at %v, in another window: again", try, began, read)
			continue
		}
		if u, ok := use["tk#work#"+k]; !ok || u.Limit != 1 || u.WindowSeconds != 10 || u.Starts != 1 {
			t.Fatalf("tk#work#%s's rate use %+v (listed %v), want 1 start of 1 in a 10 s window", k, u, ok)
		}
		if u, ok := use["key#gamma"]; !ok || u.Limit < 1 || u.Starts != 0 {
			t.Fatalf("key#gamma's rate use %+v (listed %v), want 0 starts", u, ok)
		}
		if u, ok := use["work"]; !ok || u.Starts != 1 {
			t.Fatalf("work's rate use %+v (listed %v), want its 1 start", u, ok)
		}
		return
	}
	t.Fatal("no try's start and read fell in the same windows")
}
