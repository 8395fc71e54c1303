package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/triagehq/triage/internal/emulators"
)

// ownWorkerPage is the page whose "Your own worker locally" section the
// test runs.
const ownWorkerPage = "docs/client-and-workers.md"

// schedulesPage is the page whose schedule transcript the test runs too.
const schedulesPage = "docs/schedules.md"

// ownWorkerSection is ownWorkerPage's "Your own worker locally" section: the
// worker's source (its Go block) and the transcript (the fenced block after
// "In a second terminal").
func ownWorkerSection(t *testing.T, root string) (src string, steps []transcript) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(ownWorkerPage)))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "## Your own worker locally\n")
	if !ok {
		t.Fatalf(`%s has no "Your own worker locally" section`, ownWorkerPage)
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	_, rest, _ := strings.Cut(sec, "```go\n")
	src, _, _ = strings.Cut(rest, "```")
	_, rest, _ = strings.Cut(sec, "In a second terminal")
	_, rest, _ = strings.Cut(rest, "```\n")
	block, _, _ := strings.Cut(rest, "```")
	for _, line := range strings.Split(strings.TrimRight(block, "\n"), "\n") {
		switch {
		case strings.HasPrefix(line, "$ "):
			steps = append(steps, transcript{cmd: strings.TrimPrefix(line, "$ ")})
		case len(steps) > 0:
			steps[len(steps)-1].want = append(steps[len(steps)-1].want, line)
		}
	}
	if src == "" || len(steps) < 5 {
		t.Fatalf("%s: worker source %d bytes, %d transcript steps", ownWorkerPage, len(src), len(steps))
	}
	return src, steps
}

