package e2e

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/devserver"
	"github.com/triagehq/triage/triageconfig"
	"github.com/triagehq/triage/worker"
)

// stepRow is one entry of the page's durable timeline.
type stepRow struct {
	Kind, Step, Outcome, Meta string
}

const readSteps = `[...document.querySelectorAll("#detail-steps li[data-kind]")].map(li => ({
	Kind: li.dataset.kind, Step: li.dataset.step,
	Outcome: li.querySelector(".outcome").dataset.outcome,
	Meta: li.querySelector(".small").textContent}))`

// TestDurableStepsTimeline runs a Go worker beside `triage dev` whose
// handler records two steps, sleeps 3 s and then waits for a signal. The
// task's detail shows, in the order met, both steps (ok, with their run
// time and result size) and the sleep with its wake time while the task
// sleeps; once the signal is sent, the sleep as slept and the signal as
// arrived, after the two steps; the attempts that slept and waited show
// as suspended, not failed. The worker is the only consumer, as under
// `triage dev --no-consumer`: beside dev's own consumer, a woken task's
// message can be handed back between the two for tens of seconds on a
// loaded machine, longer than the waits here.
func TestDurableStepsTimeline(t *testing.T) {
	d := startDevWith(t, map[string]string{triageconfig.EnvTypes: "echo,saga"}, func(o *devserver.Options) { o.NoConsumer = true })
	cfg, err := triageconfig.Decode(d.env.Getenv(nil))
	if err != nil {
		t.Fatal(err)
	}
	w := worker.New(worker.Options{Config: &cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	err = w.Handle("saga", func(ctx context.Context, tk *worker.Task) (any, error) {
		charge, err := worker.Step(ctx, tk, "charge", func(context.Context) (string, error) {
			time.Sleep(20 * time.Millisecond)
			return "ch_123", nil
		})
		if err != nil {
			return nil, err
		}
		if _, err := worker.Step(ctx, tk, "reserve", func(context.Context) (map[string]int, error) { return map[string]int{"units": 3}, nil }); err != nil {
			return nil, err
		}
		if err := worker.Sleep(ctx, tk, 3*time.Second); err != nil {
			return nil, err
		}
		ok, err := worker.WaitSignal[map[string]bool](ctx, tk, "approval", time.Minute)
		if err != nil {
			return nil, err
		}
		return map[string]any{"charge": charge, "approved": ok["ok"]}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("worker.Run: %v", err)
		}
	})

	id := d.submit([]string{`{"type":"saga","priority":"high"}`})[0]
	b := openBrowser(t, d.base, 1366)
	b.lookup("open the saga", id)
	b.wait("two steps and the sleep", `document.getElementById("detail-id").textContent === "`+id+`" &&
		document.querySelectorAll("#detail-steps li[data-kind]").length >= 3`)
	var rows []stepRow
	b.eval(readSteps, &rows)
	if len(rows) < 3 || rows[0].Step != "charge" || rows[1].Step != "reserve" || rows[2].Kind != "sleep" {
		t.Fatalf("timeline %+v, want charge, reserve, then the sleep", rows)
	}
	for _, r := range rows[:2] {
		if r.Kind != "run" || r.Outcome != "ok" || !strings.Contains(r.Meta, " ms") || !strings.Contains(r.Meta, "result ") {
			t.Errorf("step %+v, want a run step, ok, with its run time and result size", r)
		}
	}
	// "ch_123" as JSON is 8 bytes; {"units":3} 11.
	if !strings.Contains(rows[0].Meta, "result 8 B") || !strings.Contains(rows[1].Meta, "result 11 B") {
		t.Errorf("result sizes: %q, %q; want 8 B and 11 B", rows[0].Meta, rows[1].Meta)
	}
	var ranMS int
	b.eval(`Number(document.querySelector('#detail-steps li[data-step="charge"] .small').dataset.duration)`, &ranMS)
	if ranMS < 20 {
		t.Errorf("charge ran %d ms, want at least the 20 ms its function slept", ranMS)
	}
	if rows[2].Outcome == "sleeping" && !strings.HasPrefix(rows[2].Meta, "wakes ") {
		t.Errorf("the sleep %+v does not say when it wakes", rows[2])
	}
	var wakeAt string
	b.eval(`document.querySelector('#detail-steps li[data-kind="sleep"] time').dateTime`, &wakeAt)
	if at, err := time.Parse(time.RFC3339Nano, wakeAt); err != nil || at.IsZero() {
		t.Errorf("the sleep's wake time %q is not a time: %v", wakeAt, err)
	}

	// After the sleep the task waits for its signal; send it.
	b.wait("the wait for the signal", `(() => { const li = document.querySelector('#detail-steps li[data-kind="wait"]');
		return li && li.querySelector(".outcome").dataset.outcome === "waiting"; })()`)
	b.eval(readSteps, &rows)
	if rows[2].Kind != "sleep" || rows[2].Outcome != "slept" {
		t.Errorf("once woken, the sleep shows %+v, want slept", rows[2])
	}
	if code := d.call("POST", "/api/v1/tasks/"+id+"/signals/approval", `{"ok":true}`, nil); code != 200 && code != 202 {
		t.Fatalf("signal: %d", code)
	}
	d.waitTasks("the saga to complete", []string{id}, func(tv apiTask) bool { return tv.Status == "completed" })
	// The page refreshes on its own: the render that first shows the
	// signal can predate the completion, so wait for both.
	b.wait("the signal consumed and the attempt succeeded", `(() => { const li = document.querySelector('#detail-steps li[data-kind="wait"]');
		return li && li.querySelector(".outcome").dataset.outcome === "signalled" &&
			!!document.querySelector('#detail-timeline li[data-attempt] .outcome[data-outcome="succeeded"]'); })()`)
	rows = nil
	b.eval(readSteps, &rows)
	got := make([]string, len(rows))
	for i, r := range rows {
		got[i] = r.Kind + ":" + r.Step + ":" + r.Outcome
	}
	if want := "run:charge:ok run:reserve:ok sleep:sleep-2:slept wait:approval:signalled"; strings.Join(got, " ") != want {
		t.Errorf("final timeline %q, want %q", strings.Join(got, " "), want)
	}
	if last := rows[len(rows)-1]; !strings.HasPrefix(last.Meta, "arrived ") || !strings.Contains(last.Meta, "payload 11 B") {
		t.Errorf("the signal %+v does not show its arrival and payload size", last)
	}
	// The attempts that slept and waited ended without being spent: the
	// attempt timeline says so, not that they failed.
	var attempts []attemptRow
	b.eval(readTimeline, &attempts)
	var outcomes []string
	for _, a := range attempts {
		outcomes = append(outcomes, a.Attempt+":"+a.Outcome)
	}
	if want := "1:suspended 1:suspended 1:succeeded"; strings.Join(outcomes, " ") != want {
		t.Errorf("attempts %q, want %q", strings.Join(outcomes, " "), want)
	}
	var gaps []string
	b.eval(`[...document.querySelectorAll("#detail-timeline .gap")].map(g => g.textContent)`, &gaps)
	for _, g := range gaps {
		if !strings.Contains(g, "suspended: no attempt spent") {
			t.Errorf("the wait after a suspended attempt says %q", g)
		}
	}
	b.screenshot("task-steps", "#detail")
}
