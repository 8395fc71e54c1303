package e2e

import (
	"reflect"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// attemptRow is one entry of the page's attempt timeline.
type attemptRow struct {
	Attempt string
	Outcome string
	Error   string
	Worker  string
}

const readTimeline = `[...document.querySelectorAll("#detail-timeline li[data-attempt]")].map(li => ({
	Attempt: li.dataset.attempt,
	Outcome: li.querySelector(".outcome").dataset.outcome,
	Error: (li.querySelector("[data-error]") || {textContent: ""}).textContent,
	Worker: li.querySelector("code").textContent}))`

// TestRetriedTaskTimeline opens two retried tasks: one that failed twice
// and succeeded on its third attempt (the consumer's retries), and one
// that failed permanently, was retried with the page's Retry button and
// failed again (attempts reset, history kept). Each timeline shows the
// right attempts, outcomes and errors, a worker per attempt, and the
// wait between attempts; the fields show the status, attempts and trace
// id, and the payload is in the JSON viewer.
func TestRetriedTaskTimeline(t *testing.T) {
	d := startDev(t, map[string]string{"TRIAGE_RETRY_BACKOFF": "high=300ms:1s,medium=300ms:1s,low=300ms:1s"})
	ids := d.submit([]string{
		`{"type":"fail","priority":"high","max_attempts":3,"payload":{"times":2}}`,
		`{"type":"fail","priority":"high","max_attempts":1,"payload":{"times":100,"permanent":true,"message":"bad input"}}`,
	})
	flaky, dead := ids[0], ids[1]
	d.waitTasks("the flaky task to complete", []string{flaky}, func(tv apiTask) bool { return tv.Status == "completed" })
	d.waitTasks("the bad task to die", []string{dead}, func(tv apiTask) bool { return tv.Status == "dead_letter" })

	b := openBrowser(t, d.base, 1366)
	b.lookup("open the flaky task", flaky)
	b.wait("its timeline", `document.querySelectorAll("#detail-timeline li[data-attempt]").length === 3`)
	var rows []attemptRow
	b.eval(readTimeline, &rows)
	want := []attemptRow{
		{Attempt: "1", Outcome: "failed", Error: "demo failure 1 of 2"},
		{Attempt: "2", Outcome: "failed", Error: "demo failure 2 of 2"},
		{Attempt: "3", Outcome: "succeeded"},
	}
	for i := range rows {
		if rows[i].Worker == "" || rows[i].Worker == "?" {
			t.Errorf("attempt %d names no worker", i+1)
		}
		rows[i].Worker = ""
	}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("flaky task's timeline %+v, want %+v", rows, want)
	}
	var gaps []string
	b.eval(`[...document.querySelectorAll("#detail-timeline .gap")].map(g => g.textContent)`, &gaps)
	if len(gaps) != 2 {
		t.Errorf("waits between attempts %q, want 2", gaps)
	}
	var fields map[string]string
	b.eval(`Object.fromEntries([...document.querySelectorAll("#detail-fields dd[data-field]")].map(dd => [dd.dataset.field, dd.textContent.trim()]))`, &fields)
	if fields["status"] != "✓ completed" || fields["attempts"] != "3 of 3" || fields["trace_id"] == "" || fields["trace_id"] == "–" {
		t.Errorf("fields %v, want status completed, attempts 3 of 3 and a trace id", fields)
	}
	b.wait("the payload in the JSON viewer", `document.querySelector('[data-body="payload"] .json') !== null && document.querySelector('[data-body="payload"] .json').textContent.includes('"times": 2')`)
	var retryOff bool
	b.eval(`document.getElementById("task-retry").disabled`, &retryOff)
	if !retryOff {
		t.Error("Retry is offered for a completed task")
	}
	b.screenshot("task-detail", "#detail")

	// The dead task, retried from the page: it fails again at once.
	before := d.finishedAt(dead)
	b.lookup("open the dead task", dead)
	b.wait("Retry offered", `document.getElementById("detail-id").textContent === "`+dead+`" && !document.getElementById("task-retry").disabled`)
	b.do("press Retry", chromedp.Click(chromedp.ID("task-retry")))
	d.settle([]string{dead}, before)
	b.wait("two attempts", `document.querySelectorAll("#detail-timeline li[data-attempt]").length === 2`)
	rows = nil
	b.eval(readTimeline, &rows)
	for i := range rows {
		rows[i].Worker = ""
	}
	want = []attemptRow{{Attempt: "1", Outcome: "failed", Error: "bad input"}, {Attempt: "1", Outcome: "failed", Error: "bad input"}}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("retried dead task's timeline %+v, want %+v", rows, want)
	}
	b.eval(`[...document.querySelectorAll("#detail-timeline .gap")].map(g => g.textContent)`, &gaps)
	if len(gaps) != 1 || !strings.Contains(gaps[0], "retried by hand") {
		t.Errorf("the wait before the retry says %q, want it to say the task was retried by hand", gaps)
	}
	// A payload over 3 KiB is kept off the record: the panel shows its size
	// and reads it only when asked.
	big := d.submit([]string{`{"type":"echo","priority":"high","payload":{"blob":"` + strings.Repeat("x", 5000) + `"}}`})[0]
	d.waitTasks("the big echo", []string{big}, func(tv apiTask) bool { return tv.Status == "completed" })
	b.lookup("open the big task", big)
	b.wait("the Load button", `document.querySelector('[data-body="payload"] button[data-load]') !== null &&
		document.querySelector('[data-body="payload"] h3').textContent.endsWith("KiB")`)
	b.do("load the payload", chromedp.Click(chromedp.CSS(`[data-body="payload"] button[data-load]`)))
	b.wait("the payload in the viewer", `document.querySelector('[data-body="payload"] .json') !== null && document.querySelector('[data-body="payload"] .json').textContent.includes("xxxxxxxx")`)

	b.lookup("back to the dead task", dead)
	b.wait("its fields", `document.getElementById("detail-id").textContent === "`+dead+`" && document.querySelectorAll("#detail-timeline li[data-attempt]").length === 2`)
	var errBox string
	b.eval(`document.getElementById("detail-error").textContent`, &errBox)
	if errBox != "Error (permanent): bad input" {
		t.Errorf("error box %q", errBox)
	}
}
