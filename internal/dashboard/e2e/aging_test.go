package e2e

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/triagehq/triage/internal/app/consumerapp"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/handler"
)

// TestWaitsPromotionsAndDepthHistory runs a low task that waits, queued,
// until the promoter has moved it to medium and then high: its type has
// no handler in triage dev, so dev's consumer hands its message back while
// it ages (a pause would set it aside, and set-aside tasks do not age);
// then a worker for the type starts beside dev, as a user's own would, and
// runs it, and a few high tasks start at once. The queue cards show each
// priority's wait p50/p99 from the counters (the low one's at least the
// 4 s of aging it went through); the task's detail shows its two promotion
// steps with their times and waits among its attempts; the depth chart is
// drawn from the minutes the promoter sampled (GET /stats/history), not
// from what the page saw since it opened.
func TestWaitsPromotionsAndDepthHistory(t *testing.T) {
	d := startDev(t, map[string]string{"TRIAGE_PROMOTE_LOW_AFTER": "2s", "TRIAGE_PROMOTE_MEDIUM_AFTER": "2s", "TRIAGE_PROMOTE_INTERVAL": "1s",
		"TRIAGE_TYPES": "echo,later"})
	slow := d.submit([]string{`{"type":"later","priority":"low","payload":{"n":1}}`})[0]
	var promoted struct {
		EffectivePriority string `json:"effective_priority"`
	}
	d.waitTasks("the unhandled low task to reach high", []string{slow}, func(apiTask) bool {
		d.call("GET", "/api/v1/tasks/"+slow, "", &promoted)
		return promoted.EffectivePriority == "high"
	})
	a := d.env.App(t, nil)
	echo := handler.Func(func(_ context.Context, r handler.Request) (json.RawMessage, error) { return r.Payload, nil })
	stacktest.Run(t, consumerapp.New(a, stacktest.Registry("later", echo), stacktest.FastDispatch(), dispatch.Deps{}))
	fast := d.submit([]string{`{"type":"echo","priority":"high"}`, `{"type":"echo","priority":"high"}`, `{"type":"echo","priority":"high"}`})
	d.waitTasks("all four tasks", append(fast, slow), func(tv apiTask) bool { return tv.Status == "completed" })

	b := openBrowser(t, d.base, 1366)
	waits := func(p string) (n int, p50, p99 float64) {
		t.Helper()
		var got struct{ Waits, P50, P99 string }
		b.eval(`(() => { const dd = document.querySelector('[data-queue="`+p+`"] [data-k="wait"]');
			return {Waits: dd.dataset.waits || "", P50: dd.dataset.p50 || "", P99: dd.dataset.p99 || ""}; })()`, &got)
		n, _ = strconv.Atoi(got.Waits)
		p50, _ = strconv.ParseFloat(got.P50, 64)
		p99, _ = strconv.ParseFloat(got.P99, 64)
		return n, p50, p99
	}
	b.wait("the waits of high and low", `document.querySelector('[data-queue="high"] [data-k="wait"]').dataset.waits === "3" &&
		document.querySelector('[data-queue="low"] [data-k="wait"]').dataset.waits === "1"`)
	n, p50, p99 := waits("high")
	if n != 3 || p50 <= 0 || p99 < p50 || p99 > 60 {
		t.Errorf("high card: %d waits, p50 %v s, p99 %v s; want 3 with 0 < p50 <= p99 <= 60", n, p50, p99)
	}
	// The low task waited through both promotions (2 s each, runs every
	// second) while paused: the bucket bound is at least its wait.
	if n, p50, p99 := waits("low"); p50 < 4 || p99 != p50 {
		t.Errorf("low card: %d waits, p50 %v s, p99 %v s; want one wait of at least 4 s", n, p50, p99)
	}
	if n, _, _ := waits("medium"); n != 0 {
		t.Errorf("medium card shows %d waits: no medium task ran", n)
	}
	var text string
	b.eval(`document.querySelector('[data-queue="high"] [data-k="wait"]').textContent`, &text)
	if !strings.HasPrefix(text, "≤ ") || !strings.Contains(text, " / ≤ ") {
		t.Errorf("high card's wait reads %q, want '≤ … / ≤ …'", text)
	}

	// The depth chart comes from the promoter's minute samples.
	b.wait("the depth chart from history", `document.querySelector("#chart-depth svg") !== null && Number(document.querySelector("#chart-depth svg").dataset.minutes) >= 1`)
	b.wait("its three lines", `document.querySelectorAll("#chart-depth svg path").length === 3`)

	b.lookup("open the promoted task", slow)
	b.wait("its promotions", `document.querySelectorAll("#detail-timeline li.promotion").length === 2`)
	var steps []string
	b.eval(`[...document.querySelectorAll("#detail-timeline li")].map(li => li.dataset.promotion || ("attempt " + li.dataset.attempt))`, &steps)
	if len(steps) != 3 || steps[0] != "low>medium" || steps[1] != "medium>high" || steps[2] != "attempt 1" {
		t.Errorf("timeline %v, want the two promotions, then attempt 1", steps)
	}
	var meta string
	b.eval(`document.querySelector('#detail-timeline li[data-promotion="low>medium"]').textContent`, &meta)
	if !strings.HasPrefix(meta, "⇧ Promoted low → medium") {
		t.Errorf("first step reads %q", meta)
	}
	b.wait("its wait and time", `(() => { const li = document.querySelector('#detail-timeline li[data-promotion="low>medium"]');
		return li.textContent.includes("after waiting") && li.textContent.includes("at low") && li.querySelector("[title]") !== null; })()`)
}
