// Package e2e drives the dashboard in headless Chromium against a real
// `triage dev` on the local emulators: the page, the API, the consumer,
// the promoter and the counters are the ones `make run` starts, so what
// these tests see is what an operator sees.
//
// Set TRIAGE_BROWSER_TESTS=off to skip them on a machine without
// Chromium; TRIAGE_SCREENSHOT_DIR saves a PNG of each main view there
// (make screenshots).
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/chromedp/chromedp"

	"github.com/triagehq/triage/internal/control"
	"github.com/triagehq/triage/internal/devserver"
	"github.com/triagehq/triage/internal/devserver/devtest"
	"github.com/triagehq/triage/internal/emulators/stacktest"
)

func TestMain(m *testing.M) { stacktest.Main(m) }

const token = "dev-e2e"

// dev is a running `triage dev` on one test's own table and queues.
type dev struct {
	t    *testing.T
	base string
	env  *stacktest.Env
}

// startDev runs `triage dev` in process on a fresh table and queues, with
// vars over the process environment; it stops when the test ends.
func startDev(t *testing.T, vars map[string]string) *dev {
	t.Helper()
	return startDevWith(t, vars, nil)
}

// startDevWith is startDev with the server's options changed by set.
func startDevWith(t *testing.T, vars map[string]string, set func(*devserver.Options)) *dev {
	t.Helper()
	env := stacktest.New(t)
	all := map[string]string{"TRIAGE_ADDR": "127.0.0.1:0", "TRIAGE_TOKEN": token, "TRIAGE_PREFIX": env.Prefix}
	for k, v := range vars {
		all[k] = v
	}
	return &dev{t: t, base: devtest.StartWith(t, all, set), env: env}
}

// call sends an API request with the admin token, decodes a JSON answer
// into out (when not nil) and returns the status.
func (d *dev) call(method, path, body string, out any) int {
	d.t.Helper()
	return devtest.Call(d.t, d.base, token, method, path, body, out)
}

type apiTask struct {
	ID          string `json:"id"`
	Type        string `json:"type"`
	Status      string `json:"status"`
	CompletedAt string `json:"completed_at"`
	CreatedAt   string `json:"created_at"`
	Attempts    int    `json:"attempts"`
}

func (d *dev) get(id string) apiTask {
	d.t.Helper()
	var tv apiTask
	if code := d.call("GET", "/api/v1/tasks/"+id, "", &tv); code != 200 {
		d.t.Fatalf("GET task %s: %d", id, code)
	}
	return tv
}

// submit creates tasks from submit bodies, 100 a batch, and returns their ids.
func (d *dev) submit(bodies []string) []string {
	d.t.Helper()
	var ids []string
	for start := 0; start < len(bodies); start += 100 {
		var res struct {
			Results []struct {
				Task  *apiTask `json:"task"`
				Error any      `json:"error"`
			} `json:"results"`
		}
		batch := `{"tasks":[` + strings.Join(bodies[start:min(start+100, len(bodies))], ",") + `]}`
		if code := d.call("POST", "/api/v1/tasks/batch", batch, &res); code != 200 {
			d.t.Fatalf("batch submit: %d", code)
		}
		for i, r := range res.Results {
			if r.Task == nil {
				d.t.Fatalf("batch item %d: %v", start+i, r.Error)
			}
			ids = append(ids, r.Task.ID)
		}
	}
	return ids
}

