package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestTaskListPages250 pages through 250 tasks 25 at a time with Older →
// and sees each exactly once, newest first (created times never rise down
// the list, and the ids are the 250 submitted), then walks back with
// ← Newer to the same first page. Dispatch is paused so the tasks stay
// put; the list reads one page per request (GET /tasks?limit=25&cursor=).
// It also checks the filters: two statuses at once, a type from the
// dropdown, and an id lookup.
func TestTaskListPages250(t *testing.T) {
	d := startDev(t, nil)
	d.pause()
	var bodies []string
	for i := range 250 {
		typ := "echo"
		if i%10 == 0 {
			typ = "noop"
		}
		bodies = append(bodies, fmt.Sprintf(`{"type":%q,"priority":%q,"payload":{"n":%d}}`, typ, []string{"high", "medium", "low"}[i%3], i))
	}
	ids := d.submit(bodies)
	// Cancel five, so a two-status filter has something to find.
	for _, id := range ids[:5] {
		if code := d.call("POST", "/api/v1/tasks/"+id+"/cancel", "", nil); code != 200 {
			t.Fatalf("cancel: %d", code)
		}
	}

	b := openBrowser(t, d.base, 1366)
	b.do("25 a page", chromedp.SetValue(chromedp.ID("page-size"), "25"))
	b.js("apply", `document.getElementById("filters").dispatchEvent(new Event("change"))`)
	b.wait("page 1 of 25", `document.querySelectorAll("#tasks-body tr[data-id]").length === 25 && document.getElementById("page-info").textContent === "page 1"`)

	type row struct{ ID, Created string }
	readPage := func() []row {
		var rows []row
		b.eval(`[...document.querySelectorAll("#tasks-body tr[data-id]")].map(tr => ({ID: tr.dataset.id, Created: tr.cells[6].querySelector("time").dateTime}))`, &rows)
		return rows
	}
	var seen []row
	var first []row
	for page := 1; ; page++ {
		if page > 20 {
			t.Fatal("paging never ended")
		}
		rows := readPage()
		if page == 1 {
			first = rows
		}
		seen = append(seen, rows...)
		var last bool
		b.eval(`document.getElementById("page-next").disabled`, &last)
		if last {
			break
		}
		marker := rows[0].ID
		b.do("press Older", chromedp.Click(chromedp.ID("page-next")))
		b.wait(fmt.Sprintf("page %d", page+1), fmt.Sprintf(`document.getElementById("page-info").textContent === "page %d" && document.querySelector("#tasks-body tr[data-id]") && document.querySelector("#tasks-body tr[data-id]").dataset.id !== %q`, page+1, marker))
	}
	got := map[string]int{}
	for i, r := range seen {
		got[r.ID]++
		if i > 0 && r.Created > seen[i-1].Created {
			t.Errorf("row %d (%s, created %s) is newer than the row above it (%s)", i, r.ID, r.Created, seen[i-1].Created)
		}
	}
	if len(seen) != 250 || len(got) != 250 {
		t.Fatalf("paged through %d rows, %d distinct; want 250 each seen once", len(seen), len(got))
	}
	for _, id := range ids {
		if got[id] != 1 {
			t.Errorf("task %s seen %d times", id, got[id])
		}
	}
	for range 9 {
		b.do("press Newer", chromedp.Click(chromedp.ID("page-prev")))
	}
	b.wait("back on page 1", `document.getElementById("page-info").textContent === "page 1" && document.getElementById("page-prev").disabled`)
	b.wait("the same first page", fmt.Sprintf(`document.querySelector("#tasks-body tr[data-id]").dataset.id === %q`, first[0].ID))

	// Two statuses at once: the five cancelled and nothing else but queued.
	b.js("check cancelled", `document.querySelector('#filters input[value="cancelled"]').click()`)
	b.wait("only cancelled tasks", `[...document.querySelectorAll("#tasks-body tr[data-id]")].length === 5`)
	b.screenshot("tasks", "#view-tasks")
	// Row actions follow the status: a cancelled task can be deleted, not
	// retried or cancelled.
	var acts map[string]bool
	b.eval(fmt.Sprintf(`Object.fromEntries([...document.querySelectorAll('#tasks-body tr[data-id=%q] button[data-action]')].map(x => [x.dataset.action, !x.disabled]))`, ids[0]), &acts)
	if want := map[string]bool{"retry": false, "cancel": false, "delete": true}; fmt.Sprint(acts) != fmt.Sprint(want) {
		t.Errorf("a cancelled task's row actions enabled %v, want %v", acts, want)
	}
	b.js("check queued too", `document.querySelector('#filters input[value="queued"]').click()`)
	b.wait("cancelled and queued tasks", `document.querySelectorAll("#tasks-body tr[data-id]").length === 25 && !document.getElementById("page-next").disabled`)
	var statuses []string
	b.eval(`[...new Set([...document.querySelectorAll("#tasks-body tr[data-id] td:nth-child(5)")].map(td => td.textContent.trim()))]`, &statuses)
	for _, s := range statuses {
		if !strings.HasSuffix(s, "queued") && !strings.HasSuffix(s, "cancelled") {
			t.Errorf("status filter queued+cancelled shows %q", s)
		}
	}
	b.js("uncheck", `document.querySelectorAll('#filters input[name="status"]:checked').forEach(x => x.click())`)

	// Bulk: select three queued echo tasks on page 1, cancel them, then delete
	// them (Delete asks twice).
	b.wait("page 1 unfiltered", `!document.body.dataset.refreshing && document.querySelectorAll("#tasks-body tr[data-id]").length === 25 && document.getElementById("page-info").textContent === "page 1" &&
		document.getElementById("tasks-count").textContent === "25 tasks on this page, more older" && document.querySelectorAll('#filters input:checked').length === 0`)
	var picked []string
	// (echo ones: the type filter below counts the 25 noop tasks)
	b.eval(`[...document.querySelectorAll("#tasks-body tr[data-id]")].filter(tr => tr.cells[2].textContent === "echo").slice(0, 3).map(tr => tr.dataset.id)`, &picked)
	for _, id := range picked {
		b.js("select "+id, fmt.Sprintf(`document.querySelector('#tasks-body input[data-check=%q]').click()`, id))
	}
	b.wait("three selected", `document.getElementById("bulk-count").textContent === "3 selected" && document.getElementById("bulk-cancel").textContent === "Cancel 3" && document.getElementById("bulk-retry").disabled && document.getElementById("bulk-delete").disabled`)
	b.do("bulk cancel", chromedp.Click(chromedp.ID("bulk-cancel")))
	b.wait("cancel: 3 done", `document.getElementById("bulk-status").textContent === "cancel: 3 done"`)
	for _, id := range picked {
		if st := d.get(id).Status; st != "cancelled" {
			t.Errorf("bulk-cancelled task %s is %s", id, st)
		}
	}
	b.wait("the cancelled rows", fmt.Sprintf(`!document.body.dataset.refreshing && (document.querySelector('#tasks-body tr[data-id=%q] td:nth-child(5)')?.textContent || "").endsWith("cancelled")`, picked[0]))
	for _, id := range picked {
		b.js("select "+id, fmt.Sprintf(`document.querySelector('#tasks-body input[data-check=%q]').click()`, id))
	}
	b.wait("Delete 3 offered", `document.getElementById("bulk-delete").textContent === "Delete 3"`)
	b.do("bulk delete, asked", chromedp.Click(chromedp.ID("bulk-delete")))
	b.wait("the question", `document.getElementById("bulk-delete").textContent === "Really delete 3?"`)
	b.do("bulk delete, confirmed", chromedp.Click(chromedp.ID("bulk-delete")))
	b.wait("delete: 3 done", `document.getElementById("bulk-status").textContent === "delete: 3 done"`)
	for _, id := range picked {
		if code := d.call("GET", "/api/v1/tasks/"+id, "", nil); code != 404 {
			t.Errorf("bulk-deleted task %s answers %d", id, code)
		}
	}

	// The type dropdown lists the known types (from /stats); noop is 25.
	b.wait("noop in the type dropdown", `[...document.getElementById("filter-type").options].some(o => o.value === "noop")`)
	b.do("choose noop", chromedp.SetValue(chromedp.ID("filter-type"), "noop"))
	b.js("apply", `document.getElementById("filters").dispatchEvent(new Event("change"))`)
	b.wait("25 noop tasks", `!document.body.dataset.refreshing && document.querySelectorAll("#tasks-body tr[data-id]").length === 25 && [...document.querySelectorAll("#tasks-body tr[data-id] td:nth-child(3)")].every(td => td.textContent === "noop")`)
	// Without the type index (the default) the listing walks every task, so
	// it cannot know that no noop task is older than the last one shown
	// until it has looked: Older → then shows none and offers no more.
	var nextOpen bool
	b.eval(`!document.getElementById("page-next").disabled`, &nextOpen)
	if nextOpen {
		b.do("older noop tasks", chromedp.Click(chromedp.ID("page-next")))
		b.wait("no older noop task", `!document.body.dataset.refreshing && document.getElementById("page-info").textContent === "page 2" && document.querySelectorAll("#tasks-body tr[data-id]").length === 0 && document.getElementById("page-next").disabled`)
	}

	// Id lookup shows that task alone, and opens it.
	b.lookup("look up a task", strings.ToLower(ids[42]))
	b.wait("the looked-up task", fmt.Sprintf(`document.querySelectorAll("#tasks-body tr[data-id]").length === 1 && document.querySelector('#tasks-body tr[data-id=%q]') !== null && document.getElementById("detail-id").textContent === %q`, ids[42], ids[42]))
	b.lookup("look up a malformed id", "nope")
	b.wait("the lookup error", `!document.getElementById("lookup-error").hidden`)
}

