// Package devtest runs `triage dev` in process for tests that need the
// whole local stack behind its HTTP API: the dashboard's browser tests,
// the dead-letter invariant, the dev server's own tests.
//
// It is test tooling, like emulators/stacktest: the server runs on the
// emulators the test binary's stacktest.Main started (or the endpoints the
// environment names), listens on a free loopback port, and is stopped when
// the test ends.
package devtest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/devserver"
	"github.com/triagehq/triage/internal/emulators"
)

// Start runs `triage dev` with vars over the process environment and
// returns its base URL (no trailing slash) once it is ready. vars usually
// set TRIAGE_ADDR (127.0.0.1:0 for a free port), TRIAGE_TOKEN and
// TRIAGE_PREFIX. The server is stopped when the test ends, and must stop
// within 30 s; it must be ready within 90 s.
func Start(t testing.TB, vars map[string]string) string {
	t.Helper()
	return StartWith(t, vars, nil)
}

// StartWith is Start with the server's options changed by set (when not
// nil) before it runs: say NoConsumer, for a test whose own worker is to
// be the only consumer, as `triage dev --no-consumer` leaves it.
func StartWith(t testing.TB, vars map[string]string, set func(*devserver.Options)) string {
	t.Helper()
	root, err := emulators.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	warnings := &logTail{max: 80}
	done := make(chan error, 1)
	opt := devserver.Options{
		Getenv: func(k string) string {
			if v, ok := vars[k]; ok {
				return v
			}
			return os.Getenv(k)
		},
		Setenv: func(string, string) error { return nil },
		Root:   root, Out: io.Discard, Logs: warnings, StateDir: t.TempDir(),
		Ready: func(url, _ string) { ready <- url },
	}
	if set != nil {
		set(&opt)
	}
	go func() { done <- devserver.Run(ctx, opt) }()
	t.Cleanup(func() {
		cancel()
		defer func() {
			if t.Failed() {
				t.Logf("the dev server's last warnings and errors:\n%s", warnings)
			}
		}()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("dev server did not stop within 30 s")
		}
	})
	select {
	case base := <-ready:
		return strings.TrimSuffix(base, "/")
	case err := <-done:
		t.Fatalf("dev server stopped: %v", err)
	case <-time.After(90 * time.Second):
		t.Fatal("dev server not ready in 90 s")
	}
	return ""
}

// Call sends an API request to the server at base with the bearer token,
// decodes a JSON answer into out (when out is not nil and there is a
// body) and returns the status. A request that cannot be made, or an
// answer out cannot hold, fails t.
func Call(t testing.TB, base, token, method, path, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, b, err)
		}
	}
	return resp.StatusCode
}

// logTail keeps the last max warning and error lines of the server's JSON
// logs: what a failed test prints, so that a stalled part of the server
// (the stream poller, a consumer) says why.
type logTail struct {
	mu    sync.Mutex
	max   int
	lines []string
}

func (l *logTail) Write(p []byte) (int, error) {
	for line := range strings.Lines(string(p)) {
		if !strings.Contains(line, `"level":"WARN"`) && !strings.Contains(line, `"level":"ERROR"`) {
			continue
		}
		l.mu.Lock()
		l.lines = append(l.lines, strings.TrimSpace(line))
		if len(l.lines) > l.max {
			l.lines = l.lines[len(l.lines)-l.max:]
		}
		l.mu.Unlock()
	}
	return len(p), nil
}

func (l *logTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) == 0 {
		return "(none)"
	}
	return strings.Join(l.lines, "\n")
}
