package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestDeadLettersReplayAndPurge makes five dead letters (three fail
// tasks, two sleep tasks that time out on their only attempt), then in
// the Dead letters tab: replays two by selection, replays every sleep
// task by the type filter, and purges the fail tasks by type and reason
// after confirming. After each step the DLQs hold exactly one message
// per dead task (SQS's own count, visible or held), and the page shows
// that depth and that many dead tasks.
func TestDeadLettersReplayAndPurge(t *testing.T) {
	d := startDev(t, nil)
	ids := d.submit([]string{
		`{"type":"fail","priority":"high","max_attempts":1,"payload":{"times":100,"permanent":true,"message":"bad input 1"}}`,
		`{"type":"fail","priority":"medium","max_attempts":1,"payload":{"times":100,"permanent":true,"message":"bad input 2"}}`,
		`{"type":"fail","priority":"low","max_attempts":1,"payload":{"times":100,"permanent":true,"message":"bad input 3"}}`,
		`{"type":"sleep","priority":"low","max_attempts":1,"timeout_seconds":1,"payload":{"ms":60000}}`,
		`{"type":"sleep","priority":"high","max_attempts":1,"timeout_seconds":1,"payload":{"ms":60000}}`,
	})
	if dead := d.settle(ids, nil); dead != 5 {
		t.Fatalf("%d of 5 tasks dead", dead)
	}
	b := openBrowser(t, d.base, 1366)

	// check holds the invariant after a step: SQS's count equals the dead
	// tasks, and the page comes to show both.
	check := func(step string, dead int) {
		t.Helper()
		for i := range 4 {
			if got := d.dlqMessages(); got != dead {
				t.Fatalf("%s: the DLQs hold %d messages for %d dead tasks (read %d)", step, got, dead, i)
			}
			time.Sleep(250 * time.Millisecond)
		}
		b.wait(step+": the page's DLQ depth and dead tasks", fmt.Sprintf(
			`document.getElementById("tab-dlq-count").textContent === "%d" &&
			 [...document.querySelectorAll('[data-queue] [data-k="dlq_depth"]')].reduce((s, e) => s + Number(e.textContent), 0) === %d &&
			 document.querySelector('[data-status="dead_letter"]').textContent === "%d"`, dead, dead, dead))
		t.Logf("%s: %d dead tasks, %d DLQ messages, and the page says so", step, dead, dead)
	}
	check("dead-lettered", 5)

	b.do("open Dead letters", chromedp.Click(chromedp.ID("tab-dlq")))
	b.wait("five dead letters", `document.querySelectorAll("#dlq-body tr[data-task]").length === 5`)
	var reasons map[string]string
	b.eval(`Object.fromEntries([...document.querySelectorAll("#dlq-body tr[data-task]")].map(tr => [tr.dataset.task, tr.cells[3].textContent + " | " + tr.cells[4].textContent]))`, &reasons)
	if reasons[ids[1]] != "fail | bad input 2" || reasons[ids[3]] == "" {
		t.Errorf("dead letters show type | reason %v", reasons)
	}
	b.screenshot("dead-letters")

	// Replay two by selection: one fail, one sleep.
	before := d.finishedAt(ids[0], ids[3])
	b.js("select two", fmt.Sprintf(`document.querySelector('#dlq-body input[data-dlq-check=%q]').click(); document.querySelector('#dlq-body input[data-dlq-check=%q]').click()`, ids[0], ids[3]))
	b.wait("Replay selected (2)", `document.getElementById("dlq-replay-selected").textContent === "Replay selected (2)"`)
	b.do("press Replay selected", chromedp.Click(chromedp.ID("dlq-replay-selected")))
	b.wait("replayed 2", `document.getElementById("dlq-status").textContent === "Replayed 2 task(s)."`)
	check("replay selected", d.settle(ids, before))

	// Replay every sleep task by the type filter.
	before = d.finishedAt(ids[3], ids[4])
	b.wait("sleep in the type dropdown", `[...document.getElementById("dlq-type").options].some(o => o.value === "sleep")`)
	b.do("filter by type sleep", chromedp.SetValue(chromedp.ID("dlq-type"), "sleep"))
	b.js("apply", `document.getElementById("dlq-filters").dispatchEvent(new Event("change"))`)
	b.wait("two sleep dead letters", `document.querySelectorAll("#dlq-body tr[data-task]").length === 2 && [...document.querySelectorAll("#dlq-body tr[data-task]")].every(tr => tr.cells[3].textContent === "sleep")`)
	b.do("press Replay all matching", chromedp.Click(chromedp.ID("dlq-replay-matching")))
	b.wait("replayed the two", `document.getElementById("dlq-status").textContent === "Replayed 2 task(s)."`)
	check("replay type sleep", d.settle(ids, before))

	// Purge the fail tasks by type and reason, after confirming.
	b.do("filter by type fail", chromedp.SetValue(chromedp.ID("dlq-type"), "fail"), chromedp.SetValue(chromedp.ID("dlq-reason"), "BAD INPUT"))
	b.js("apply", `document.getElementById("dlq-filters").dispatchEvent(new Event("change"))`)
	b.wait("three fail dead letters", `document.querySelectorAll("#dlq-body tr[data-task]").length === 3`)
	b.do("press Purge", chromedp.Click(chromedp.ID("dlq-purge")))
	b.wait("the confirmation", `!document.getElementById("dlq-confirm").hidden && document.getElementById("dlq-confirm-text").textContent.includes('type "fail"')`)
	b.do("keep them", chromedp.Click(chromedp.ID("dlq-confirm-no")))
	if n := d.dlqMessages(); n != 5 {
		t.Fatalf("declining the purge left %d messages, want 5", n)
	}
	b.do("press Purge", chromedp.Click(chromedp.ID("dlq-purge")))
	b.do("confirm", chromedp.Click(chromedp.ID("dlq-confirm-yes")))
	b.wait("purged 3", `document.getElementById("dlq-status").textContent === "Purged 3 dead task(s)."`)
	for _, id := range ids[:3] {
		if code := d.call("GET", "/api/v1/tasks/"+id, "", nil); code != 404 {
			t.Errorf("purged task %s answers %d, want 404", id, code)
		}
	}
	check("purge type fail", d.settle(ids[3:], nil))
}
