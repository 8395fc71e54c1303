package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromiumPath is the browser the test drives: TRIAGE_CHROMIUM, or Debian's
// chromium package.
func chromiumPath() string {
	if p := os.Getenv("TRIAGE_CHROMIUM"); p != "" {
		return p
	}
	return "/usr/bin/chromium"
}

// TestDashboardInBrowser drives the page in headless Chromium against a fake
// API on the same loopback server: token from the fragment, queue cards,
// task table, submit (good, invalid JSON, API field error), task detail and
// cancel, error banner, 401 back to the token form, and a screenshot.
//
// Set TRIAGE_BROWSER_TESTS=off to skip it on a machine without Chromium;
// otherwise a missing browser fails the test.
func TestDashboardInBrowser(t *testing.T) {
	if os.Getenv("TRIAGE_BROWSER_TESTS") == "off" {
		t.Skip("TRIAGE_BROWSER_TESTS=off: skipping the Chromium test of the dashboard")
	}
	exe := chromiumPath()
	if st, err := os.Stat(exe); err != nil || st.IsDir() {
		t.Fatalf("no Chromium binary at %s (%v): run `make deps` to install Debian's chromium package, "+
			"point TRIAGE_CHROMIUM at a Chromium binary, or set TRIAGE_BROWSER_TESTS=off to skip this test", exe, err)
	}
	start := time.Now()

	const token = "t0k"
	fake := newFakeAPI(token)
	srv := httptest.NewServer(fake.routes(Handler()))
	defer srv.Close()

	// Everything, the browser included, ends within 50 s.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	var chromeOut lockedBuffer
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.UserDataDir(t.TempDir()),
		// No internet here: keep Chromium from trying to reach Google.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1366, 1000),
		chromedp.CombinedOutput(&chromeOut),
	)...)
	defer cancelAlloc() // waits for Chromium to exit, before t.TempDir is removed
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	defer cancelTab()
	defer func() {
		if t.Failed() {
			t.Logf("Chromium output:\n%s", chromeOut.String())
		}
	}()

	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium %s: %v", exe, err)
	}
	t.Logf("Chromium started in %v", time.Since(start).Round(time.Millisecond))

	// Collect the console: uncaught exceptions and CSP violations fail the test.
	var (
		consoleMu sync.Mutex
		console   []chromedp.ConsoleMessage
		consoleWG sync.WaitGroup
	)
	messages := chromedp.Console(ctx)
	consoleWG.Add(1)
	go func() {
		defer consoleWG.Done()
		for m, err := range messages {
			if err != nil {
				return
			}
			consoleMu.Lock()
			console = append(console, m)
			consoleMu.Unlock()
		}
	}()

	// pageText is the visible text, for failure messages.
	pageText := func() string {
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		s, err := chromedp.Run(c, chromedp.Evaluate[string](`document.body.innerText`))
		if err != nil {
			return "(page text unavailable: " + err.Error() + ")"
		}
		return s
	}
	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := chromedp.Do(c, actions...); err != nil {
			t.Fatalf("%s: %v\npage:\n%s", what, err, pageText())
		}
	}
	// waitJS waits until the JavaScript expression is true in the page.
	waitJS := func(what, expr string) {
		t.Helper()
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](expr,
			chromedp.WithPollingTimeout(10*time.Second), chromedp.WithPollingInterval(50*time.Millisecond)))
		if err != nil {
			t.Fatalf("waiting for %s: %v\npage:\n%s", what, err, pageText())
		}
	}
	eval := func(expr string, out any) {
		t.Helper()
		raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](expr))
		if err != nil {
			t.Fatalf("evaluate %s: %v", expr, err)
		}
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("evaluate %s: decode %s: %v", expr, raw, err)
		}
	}
	text := func(id string) string {
		t.Helper()
		var s string
		eval(`document.getElementById("`+id+`").textContent.trim()`, &s)
		return s
	}

	// 1. Open the dashboard with the token in the fragment.
	do("open the dashboard", chromedp.Navigate(srv.URL+"/#token="+token))
	waitJS("the queue cards", `document.querySelector('[data-queue="high"] [data-k="depth"]').textContent === "7"`)

	var queues map[string]map[string]string
	eval(`Object.fromEntries([...document.querySelectorAll('[data-queue]')].map(c => [c.dataset.queue,
		Object.fromEntries([...c.querySelectorAll('[data-k]:not([data-k="promotion"]):not([data-k="bound"])')].map(d => [d.dataset.k, d.textContent.trim()]))]))`, &queues)
	wantQueues := map[string]map[string]string{
		"high":   {"depth": "7", "in_flight": "2", "delayed": "1", "dlq_depth": "0", "oldest_age_seconds": "13 s", "wait": "≤ 16 ms / ≤ 2.1 s"},
		"medium": {"depth": "3", "in_flight": "0", "delayed": "0", "dlq_depth": "0", "oldest_age_seconds": "–", "wait": "–"},
		"low":    {"depth": "11", "in_flight": "1", "delayed": "5", "dlq_depth": "4", "oldest_age_seconds": "12 min 34 s", "wait": "–"},
	}
	if !reflect.DeepEqual(queues, wantQueues) {
		t.Errorf("queue cards show %v, want %v", queues, wantQueues)
	}
	var statuses map[string]string
	eval(`Object.fromEntries([...document.querySelectorAll('[data-status]')].map(d => [d.dataset.status, d.textContent.trim()]))`, &statuses)
	wantStatuses := map[string]string{"scheduled": "1", "queued": "21", "executing": "3", "retrying": "2", "completed": "130", "cancelled": "6", "dead_letter": "4"}
	if !reflect.DeepEqual(statuses, wantStatuses) {
		t.Errorf("status counts show %v, want %v", statuses, wantStatuses)
	}
	if c, f := text("tp-completed"), text("tp-failed"); c != "42" || f != "5" {
		t.Errorf("throughput shows completed %q failed %q, want 42 and 5", c, f)
	}

	// 1b. The page opened the live event stream with the token (fetch, not
	// EventSource, which cannot send it) and says so.
	waitJS("the live-events pill", `document.getElementById("live").textContent === "live"`)
	fake.mu.Lock()
	streams := fake.eventStreams
	fake.mu.Unlock()
	if streams != 1 {
		t.Errorf("%d event streams opened, want 1", streams)
	}

	// 2. The token left the address bar and lives in sessionStorage.
	var loc struct {
		Href, Stored string
	}
	eval(`({Href: location.href, Stored: sessionStorage.getItem("triage.token") || ""})`, &loc)
	if strings.Contains(loc.Href, token) || strings.Contains(loc.Href, "#") {
		t.Errorf("the token is still in the URL: %s", loc.Href)
	}
	if loc.Stored != token {
		t.Errorf("sessionStorage token %q, want %q", loc.Stored, token)
	}

	// 3. The task table lists the fake's tasks.
	waitJS("the task table", `document.querySelectorAll('#tasks-body tr[data-id]').length === 3`)
	var rows [][]string
	eval(`[...document.querySelectorAll('#tasks-body tr[data-id]')].map(tr => [...tr.cells].map(td => td.textContent.trim()))`, &rows)
	// Cells: select box, id, type, priority, status (a mark and the name),
	// attempts, created, started, duration, actions.
	wantRows := [][]string{
		{"01JTESTTASK0000000000000AA", "echo", "high", "○ queued", "0 / 3"},
		{"01JTESTTASK0000000000000BB", "sleep", "low→medium", "▶ executing", "1 / 5"},
		{"01JTESTTASK0000000000000CC", "fail", "medium", "✕ dead_letter", "3 / 3"},
	}
	for i, want := range wantRows {
		if i >= len(rows) || len(rows[i]) != 10 || !reflect.DeepEqual(rows[i][1:6], want) {
			t.Errorf("task row %d: %v, want %v + created, started, duration, actions", i, rows, want)
			break
		}
	}
	if _, _, limits, _ := fake.snapshot(); len(limits) == 0 || limits[0] != "50" {
		t.Errorf("GET /api/v1/tasks limits %v, want limit=50", limits)
	}

	// 4. Submit a task through the form.
	const payload = `{"n": 42, "msg": "hi"}`
	do("fill and send the submit form",
		chromedp.SendKeys(chromedp.ID("f-type"), "echo"),
		chromedp.SetValue(chromedp.ID("f-priority"), "high"),
		chromedp.SendKeys(chromedp.ID("f-payload"), payload),
		chromedp.SendKeys(chromedp.ID("f-max-attempts"), "5"),
		chromedp.Click(chromedp.ID("submit-button")),
	)
	waitFor(t, "the fake API to receive the POST", 10*time.Second, func() bool {
		s, _, _, _ := fake.snapshot()
		return len(s) == 1
	})
	submits, _, _, _ := fake.snapshot()
	got := submits[0]
	if got.Type != "echo" || got.Priority != "high" || got.MaxAttempts == nil || *got.MaxAttempts != 5 || string(got.Payload) != payload {
		t.Errorf("POST /api/v1/tasks got type %q priority %q max_attempts %v payload %s; want echo, high, 5, %s",
			got.Type, got.Priority, got.MaxAttempts, got.Payload, payload)
	}
	newID := "01JTESTNEW10000010000000000"
	waitJS("the new task in the table", `!!document.querySelector('#tasks-body tr[data-id="`+newID+`"]')`)
	if s := text("submit-status"); !strings.Contains(s, newID) {
		t.Errorf("submit status %q does not name %s", s, newID)
	}

	// 5. An invalid payload is refused next to the field, and never sent.
	do("type an invalid payload",
		chromedp.Evaluate[chromedp.Void](`document.getElementById("f-payload").value = ""`), // (SetValue and Clear refuse an empty textarea)
		chromedp.SendKeys(chromedp.ID("f-payload"), `{"n": 4`),
		chromedp.Click(chromedp.ID("submit-button")),
	)
	waitJS("the payload field error", `!document.getElementById("err-payload").hidden`)
	if s := text("err-payload"); !strings.Contains(s, "is not valid JSON") {
		t.Errorf("payload error %q, want it to say the JSON is invalid", s)
	}
	var invalid string
	eval(`document.getElementById("f-payload").getAttribute("aria-invalid")`, &invalid)
	if invalid != "true" {
		t.Errorf("payload textarea aria-invalid %q, want true", invalid)
	}
	if s, _, _, _ := fake.snapshot(); len(s) != 1 {
		t.Errorf("the page sent an invalid payload: %d POSTs", len(s))
	}

	// 6. A field error from the API shows next to that field.
	do("send a max_attempts the API refuses",
		chromedp.SetValue(chromedp.ID("f-payload"), `{}`),
		chromedp.SetValue(chromedp.ID("f-max-attempts"), "0"),
		chromedp.Click(chromedp.ID("submit-button")),
	)
	waitJS("the max_attempts field error", `!document.getElementById("err-max_attempts").hidden`)
	if s := text("err-max_attempts"); s != "max_attempts: must be between 1 and 100" {
		t.Errorf("max_attempts error %q, want the API's message", s)
	}
	var payloadErrHidden bool
	eval(`document.getElementById("err-payload").hidden`, &payloadErrHidden)
	if !payloadErrHidden {
		t.Error("the old payload error is still shown")
	}

	// 7. Click a row, see its JSON, and cancel it.
	const cancelID = "01JTESTTASK0000000000000AA"
	do("click a task row", chromedp.Click(chromedp.CSS(`#tasks-body tr[data-id="`+cancelID+`"] td:nth-child(2)`)))
	waitJS("the task's fields", `document.getElementById("detail-id").textContent === "`+cancelID+`" && document.querySelector('#detail-fields [data-field="type"]') !== null`)
	waitJS("the Cancel button", `!document.getElementById("task-cancel").disabled`)
	var retryDisabled bool
	eval(`document.getElementById("task-retry").disabled`, &retryDisabled)
	if !retryDisabled {
		t.Error("Retry is enabled for a queued task")
	}
	do("press Cancel", chromedp.Click(chromedp.ID("task-cancel")))
	waitFor(t, "the fake API to receive POST .../cancel", 10*time.Second, func() bool {
		_, c, _, _ := fake.snapshot()
		return len(c) == 1
	})
	if _, c, _, _ := fake.snapshot(); c[0] != cancelID {
		t.Errorf("cancelled %v, want %s", c, cancelID)
	}
	waitJS("the cancelled task", `document.querySelector('#detail-fields [data-field="status"]').textContent.includes("cancelled")`)
	waitJS("the cancelled row", `document.querySelector('#tasks-body tr[data-id="`+cancelID+`"] .badge.status-cancelled') !== null`)

	// 8. An API error shows in the banner.
	do("press Pause", chromedp.Click(chromedp.ID("pause")))
	waitJS("the error banner", `!document.getElementById("banner").hidden`)
	if s := text("banner-list"); !strings.Contains(s, "the token lacks the admin scope") || !strings.Contains(s, "403") {
		t.Errorf("banner %q, want the API's 403 message", s)
	}

	// 9. A screenshot of the whole page.
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	file := filepath.Join(t.TempDir(), "dashboard.png")
	if err := os.WriteFile(file, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(file); err != nil || st.Size() == 0 {
		t.Fatalf("screenshot file %s: %v, size 0", file, err)
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("the screenshot is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 800 || b.Dy() < 600 {
		t.Errorf("screenshot is %dx%d, want at least 800x600", b.Dx(), b.Dy())
	}
	if dir := os.Getenv("TRIAGE_SCREENSHOT_DIR"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "dashboard.png")
		if err := os.WriteFile(out, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot saved to %s", out)
	}

	// 10. A rejected token brings the token form back.
	// (Setting the fragment is what pasting a new #token= link in the same
	// tab does; the page listens for hashchange.)
	do("open with a wrong token", chromedp.Evaluate[chromedp.Void](`location.hash = "token=wrong"`))
	waitJS("the token form", `!document.getElementById("login").hidden && document.getElementById("app").hidden`)
	if s := text("login-reason"); !strings.Contains(s, "rejected") {
		t.Errorf("token form says %q, want it to say the token was rejected", s)
	}
	if _, _, _, bad := fake.snapshot(); bad == 0 {
		t.Error("the fake API saw no request with the wrong token")
	}
	eval(`({Href: location.href, Stored: sessionStorage.getItem("triage.token") || ""})`, &loc)
	if strings.Contains(loc.Href, "wrong") || loc.Stored != "" {
		t.Errorf("after a 401: URL %s, stored token %q; want neither to hold the token", loc.Href, loc.Stored)
	}

	// The console has no exceptions and no CSP violations.
	cancelTab()
	consoleWG.Wait()
	consoleMu.Lock()
	for _, m := range console {
		if m.IsException() || m.Source == "security" || strings.Contains(m.Text, "Content Security Policy") {
			t.Errorf("browser console: %s", m.String())
		}
	}
	consoleMu.Unlock()
	t.Logf("browser test took %v", time.Since(start).Round(time.Millisecond))
}
