package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/emulators"
)

// transcript is one "$ command" of a page and the output it shows.
type transcript struct {
	cmd  string
	want []string
}

// The transcripts the docs show, each the first fenced block after the text
// that introduces it, run in this order against one `triage dev`: the 1,000
// tasks of the CLI's page, then the README's few commands.
var cliTranscripts = []struct{ page, intro string }{
	{"docs/cli.md", "A real run against `make run`"},
	{"README.md", "\n## The CLI\n"},
}

// readmeTranscript reads a CLI transcript from page (a path from the
// repository's root): the first fenced block after intro.
func readmeTranscript(t *testing.T, root, page, intro string) []transcript {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(page)))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), intro)
	if !ok {
		t.Fatalf("%s has no CLI transcript after %q", page, intro)
	}
	_, rest, _ = strings.Cut(rest, "```\n")
	block, _, _ := strings.Cut(rest, "```")
	var out []transcript
	for _, line := range strings.Split(strings.TrimRight(block, "\n"), "\n") {
		switch {
		case strings.HasPrefix(line, "$ "):
			out = append(out, transcript{cmd: strings.TrimPrefix(line, "$ ")})
		case strings.HasPrefix(line, "    ") && len(out) > 0 && len(out[len(out)-1].want) == 0:
			out[len(out)-1].cmd += "\n" + line
		case len(out) > 0:
			out[len(out)-1].want = append(out[len(out)-1].want, line)
		}
	}
	return out
}

var (
	reULID = regexp.MustCompile(`\b[0-9A-HJKMNP-TV-Z]{26}\b`)
	reUUID = regexp.MustCompile(`\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)
	reTime = regexp.MustCompile(`\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}`)
	reRecv = regexp.MustCompile(`(<UUID>\s+<ID>\s+\S+\s+)\d+`) // a DLQ row's receive count
	reSpan = regexp.MustCompile(` {2,}`)
	// The one-minute throughput depends on how long the run took.
	reMinute = regexp.MustCompile(`last minute: \d+ completed, \d+ failed`)
	// The workers line counts the consumers running now: started by the
	// queues, a consumer stops 2 s after its last task, so whether it is
	// still registered when `triage stats` runs depends on timing; busy
	// slots are as of each worker's last heartbeat (every 10 s).
	reBusy = regexp.MustCompile(`workers: \d+ active, \d+ draining, \d+ dead; \d+ of \d+ slots busy`)
	// A queue row's wait p50 and p99 (`triage stats`) depend on the
	// machine's speed; matched after column padding is collapsed.
	reWaits = regexp.MustCompile(`^((?:high|medium|low)(?:  \d+){4}  \S+)  \S+  \S+$`)
)

// normalize masks what differs between runs (ids, message ids, times,
// receive counts, the last minute's throughput, the workers running, waits, column padding) and sorts the lines, so the comparison is
// about content, not the order SQS delivered things in.
func normalize(lines []string) []string {
	var out []string
	for _, l := range lines {
		l = reULID.ReplaceAllString(l, "<ID>")
		l = reUUID.ReplaceAllString(l, "<UUID>")
		l = reTime.ReplaceAllString(l, "<TIME>")
		l = reRecv.ReplaceAllString(l, "${1}<N>")
		l = reMinute.ReplaceAllString(l, "last minute: <N> completed, <N> failed")
		l = reBusy.ReplaceAllString(l, "workers: <N> active, <N> draining, <N> dead; <N> of <N> slots busy")
		l = reSpan.ReplaceAllString(strings.TrimRight(l, " "), "  ")
		l = reWaits.ReplaceAllString(l, "${1}  <WAIT>  <WAIT>")
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return out
}

// The CLI transcripts of the docs (docs/cli.md's, then the README's), run
// literally (in bash) against a fresh `triage dev`, print what the pages
// show, but for ids, times and receive counts.
func TestReadmeTranscript(t *testing.T) {
	if testing.Short() {
		t.Skip("starts triage dev")
	}
	root, err := emulators.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	type pageSteps struct {
		page  string
		steps []transcript
	}
	var pages []pageSteps
	for _, tr := range cliTranscripts {
		steps := readmeTranscript(t, root, tr.page, tr.intro)
		if len(steps) < 3 {
			t.Fatalf("%s: the transcript has %d commands", tr.page, len(steps))
		}
		pages = append(pages, pageSteps{tr.page, steps})
	}
	cli := buildCLI(t, root)
	env := append(cleanEnv(), "XDG_CACHE_HOME="+t.TempDir(), "PATH="+filepath.Dir(cli)+string(os.PathListSeparator)+os.Getenv("PATH"))
	dev, _, _, exited := startDev(t, cli, root, env)
	t.Cleanup(func() { // Ctrl-C, so the emulators stop cleanly too
		_ = syscall.Kill(-dev.Process.Pid, syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
		}
	})

	for _, p := range pages {
		work := t.TempDir()
		for _, st := range p.steps {
			if strings.HasPrefix(st.cmd, "make cli") {
				continue // built above, on PATH
			}
			sh := exec.Command("bash", "-c", "{ "+st.cmd+"\n} 2>&1")
			sh.Dir, sh.Env = work, env // the CLI finds the server through its settings file
			got, _ := sh.Output()
			if os.Getenv("TRIAGE_SHOW_TRANSCRIPT") != "" {
				t.Logf("%s: $ %s\n%s", p.page, st.cmd, got)
			}
			want, have := normalize(st.want), normalize(strings.Split(string(got), "\n"))
			if !slices.Equal(want, have) {
				t.Errorf("%s: $ %s\nprinted:\n%s\nthe page shows (normalized, sorted):\n  %s\ngot:\n  %s", p.page, st.cmd, got, strings.Join(want, "\n  "), strings.Join(have, "\n  "))
			}
			if strings.HasPrefix(st.cmd, "triage wait") {
				time.Sleep(2 * time.Second) // let the stream-kept counters catch up before `triage stats`
			}
		}
	}
}
