package waiting_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/app/consumerapp"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// running tracks how many tasks of each group run at once, and the most.
type running struct {
	mu       sync.Mutex
	now, top map[string]int
	starts   []time.Time
}

func newRunning() *running { return &running{now: map[string]int{}, top: map[string]int{}} }

func (r *running) handler(d time.Duration) handler.Handler {
	return handler.Func(func(ctx context.Context, req handler.Request) (json.RawMessage, error) {
		groups := []string{"key=" + req.Key, "tk=" + req.Type + "/" + req.Key}
		r.mu.Lock()
		r.starts = append(r.starts, time.Now())
		for _, g := range groups {
			r.now[g]++
			r.top[g] = max(r.top[g], r.now[g])
		}
		r.mu.Unlock()
		time.Sleep(d)
		r.mu.Lock()
		for _, g := range groups {
			r.now[g]--
		}
		r.mu.Unlock()
		return nil, nil
	})
}

func submitKeyed(t *testing.T, a *app.App, typ, key string, n int) []string {
	t.Helper()
	ts := make([]*task.Task, n)
	for i := range ts {
		r := task.Request{Type: typ, Key: key}
		ts[i] = r.NewTask(time.Now().UTC(), 15*time.Minute)
	}
	var ids []string
	for _, res := range a.Enqueuer.SubmitBatch(context.Background(), ts) {
		if res.Err != nil {
			t.Fatalf("submit: %v", res.Err)
		}
		ids = append(ids, res.Task.ID)
	}
	return ids
}

// twoConsumers runs two consumer instances, each on its own app (its own
// controls cache and set-aside state), both running h for every type.
func twoConsumers(t *testing.T, env *stacktest.Env, h handler.Handler, types ...string) (*app.App, []*dispatch.Consumer) {
	var first *app.App
	var cs []*dispatch.Consumer
	for i := range 2 {
		a := env.App(t, nil)
		if first == nil {
			first = a
		}
		reg := handler.NewRegistry()
		for _, typ := range types {
			reg.Register(typ, h)
		}
		opt := stacktest.FastDispatch()
		opt.Concurrency = 6
		c := consumerapp.New(a, reg, opt, dispatch.Deps{WorkerID: fmt.Sprintf("consumer-%d", i)})
		stacktest.Run(t, c)
		cs = append(cs, c)
	}
	return first, cs
}

func ptr[T any](v T) *T { return &v }

// TestKeyedConcurrencyAcrossConsumers: a key's limit (3, all types) and a
// (type, key) limit (1) hold across two consumer instances with 12 slots
// between them, while another key runs unlimited beside them.
func TestKeyedConcurrencyAcrossConsumers(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	ctx := context.Background()
	if _, err := a.Controls.SetKeyControls(ctx, "", "acme", nil, nil, ptr(3)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Controls.SetKeyControls(ctx, "work2", "acme", nil, nil, ptr(1)); err != nil {
		t.Fatal(err)
	}
	ids := append(submitKeyed(t, a, "work", "acme", 20), submitKeyed(t, a, "work2", "acme", 10)...)
	ids = append(ids, submitKeyed(t, a, "work", "other", 20)...)
	r := newRunning()
	twoConsumers(t, env, r.handler(200*time.Millisecond), "work", "work2")
	for _, id := range ids {
		stacktest.WaitStatus(t, a.Store, id, triagetype.Completed, 3*time.Minute)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t.Logf("most running at once: acme %d (limit 3), work2/acme %d (limit 1), other %d (no limit)", r.top["key=acme"], r.top["tk=work2/acme"], r.top["key=other"])
	if r.top["key=acme"] > 3 {
		t.Errorf("key acme ran %d at once, limit 3", r.top["key=acme"])
	}
	if r.top["tk=work2/acme"] > 1 {
		t.Errorf("work2 of acme ran %d at once, limit 1", r.top["tk=work2/acme"])
	}
	if r.top["key=other"] <= 3 {
		t.Errorf("unlimited key other ran at most %d at once: the keyed limit leaked onto it", r.top["key=other"])
	}
}

// maxInWindow is the most of the sorted times ts that fall in any window
// [t, t+w).
func maxInWindow(ts []time.Time, w time.Duration) int {
	best, j := 0, 0
	for i := range ts {
		for ts[i].Sub(ts[j]) >= w {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}

// TestKeyRateAcrossConsumers: a key's rate of 5 starts a second holds
// across two consumers. The limit counts starts per whole second, so a
// sliding second can hold up to two windows' worth (10), and any sliding
// two seconds at most three (15); 40 tasks need 8 windows.
func TestKeyRateAcrossConsumers(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	ctx := context.Background()
	if _, err := a.Controls.SetKeyControls(ctx, "", "slow", nil, ptr(5.0), nil); err != nil {
		t.Fatal(err)
	}
	ids := submitKeyed(t, a, "work", "slow", 40)
	r := newRunning()
	twoConsumers(t, env, r.handler(0), "work")
	for _, id := range ids {
		stacktest.WaitStatus(t, a.Store, id, triagetype.Completed, 3*time.Minute)
	}
	// The recorded start times (taken at the claim, by the consumer's
	// clock, beside the rate count) rather than the handler's, which lag
	// by however long a loaded machine takes to schedule it.
	var starts []time.Time
	for _, id := range ids {
		tk, err := a.Store.Get(ctx, id)
		if err != nil || tk.StartedAt == nil {
			t.Fatalf("task %s: %v, started %v", id, err, tk)
		}
		starts = append(starts, *tk.StartedAt)
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i].Before(starts[j]) })
	one, two := maxInWindow(starts, time.Second), maxInWindow(starts, 2*time.Second)
	span := starts[len(starts)-1].Sub(starts[0])
	t.Logf("40 starts at 5/s over two consumers: most in a sliding 1 s %d (bound 10), in 2 s %d (bound 15), span %v (at least 7 windows)", one, two, span)
	if len(starts) != 40 {
		t.Fatalf("%d starts for 40 tasks", len(starts))
	}
	if one > 10 || two > 15 {
		t.Errorf("rate 5/s exceeded: %d starts in a sliding second, %d in two", one, two)
	}
}
