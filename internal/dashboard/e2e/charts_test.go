package e2e

import (
	"fmt"
	"strconv"
	"testing"
)

// TestChartsFollowCompletions reads the throughput chart (completions per
// minute over the last hour, from the counters' buckets), runs five echo
// tasks, and sees the chart's completions rise by five; the status
// breakdown and the tasks-by-type bars show them too. Recent failures
// lists a dead-lettered task.
func TestChartsFollowCompletions(t *testing.T) {
	d := startDev(t, nil)
	dead := d.submit([]string{`{"type":"fail","max_attempts":1,"payload":{"times":1,"permanent":true,"message":"chart test failure"}}`})
	d.waitTasks("a dead letter", dead, func(tv apiTask) bool { return tv.Status == "dead_letter" })

	b := openBrowser(t, d.base, 1366)
	b.wait("the throughput chart", `document.querySelector("#chart-throughput svg") !== null`)
	var before string
	b.eval(`document.querySelector("#chart-throughput svg").dataset.completed`, &before)
	n, err := strconv.Atoi(before)
	if err != nil {
		t.Fatalf("chart's completed count %q", before)
	}
	ids := d.submit([]string{`{"type":"echo"}`, `{"type":"echo"}`, `{"type":"echo"}`, `{"type":"echo"}`, `{"type":"echo"}`})
	d.waitTasks("five echo tasks", ids, func(tv apiTask) bool { return tv.Status == "completed" })
	b.wait("the chart to count them", fmt.Sprintf(`Number(document.querySelector("#chart-throughput svg").dataset.completed) === %d`, n+5))
	b.wait("the status breakdown", `[...document.querySelectorAll("#chart-statuses rect.seg-completed title")].some(t => t.textContent.startsWith("completed: 5 "))`)
	b.wait("echo in the type bars", `document.querySelector('#chart-types g[data-type="echo"] title').textContent === "echo: 5"`)
	b.wait("the recent failure", `document.getElementById("recent-failures").textContent.includes("chart test failure")`)
	var failed string
	b.eval(`document.querySelector("#chart-throughput svg").dataset.failed`, &failed)
	if failed != "1" {
		t.Errorf("the chart counts %s dead letters in the last hour, want 1", failed)
	}
	// The aging rows measure against the dev server's schedule: low after
	// 10 min, medium after 20, a promoter run every 5 s.
	b.wait("the aging rows", `document.querySelector('[data-queue="low"] [data-k="promotion"]').textContent === "after 10 min 0 s waiting" &&
		document.querySelector('[data-queue="low"] [data-k="bound"]').textContent === "30 min 10 s" &&
		document.querySelector('[data-queue="medium"] [data-k="promotion"]').textContent === "after 20 min 0 s waiting"`)
	b.screenshot("overview", "section[aria-labelledby=\"queues-title\"]")

	// At a phone's width the page does not scroll sideways (wide tables
	// scroll inside their card).
	phone := openBrowser(t, d.base, 390)
	phone.wait("the task list", `document.querySelectorAll("#tasks-body tr[data-id]").length === 6`)
	var widths struct{ Page, Window int }
	phone.eval(`({Page: document.documentElement.scrollWidth, Window: window.innerWidth})`, &widths)
	if widths.Page > widths.Window {
		t.Errorf("at 390 px the page is %d px wide: it scrolls sideways", widths.Page)
	}
	phone.screenshot("phone", "")
}
