package devserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/auth"
	"github.com/triagehq/triage/internal/devserver"
	"github.com/triagehq/triage/internal/devserver/devtest"
	"github.com/triagehq/triage/internal/emulators"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/store"
)

func TestMain(m *testing.M) { stacktest.Main(m) }

// TestDevServer runs what `make run` runs and checks issue #2's promise: a
// submitted echo task is completed, with its payload as result, within 2 s.
func TestDevServer(t *testing.T) {
	// Not parallel: it checks the server prints nothing after its banner
	// but the stop, and other dev servers on the shared emulators (their
	// tables made and deleted) can make its stream reader warn.
	env := stacktest.New(t)
	root, err := emulators.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"TRIAGE_ADDR": "127.0.0.1:0", "TRIAGE_TOKEN": "dev-test", "TRIAGE_PREFIX": env.Prefix}
	// A token minted into the table (`triage tokens create`) works on the
	// dev server as on the API function.
	minted := "trg_minted-before-start"
	if err := store.New(env.DynamoDB, env.Spec.Table.Name).CreateToken(context.Background(),
		store.APIToken{Name: "reader", Hash: auth.Hash(minted), Scopes: []string{"read"}}); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	var banner strings.Builder
	stateDir := t.TempDir()
	done := make(chan error, 1)
	go func() {
		done <- devserver.Run(ctx, devserver.Options{
			Getenv: func(k string) string {
				if v, ok := vars[k]; ok {
					return v
				}
				return os.Getenv(k)
			},
			Setenv: func(string, string) error { return nil },
			Root:   root, Out: &banner, Logs: io.Discard, StateDir: stateDir,
			Ready: func(url, _ string) { ready <- url },
		})
	}()
	var base string
	select {
	case base = <-ready:
	case err := <-done:
		t.Fatalf("dev server stopped: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("dev server not ready in 60 s")
	}
	envPath := filepath.Join(stateDir, devserver.EnvFileName(strings.TrimPrefix(base, "http://")))

	do := func(method, path, body string) (int, map[string]any) {
		return apiCall(t, base, method, path, body)
	}
	var ignored map[string]any
	if code := devtest.Call(t, base, minted, "GET", "/api/v1/tasks?limit=1", "", &ignored); code != http.StatusOK {
		t.Errorf("GET /tasks with the table's token = %d, want 200", code)
	}
	code, sub := do("POST", "/api/v1/tasks", `{"type":"echo","payload":{"x":1},"priority":"high"}`)
	if code != 201 {
		t.Fatalf("submit = %d %v", code, sub)
	}
	submitted := time.Now()
	var got map[string]any
	// Usually well under a second; the bound only catches a task that never
	// runs (speed is the bench's business, not a test's on a busy machine).
	for time.Since(submitted) < 15*time.Second {
		_, got = do("GET", "/api/v1/tasks/"+sub["id"].(string), "")
		if got["status"] == "completed" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if res, _ := json.Marshal(got["result"]); got["status"] != "completed" || string(res) != `{"x":1}` {
		t.Fatalf("15 s after submit: %v", got)
	}
	t.Logf("completed %v after submit", time.Since(submitted).Round(time.Millisecond))

	resp, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), "triage") {
		t.Fatalf("dashboard: %d", resp.StatusCode)
	}
	for _, want := range []string{base + "/api/v1", "token:      dev-test", "#token=dev-test"} {
		if !strings.Contains(banner.String(), want) {
			t.Errorf("banner lacks %q:\n%s", want, banner.String())
		}
	}
	// The CLI's settings first, then what a worker beside the server needs.
	b, err := os.ReadFile(envPath)
	if err != nil || !strings.HasPrefix(string(b), fmt.Sprintf("TRIAGE_URL=%s\nTRIAGE_TOKEN=dev-test\nTRIAGE_DEV_PID=%d\n", base, os.Getpid())) {
		t.Errorf("settings file while running = %q, %v", b, err)
	}
	for _, want := range []string{"\nAWS_ENDPOINT_URL_SQS=" + os.Getenv("AWS_ENDPOINT_URL_SQS") + "\n", "\nAWS_ENDPOINT_URL_DYNAMODB_STREAMS=", "\nAWS_REGION=", "\nTRIAGE_PREFIX=" + env.Prefix + "\n"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("settings file lacks %q:\n%s", want, b)
		}
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("dev server did not stop within 30 s of cancel")
	}
	// The emulators are stacktest's, so the stop line does not claim to
	// have stopped them; the URL and token are shown again.
	_, stopped, _ := strings.Cut(banner.String(), "Press Ctrl-C to stop.\n")
	if want := "\nstopped: no running tasks to hand back\n  API:        " + base + "/api/v1\n"; !strings.HasPrefix(stopped, want) {
		t.Errorf("after the banner %q, want it to start with %q", stopped, want)
	}
	if _, err := os.Stat(envPath); !os.IsNotExist(err) {
		t.Errorf("settings file still there after the stop (%v)", err)
	}
}

// The server cuts off a client that stops sending its body and closes an
// idle keep-alive connection, instead of holding them forever.
func TestServerTimeouts(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	})
	srv := devserver.NewHTTPServer(h, devserver.Timeouts{ReadHeader: 200 * time.Millisecond, Read: 500 * time.Millisecond, Idle: 500 * time.Millisecond})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	closedWithin := func(t *testing.T, conn net.Conn, limit time.Duration) {
		t.Helper()
		start := time.Now()
		_ = conn.SetReadDeadline(time.Now().Add(limit + 5*time.Second))
		buf := make([]byte, 4096)
		for {
			if _, err := conn.Read(buf); err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					t.Fatalf("connection still open %v later", time.Since(start))
				}
				return // closed by the server
			}
		}
	}
	t.Run("slow body", func(t *testing.T) {
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_, _ = io.WriteString(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc")
		closedWithin(t, conn, 500*time.Millisecond)
	})
	t.Run("idle keep-alive", func(t *testing.T) {
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_, _ = io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		closedWithin(t, conn, 500*time.Millisecond)
	})
	t.Run("oversized headers", func(t *testing.T) {
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		// net/http reads up to 4 KiB past MaxHeaderBytes before it refuses.
		big := strings.Repeat("a", devserver.DefaultTimeouts().MaxHeader+8<<10)
		_, _ = io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: "+big+"\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("status %d, want 431", resp.StatusCode)
		}
	})
	if d := devserver.DefaultTimeouts(); d.ReadHeader <= 0 || d.Read <= 0 || d.Write <= 0 || d.Idle <= 0 || d.MaxHeader <= 0 {
		t.Fatalf("default timeouts %+v: every bound must be set", d)
	}
}