// writeWorkerModule lays out the module example.com/greeter in dir, with
// the page's worker in myworker/, and a go.mod requiring triage through a replace with
// root, with the repository's own requirements and go.sum (what `go mod
// tidy` would settle), as worker/usermodule_test.go does.
func writeWorkerModule(t *testing.T, root, dir, src string) {
	t.Helper()
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	var goLine, requires strings.Builder
	inBlock := false
	for _, line := range strings.Split(string(mod), "\n") {
		switch {
		case strings.HasPrefix(line, "go "):
			goLine.WriteString(line)
		case strings.HasPrefix(line, "require ("):
			inBlock = true
			requires.WriteString(line + "\n")
		case inBlock:
			requires.WriteString(line + "\n")
			inBlock = strings.TrimSpace(line) != ")"
		}
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "myworker"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"go.mod": fmt.Sprintf("module example.com/greeter\n\n%s\n\nrequire github.com/triagehq/triage v0.0.0\n\n%s\nreplace github.com/triagehq/triage => %s\n",
			goLine.String(), requires.String(), filepath.ToSlash(root)),
		"go.sum":           string(sum),
		"myworker/main.go": src,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The done-when test of issue 24 item 1: a user's own worker, in a module
// outside the repository, beside `triage dev --no-demo-handlers` on the
// emulators. The page's transcript runs literally, in one bash (the
// exports of `eval "$(triage env)"` carry from step to step), in the
// directory holding the module: it submits 20 tasks of the worker's own
// type BEFORE the worker starts, then starts it, and waits. Every task must
// be completed by the user's handler (its result says so), on its first
// attempt (the dev server's consumer, which has no handler for the type,
// handed the messages back without spending one), and none dead-lettered.
func TestOwnWorkerBesideDev(t *testing.T) {
	if testing.Short() {
		t.Skip("starts triage dev and builds a module")
	}
	root, err := emulators.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	src, steps := ownWorkerSection(t, root)
	bin := buildCLI(t, root)
	work := t.TempDir()
	writeWorkerModule(t, root, work, src)
	env := append(cleanEnv(), "XDG_CACHE_HOME="+t.TempDir(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		// Offline, as a user's CI with a warm cache: everything the worker
		// needs is in the module cache once this repository's tests built.
		"GOPROXY=off", "GOSUMDB=off", "GOWORK=off", "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod")
	// The transcript submits, then builds the worker: on a loaded machine
	// (several agents building at once) that build has taken over the
	// default TRIAGE_UNHANDLED_AFTER of 5 min, after which the dev
	// server's consumer rightly dead-letters the tasks. The dev server
	// here waits longer, so the test checks the hand-over, not the build's
	// speed; TestUnhandledTypeWaitsForItsWorker covers the dead-lettering.
	devEnv := append(slices.Clone(env), "TRIAGE_UNHANDLED_AFTER=30m")
	_, addr, devOut, _ := startDevWithToken(t, bin, root, devEnv, "tok", "--no-demo-handlers")
	if !strings.Contains(devOut.String(), "eval \"$(triage env)\"") {
		t.Errorf("the banner does not say how a worker gets its settings:\n%s", devOut.String())
	}

	// One script, a marker before each step, so each step's output can be
	// told apart; its own process group, so the worker it starts in the
	// background is ended with it.
	var script strings.Builder
	for i, st := range steps {
		fmt.Fprintf(&script, "echo '@@step %d'\n{ %s\n} 2>&1\n", i, st.cmd)
	}
	sh := exec.Command("bash", "-c", script.String())
	sh.Dir, sh.Env = work, env
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	t.Cleanup(func() {
		if sh.Process != nil {
			_ = syscall.Kill(-sh.Process.Pid, syscall.SIGKILL)
		}
	})
	out, err := sh.Output()
	if err != nil {
		t.Errorf("the transcript's script: %v", err)
	}
	parts := strings.Split(string(out), "@@step ")
	for i, st := range steps {
		var got []string
		if i+1 < len(parts) {
			_, body, _ := strings.Cut(parts[i+1], "\n")
			got = strings.Split(body, "\n")
		}
		if want, have := normalize(st.want), normalize(got); !slices.Equal(want, have) {
			t.Errorf("$ %s\nprinted:\n%s\nthe page shows (normalized, sorted):\n  %s\ngot:\n  %s", st.cmd, strings.Join(got, "\n"), strings.Join(want, "\n  "), strings.Join(have, "\n  "))
		}
	}
	if log, err := os.ReadFile(filepath.Join(work, "worker.log")); err == nil && t.Failed() {
		t.Logf("worker.log:\n%s", log)
	}

	// The periodic tasks page's transcript needs a server that accepts its
	// type, as this one does: run it here rather than start another.
	t.Run("schedules page", func(t *testing.T) {
		steps := readmeTranscript(t, root, schedulesPage, "A schedule enqueues one task each time")
		if len(steps) < 3 {
			t.Fatalf("%s: the transcript has %d commands", schedulesPage, len(steps))
		}
		for _, st := range steps {
			sh := exec.Command("bash", "-c", "{ "+st.cmd+"\n} 2>&1")
			sh.Dir, sh.Env = work, env
			got, _ := sh.Output()
			if want, have := normalize(st.want), normalize(strings.Split(string(got), "\n")); !slices.Equal(want, have) {
				t.Errorf("%s: $ %s\nprinted:\n%s\nthe page shows (normalized, sorted):\n  %s\ngot:\n  %s", schedulesPage, st.cmd, got, strings.Join(want, "\n  "), strings.Join(have, "\n  "))
			}
		}
	})

	// Every task, from the API: completed by the user's handler, on the
	// first attempt.
	ids, err := os.ReadFile(filepath.Join(work, "ids.txt"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(ids))
	if len(lines) != 20 {
		t.Fatalf("%d ids, want 20", len(lines))
	}
	for _, id := range lines {
		req, _ := http.NewRequest("GET", "http://"+addr+"/api/v1/tasks/"+id, nil)
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var tk struct {
			Status   string
			Attempts int
			Result   string
			Payload  struct{ Name string }
		}
		if err := json.Unmarshal(body, &tk); err != nil {
			t.Fatalf("task %s: %v: %s", id, err, body)
		}
		if tk.Status != "completed" || tk.Attempts != 1 || tk.Result != "hello, "+tk.Payload.Name {
			t.Errorf("task %s: %s after %d attempts, result %q; want completed on attempt 1 by the user's worker", id, tk.Status, tk.Attempts, tk.Result)
		}
	}
}
