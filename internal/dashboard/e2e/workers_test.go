package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/triagehq/triage/internal/workers"
	"github.com/triagehq/triage/triagetype"
)

// TestKilledWorkerTurnsDead registers a worker instance in the dev
// server's registry that heartbeats once and then never again, which is
// what the registry sees of a process killed with SIGKILL (it cannot
// deregister; internal/workers/crash_test.go kills a real child process).
// The Workers tab shows it active with its capacity and busy slots, then
// dead within three of its heartbeat intervals, while the dev server's own
// consumer stays active.
func TestKilledWorkerTurnsDead(t *testing.T) {
	d := startDev(t, nil)
	reg := workers.New(d.env.DynamoDB, d.env.Spec.Table.Name, 0)
	killed := workers.Instance{ID: "killed-e2e-1", Kind: triagetype.WorkerKindWorker, Capacity: 4, Every: 2 * time.Second}
	ctx := context.Background()
	if err := reg.Register(ctx, killed); err != nil {
		t.Fatal(err)
	}
	// It heartbeats until the page has shown it active (a loaded machine
	// may open the browser later than three intervals after one beat),
	// then never again.
	var mu sync.Mutex
	var beat time.Time
	stop := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			if err := reg.Heartbeat(ctx, killed, 3, triagetype.WorkerActive); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			beat = time.Now()
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
		}
	}()

	b := openBrowser(t, d.base, 1366)
	b.do("open Workers", chromedp.Click(chromedp.ID("tab-workers")))
	b.wait("the killed worker, still active", `(() => { const tr = document.querySelector('#workers-body tr[data-worker="killed-e2e-1"]');
		return tr && tr.querySelector("[data-state]").dataset.state === "active" && tr.cells[3].textContent.trim() === "3 / 4"; })()`)
	b.screenshot("workers", "#view-workers")
	close(stop)
	<-stopped
	mu.Lock()
	last := beat
	mu.Unlock()
	b.wait("the killed worker dead", `document.querySelector('#workers-body tr[data-worker="killed-e2e-1"] [data-state]').dataset.state === "dead"`)
	// Dead only after three missed heartbeats, never sooner (less a
	// second for the heartbeat time's precision); an upper bound would be
	// a wall-clock assertion, and b.wait bounds the wait.
	if took, least := time.Since(last), workers.DeadAfterBeats*killed.Every-time.Second; took < least {
		t.Errorf("the worker showed dead %v after its last heartbeat, before %v", took, least)
	}
	var states []string
	b.eval(`[...document.querySelectorAll('#workers-body tr[data-worker]')].filter(tr => tr.cells[1].textContent === "dev").map(tr => tr.querySelector("[data-state]").dataset.state)`, &states)
	// The dev server's consumer is started by the queues, as in AWS: with
	// nothing queued it is not running, so it has no row.
	if len(states) != 0 {
		t.Errorf("the idle dev server's consumer shows %v, want no row (nothing runs while nothing is queued)", states)
	}
	b.wait("the summary", `document.getElementById("workers-summary").textContent.startsWith("0 active, 0 draining, 1 dead")`)
}