// waitTasks polls until every task in ids satisfies ok, or fails after 90 s.
func (d *dev) waitTasks(what string, ids []string, ok func(apiTask) bool) {
	d.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		pending := ""
		for _, id := range ids {
			if tv := d.get(id); !ok(tv) {
				pending = fmt.Sprintf("%s is %s (attempts %d)", id, tv.Status, tv.Attempts)
				break
			}
		}
		if pending == "" {
			return
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("waiting for %s: %s", what, pending)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// dlqMessages is what the three DLQs hold, visible or held by a reader.
func (d *dev) dlqMessages() int {
	d.t.Helper()
	n := 0
	for _, url := range d.env.DLQURLs {
		out, err := d.env.SQS.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
			QueueUrl: aws.String(url),
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages,
				types.QueueAttributeNameApproximateNumberOfMessagesNotVisible},
		})
		if err != nil {
			d.t.Fatalf("DLQ attributes: %v", err)
		}
		for _, v := range out.Attributes {
			k, _ := strconv.Atoi(v)
			n += k
		}
	}
	return n
}

// browser is one headless Chromium tab on the dev server's dashboard.
type browser struct {
	t       *testing.T
	ctx     context.Context
	mu      sync.Mutex
	console []chromedp.ConsoleMessage
	once    sync.Once
	stop    func()
}

// close ends the browser now (it ends with the test otherwise) and checks
// its console.
func (b *browser) close() { b.once.Do(b.stop) }

// chromiumPath is the browser the tests drive: TRIAGE_CHROMIUM, or
// Debian's chromium package.
func chromiumPath() string {
	if p := os.Getenv("TRIAGE_CHROMIUM"); p != "" {
		return p
	}
	return "/usr/bin/chromium"
}

// openBrowser starts Chromium (width × 1000) on the dashboard at base with
// the token in the fragment. When the test ends, uncaught exceptions and
// CSP violations in the console fail it.
func openBrowser(t *testing.T, base string, width int) *browser {
	t.Helper()
	if os.Getenv("TRIAGE_BROWSER_TESTS") == "off" {
		t.Skip("TRIAGE_BROWSER_TESTS=off: skipping the Chromium tests of the dashboard")
	}
	exe := chromiumPath()
	if st, err := os.Stat(exe); err != nil || st.IsDir() {
		t.Fatalf("no Chromium binary at %s (%v): run `make chromium`, point TRIAGE_CHROMIUM at one, or set TRIAGE_BROWSER_TESTS=off", exe, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(width, 1000),
	)...)
	tab, cancelTab := chromedp.NewContext(allocCtx)
	b := &browser{t: t, ctx: tab}
	var wg sync.WaitGroup
	b.stop = func() {
		cancelTab()
		wg.Wait()
		cancelAlloc()
		cancel()
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, m := range b.console {
			if m.IsException() || m.Source == "security" || strings.Contains(m.Text, "Content Security Policy") {
				t.Errorf("browser console: %s", m.String())
			}
		}
	}
	t.Cleanup(b.close)
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("start Chromium %s: %v", exe, err)
	}
	messages := chromedp.Console(tab)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for m, err := range messages {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.console = append(b.console, m)
			b.mu.Unlock()
		}
	}()
	b.do("open the dashboard", chromedp.Navigate(base+"/#token="+token))
	b.wait("the first refresh", `document.getElementById("updated").textContent !== ""`)
	return b
}

func (b *browser) text() string {
	c, cancel := context.WithTimeout(b.ctx, 2*time.Second)
	defer cancel()
	s, err := chromedp.Run(c, chromedp.Evaluate[string](`document.body.innerText`))
	if err != nil {
		return "(page text unavailable: " + err.Error() + ")"
	}
	return s
}

func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	c, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(c, actions...); err != nil {
		b.t.Fatalf("%s: %v\npage:\n%s", what, err, b.text())
	}
}

