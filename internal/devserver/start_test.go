package devserver_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/devserver"
	"github.com/triagehq/triage/internal/emulators"
)

// startDev runs `triage dev` in process with vars over the process
// environment and returns its base URL once it is ready; it is stopped
// (and must stop within 30 s) when the test ends.
func startDev(t *testing.T, vars map[string]string) string {
	t.Helper()
	root, err := emulators.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
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
			Root:   root, Out: io.Discard, Logs: io.Discard, StateDir: t.TempDir(),
			Ready: func(url, _ string) { ready <- url },
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("dev server did not stop within 30 s")
		}
	})
	select {
	case base := <-ready:
		return base
	case err := <-done:
		t.Fatalf("dev server stopped: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("dev server not ready in 60 s")
	}
	return ""
}

// apiCall sends an API request to the dev server at base with the test's
// admin token and returns the status and the decoded JSON body.
func apiCall(t *testing.T, base, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer dev-test")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}