// TestFilteredPageFills shows a page of a filter the indexes cannot apply
// (a type, without the type index) full even when the API's first answer
// is short: five "sleep" tasks older than 300 echo tasks lie past the first
// call's bound (10 entries per row asked for), so the page asks again from
// the cursor and shows all five, with no older page offered.
func TestFilteredPageFills(t *testing.T) {
	d := startDev(t, nil)
	d.pause()
	var rare, others []string
	for i := range 5 {
		rare = append(rare, fmt.Sprintf(`{"type":"sleep","payload":{"seconds":%d}}`, i))
	}
	for i := range 300 {
		others = append(others, fmt.Sprintf(`{"type":"echo","payload":{"n":%d}}`, i))
	}
	rareIDs := d.submit(rare)
	d.submit(others)
	var first struct {
		Tasks []json.RawMessage `json:"tasks"`
		Next  string            `json:"next_cursor"`
	}
	if code := d.call("GET", "/api/v1/tasks?type=sleep&limit=25", "", &first); code != 200 || len(first.Tasks) != 0 || first.Next == "" {
		t.Fatalf("GET /tasks?type=sleep&limit=25: %d, %d tasks, cursor %q; want 200, none yet and a cursor (the premise of this test)", code, len(first.Tasks), first.Next)
	}

	b := openBrowser(t, d.base, 1366)
	b.do("25 a page", chromedp.SetValue(chromedp.ID("page-size"), "25"))
	b.wait("sleep in the type dropdown", `[...document.getElementById("filter-type").options].some(o => o.value === "sleep")`)
	b.do("choose sleep", chromedp.SetValue(chromedp.ID("filter-type"), "sleep"))
	b.js("apply", `document.getElementById("filters").dispatchEvent(new Event("change"))`)
	b.wait("the five sleep tasks on page 1", `!document.body.dataset.refreshing && document.getElementById("page-info").textContent === "page 1" &&
		document.querySelectorAll("#tasks-body tr[data-id]").length === 5 && document.getElementById("page-next").disabled`)
	var shown []string
	b.eval(`[...document.querySelectorAll("#tasks-body tr[data-id]")].map(tr => tr.dataset.id)`, &shown)
	slices.Sort(shown)
	slices.Sort(rareIDs)
	if !slices.Equal(shown, rareIDs) {
		t.Fatalf("page shows %v, want the sleep tasks %v", shown, rareIDs)
	}
}
