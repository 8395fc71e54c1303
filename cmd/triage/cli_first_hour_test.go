package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// Help pages never show the token: flag defaults from the environment are
// read when a command runs.
func TestHelpShowsNoToken(t *testing.T) {
	t.Setenv("TRIAGE_TOKEN", "s3cret-token-value")
	for _, args := range [][]string{{"--help"}, {"submit", "--help"}, {"dlq", "list", "--help"}} {
		var out, errOut bytes.Buffer
		_, root := newRoot(&out, &errOut)
		root.SetArgs(args)
		if err := root.Execute(); err != nil {
			t.Fatal(err)
		}
		if text := out.String() + errOut.String(); strings.Contains(text, "s3cret") || !strings.Contains(text, "$TRIAGE_TOKEN") {
			t.Fatalf("%v help:\n%s", args, text)
		}
	}
}

func TestVersion(t *testing.T) {
	var out bytes.Buffer
	_, root := newRoot(&out, &out)
	root.SetArgs([]string{"--version"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "triage version ") {
		t.Fatalf("--version printed %q", out.String())
	}
}

// wait --timeout says it timed out and exits 7, not 1 with "context
// deadline exceeded".
func TestWaitTimeout(t *testing.T) {
	_, errOut, code, _ := run(t, "", "wait", "--timeout", "300ms", "queued")
	if code != exitTimeout || !strings.Contains(errOut, "timed out after 300ms") || strings.Contains(errOut, "deadline exceeded") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

// With no server running, the error says how to start one.
func TestNoServerHint(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	var out bytes.Buffer
	c, root := newRoot(&out, &out)
	root.SetArgs([]string{"--url", url, "--token", "x", "stats"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = root.ExecuteContext(ctx)
	if err == nil || exitCode(err) != exitError {
		t.Fatalf("stats with no server: %v", err)
	}
	if h := hint(err, c.baseURL()); !strings.Contains(h, "triage dev") || !strings.Contains(h, url) {
		t.Fatalf("hint %q", h)
	}
}