// click clicks the element sel inside the page, in one evaluation: on a
// part of the page that re-renders as it refreshes (the controls' rows),
// chromedp.Click finds a node and may then click a node that is gone
// ("Could not find node with given id").
func (b *browser) click(what, sel string) {
	b.t.Helper()
	expr := fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false; e.click(); return true; })()`, sel)
	_, err := chromedp.Run(b.ctx, chromedp.Poll[bool](expr,
		chromedp.WithPollingTimeout(15*time.Second), chromedp.WithPollingInterval(50*time.Millisecond)))
	if err != nil {
		b.t.Fatalf("%s: %v\npage:\n%s", what, err, b.text())
	}
}

// js runs a statement in the page.
func (b *browser) js(what, expr string) {
	b.t.Helper()
	b.do(what, chromedp.Evaluate[chromedp.Void](expr))
}

// lookup types id into the task lookup and presses Find, in one
// evaluation: a click by coordinates could land beside the button when a
// live refresh moves the layout between aiming and clicking (the cards
// above grow when their numbers arrive), and the lookup would be lost.
func (b *browser) lookup(what, id string) {
	b.t.Helper()
	q, _ := json.Marshal(id)
	b.js(what, `document.getElementById("lookup-id").value = `+string(q)+`; document.querySelector("#lookup button").click()`)
}

// wait waits until the expression is true in the page (30 s at most).
func (b *browser) wait(what, expr string) {
	b.t.Helper()
	_, err := chromedp.Run(b.ctx, chromedp.Poll[bool](expr,
		chromedp.WithPollingTimeout(30*time.Second), chromedp.WithPollingInterval(50*time.Millisecond)))
	if err != nil {
		b.t.Fatalf("waiting for %s: %v\npage:\n%s", what, err, b.text())
	}
}

func (b *browser) eval(expr string, out any) {
	b.t.Helper()
	raw, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]byte](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		b.t.Fatalf("evaluate %s: decode %s: %v", expr, raw, err)
	}
}

// screenshot saves the element sel ("" for the viewport) as name.png in
// TRIAGE_SCREENSHOT_DIR, if set.
func (b *browser) screenshot(name, sel string) {
	b.t.Helper()
	dir := os.Getenv("TRIAGE_SCREENSHOT_DIR")
	if dir == "" {
		return
	}
	shoot := chromedp.CaptureScreenshot()
	if sel != "" {
		shoot = chromedp.Screenshot(chromedp.CSS(sel))
	}
	shot, err := chromedp.Run(b.ctx, shoot)
	if err != nil {
		b.t.Fatalf("screenshot: %v", err)
	}
	if !bytes.HasPrefix(shot, []byte("\x89PNG")) {
		b.t.Fatalf("screenshot %s is not a PNG", name)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Fatal(err)
	}
	out := filepath.Join(dir, name+".png")
	if err := os.WriteFile(out, shot, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot saved to %s", out)
}

// settle waits until no task in ids is waiting or running, and each
// task in moved has died again since the completed_at given; it returns
// how many of ids are dead_letter.
func (d *dev) settle(ids []string, moved map[string]string) int {
	d.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		dead, busy := 0, ""
		for _, id := range ids {
			tv := d.get(id)
			switch {
			case tv.Status == "dead_letter" && (moved[id] == "" || tv.CompletedAt != moved[id]):
				dead++
			case tv.Status == "dead_letter", tv.Status == "queued", tv.Status == "executing", tv.Status == "retrying":
				busy = fmt.Sprintf("%s %s (%s)", id, tv.Status, tv.CompletedAt)
			}
		}
		if busy == "" {
			return dead
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("tasks did not settle in 90 s: %s", busy)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// finishedAt is each task's completed_at now.
func (d *dev) finishedAt(ids ...string) map[string]string {
	m := map[string]string{}
	for _, id := range ids {
		m[id] = d.get(id).CompletedAt
	}
	return m
}

// pause pauses all dispatch and waits until every consumer must have seen
// it: a consumer trusts the settings it read for control.DefaultCacheTTL,
// so a task received within that time of the pause may still start (CI
// once saw one of five "paused" echo tasks complete before its cancel).
func (d *dev) pause() {
	d.t.Helper()
	if code := d.call("POST", "/api/v1/control/pause", "", nil); code != 200 {
		d.t.Fatalf("pause: %d", code)
	}
	time.Sleep(control.DefaultCacheTTL + 250*time.Millisecond)
}
