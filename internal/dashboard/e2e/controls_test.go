package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestTypeControls sets noop's rate limit to 1 a second in the Controls
// tab and sees it displayed and enforced (six tasks start in six
// different seconds, no two in one), then pauses echo from the page: an
// echo task waits while a noop task submitted after it runs, and runs
// once echo is resumed. A bad limit is refused inline with the API's
// message.
func TestTypeControls(t *testing.T) {
	d := startDev(t, nil)
	seed := d.submit([]string{`{"type":"noop"}`, `{"type":"echo"}`})
	d.waitTasks("the seed tasks", seed, func(tv apiTask) bool { return tv.Status == "completed" })

	b := openBrowser(t, d.base, 1366)
	b.do("open Controls", chromedp.Click(chromedp.ID("tab-controls")))
	b.wait("a row per type", `document.querySelector('#controls-body tr[data-type="noop"]') !== null && document.querySelector('#controls-body tr[data-type="echo"]') !== null`)
	b.screenshot("controls")

	// A limit the API refuses shows its message in the row.
	b.do("type a negative limit", chromedp.SetValue(chromedp.CSS(`#controls-body tr[data-type="noop"] input[name="rate"]`), "-1"))
	b.js("mark it edited", `document.querySelector('#controls-body tr[data-type="noop"] input[name="rate"]').dataset.dirty = "1"`)
	b.do("save", chromedp.Click(chromedp.CSS(`#controls-body tr[data-type="noop"] button[data-save]`)))
	b.wait("the inline error", `document.querySelector('#controls-body tr[data-type="noop"] [data-k="error"]').textContent.includes("rate_limit_per_second")`)

	b.do("set noop to 1/s", chromedp.SetValue(chromedp.CSS(`#controls-body tr[data-type="noop"] input[name="rate"]`), "1"))
	b.do("save", chromedp.Click(chromedp.CSS(`#controls-body tr[data-type="noop"] button[data-save]`)))
	b.wait("the limit saved and shown", `document.querySelector('#controls-body tr[data-type="noop"] [data-k="error"]').textContent === "" &&
		document.querySelector('#controls-body tr[data-type="noop"] [data-k="rate_use"]').textContent.endsWith("of 1 in this second")`)
	var ctl struct {
		Controls []struct {
			Type string  `json:"type"`
			Rate float64 `json:"rate_limit_per_second"`
		} `json:"controls"`
	}
	d.call("GET", "/api/v1/control", "", &ctl)
	if fmt.Sprint(ctl.Controls) != "[{ 0} {noop 1}]" {
		t.Fatalf("controls after saving: %+v", ctl.Controls)
	}
	start := time.Now()
	var bodies []string
	for range 6 {
		bodies = append(bodies, `{"type":"noop","priority":"high"}`)
	}
	ids := d.submit(bodies)
	d.waitTasks("six rate-limited noop tasks", ids, func(tv apiTask) bool { return tv.Status == "completed" })
	took := time.Since(start)
	seconds := map[string]string{}
	for _, id := range ids {
		var tv struct {
			StartedAt time.Time `json:"started_at"`
		}
		d.call("GET", "/api/v1/tasks/"+id, "", &tv)
		s := tv.StartedAt.Truncate(time.Second).Format(time.RFC3339)
		if other, dup := seconds[s]; dup {
			t.Errorf("tasks %s and %s both started in second %s at a limit of 1/s", other, id, s)
		}
		seconds[s] = id
	}
	if took < 5*time.Second {
		t.Errorf("six tasks at 1/s finished in %v, want at least 5 s", took)
	}
	t.Logf("six noop tasks at 1/s took %v", took.Round(time.Millisecond))

	// Pause echo from the page.
	b.do("pause echo", chromedp.Click(chromedp.CSS(`#controls-body tr[data-type="echo"] button[data-toggle]`)))
	b.wait("echo shown paused", `document.querySelector('#controls-body tr[data-type="echo"] [data-k="state"]').textContent === "⏸ paused" &&
		document.getElementById("dispatch-state").textContent.includes("paused types: echo")`)
	held := d.submit([]string{`{"type":"echo","priority":"high"}`})[0]
	other := d.submit([]string{`{"type":"noop","priority":"high"}`})[0]
	d.waitTasks("the noop task behind the paused echo", []string{other}, func(tv apiTask) bool { return tv.Status == "completed" })
	time.Sleep(time.Second)
	if st := d.get(held).Status; st != "queued" {
		t.Fatalf("the echo task of a paused type is %s, want queued", st)
	}
	b.do("resume echo", chromedp.Click(chromedp.CSS(`#controls-body tr[data-type="echo"] button[data-toggle]`)))
	b.wait("echo shown running", `document.querySelector('#controls-body tr[data-type="echo"] [data-k="state"]').textContent === "▶ running"`)
	d.waitTasks("the echo task once resumed", []string{held}, func(tv apiTask) bool { return tv.Status == "completed" })
}
