package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/devserver"
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
	if h := hint(err, c.endpoint()); !strings.Contains(h, "triage dev") || !strings.Contains(h, url) {
		t.Fatalf("hint %q", h)
	}
	// A URL from a settings file that a killed dev server left behind.
	if h := hint(err, endpoint{url: url, devFile: "/home/you/.cache/triage/dev.env"}); !strings.Contains(h, "the address in /home/you/.cache/triage/dev.env, left by a `triage dev` that is no longer running") {
		t.Fatalf("hint for a stale settings file: %q", h)
	}
}

// The URL and token each come from the flag, the environment, or the
// running dev server's settings file, in that order; the file's token is
// sent to the file's URL only; with several dev servers running, the one
// named by URL gives its token, and none named is an error naming them.
func TestResolveEndpoint(t *testing.T) {
	const file, file2 = "/state/dev-127.0.0.1_9001.env", "/state/dev-127.0.0.1_9002.env"
	a := devserver.Server{Path: file, URL: "http://127.0.0.1:9001", Token: "dev-file"}
	b := devserver.Server{Path: file2, URL: "http://127.0.0.1:9002", Token: "dev-file2"}
	dead := devserver.Server{Path: file2, URL: "http://127.0.0.1:9002", Token: "dev-file2", PID: 1<<22 + 1} // above pid_max
	servers := func(s ...devserver.Server) func() []devserver.Server { return func() []devserver.Server { return s } }
	tests := []struct {
		name               string
		flagURL, flagToken string
		env                map[string]string
		dev                func() []devserver.Server
		want               endpoint
		wantErr            string
	}{
		{name: "nothing anywhere: the default", dev: servers(), want: endpoint{url: defaultURL}},
		{name: "the dev server's file", dev: servers(a), want: endpoint{url: "http://127.0.0.1:9001", token: "dev-file", devFile: file}},
		{name: "the environment beats the file", dev: servers(a), env: map[string]string{"TRIAGE_URL": "https://prod.example", "TRIAGE_TOKEN": "prod"},
			want: endpoint{url: "https://prod.example", token: "prod"}},
		{name: "flags beat the environment", dev: servers(a), flagURL: "http://a", flagToken: "ftok", env: map[string]string{"TRIAGE_URL": "http://b", "TRIAGE_TOKEN": "etok"},
			want: endpoint{url: "http://a", token: "ftok"}},
		{name: "the dev token is never sent to another server", dev: servers(a), env: map[string]string{"TRIAGE_URL": "https://prod.example"},
			want: endpoint{url: "https://prod.example"}},
		{name: "the dev token goes with its own URL, however given", dev: servers(a), flagURL: "http://127.0.0.1:9001/",
			want: endpoint{url: "http://127.0.0.1:9001/", token: "dev-file"}},
		{name: "a token from the environment with the file's URL", dev: servers(a), env: map[string]string{"TRIAGE_TOKEN": "etok"},
			want: endpoint{url: "http://127.0.0.1:9001", token: "etok", devFile: file}},
		{name: "two servers: --url picks one and its token", dev: servers(a, b), flagURL: "http://127.0.0.1:9002",
			want: endpoint{url: "http://127.0.0.1:9002", token: "dev-file2"}},
		{name: "two servers: TRIAGE_URL picks the other", dev: servers(a, b), env: map[string]string{"TRIAGE_URL": "http://127.0.0.1:9001"},
			want: endpoint{url: "http://127.0.0.1:9001", token: "dev-file"}},
		{name: "two servers, none chosen: an error naming both", dev: servers(a, b),
			want: endpoint{url: defaultURL}, wantErr: "2 triage dev servers are running (http://127.0.0.1:9001, http://127.0.0.1:9002): choose one with --url or TRIAGE_URL"},
		{name: "a killed server's leftover beside a live one: the live one", dev: servers(a, dead),
			want: endpoint{url: "http://127.0.0.1:9001", token: "dev-file", devFile: file}},
		{name: "only a killed server's leftover: its URL, for the hint", dev: servers(dead),
			want: endpoint{url: "http://127.0.0.1:9002", token: "dev-file2", devFile: file2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := resolveEndpoint(tt.flagURL, tt.flagToken, func(k string) string { return tt.env[k] }, tt.dev)
			if got != tt.want {
				t.Errorf("resolveEndpoint = %+v, want %+v", got, tt.want)
			}
			if gotErr := fmt.Sprint(err); (tt.wantErr == "" && err != nil) || (tt.wantErr != "" && gotErr != tt.wantErr) {
				t.Errorf("error %v, want %q", err, tt.wantErr)
			}
			if err != nil && exitCode(err) != exitUsage {
				t.Errorf("exit code %d, want %d (usage)", exitCode(err), exitUsage)
			}
		})
	}
}
