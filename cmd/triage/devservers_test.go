package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/devserver"
	"github.com/triagehq/triage/internal/emulators"
)

// Two `triage dev` on one machine (issue 24 item 2): each keeps its own
// settings file, named by its address, in the shared state directory; the
// CLI talks to the server --url or TRIAGE_URL names, with that server's own
// token; with none named it says which are running and exits 2; and one
// server's exit removes its file only, after which the CLI finds the other
// by itself. The second server runs on the first one's emulators (their
// endpoints read from the first one's settings file, as a worker would)
// with its own prefix, so a task of one is not found on the other; so it is
// the second that stops (the first one's stop would take the emulators).
func TestTwoDevServersSideBySide(t *testing.T) {
	if testing.Short() {
		t.Skip("starts triage dev twice")
	}
	root, err := emulators.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	bin := buildCLI(t, root)
	cache := t.TempDir()
	env := append(cleanEnv(), "XDG_CACHE_HOME="+cache)
	stateDir := filepath.Join(cache, "triage") // devserver.StateDir() under this XDG_CACHE_HOME

	_, addrA, _, _ := startDevWithToken(t, bin, root, env, "tok-a")
	fileA := filepath.Join(stateDir, devserver.EnvFileName(addrA))
	servers, err := devserver.Servers(stateDir)
	if err != nil || len(servers) != 1 || servers[0].Path != fileA {
		t.Fatalf("after the first start, settings files %+v, %v; want %s", servers, err, fileA)
	}
	envB := append([]string{}, env...)
	for _, kv := range servers[0].WorkerEnv() {
		if strings.HasPrefix(kv[0], "AWS_") {
			envB = append(envB, kv[0]+"="+kv[1])
		}
	}
	devB, addrB, outB, exitedB := startDevWithToken(t, bin, root, append(envB, "TRIAGE_PREFIX=second"), "tok-b")
	fileB := filepath.Join(stateDir, devserver.EnvFileName(addrB))
	if strings.Contains(outB.String(), "starting local AWS emulators") {
		t.Errorf("the second server started emulators of its own:\n%s", outB.String())
	}
	urlA, urlB := "http://"+addrA, "http://"+addrB

	// cli runs the CLI as a user's shell would: the state directory shared,
	// no URL or token unless the arguments or extra give one.
	cli := func(extra []string, args ...string) (stdout, stderr string, code int) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(append([]string{}, env...), extra...)
		var o, e strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return o.String(), e.String(), code
	}
	submit := func(extra []string, args ...string) string {
		t.Helper()
		out, errOut, code := cli(extra, append(args, "--json", "submit", "--type", "echo", "--payload", `{"x":1}`)...)
		var task struct{ ID string }
		if code != 0 || json.Unmarshal([]byte(out), &task) != nil || task.ID == "" {
			t.Fatalf("submit %v: exit %d\n%s%s", args, code, out, errOut)
		}
		return task.ID
	}

	// None chosen: both named, exit 2, nothing sent.
	if _, errOut, code := cli(nil, "stats"); code != exitUsage || !strings.Contains(errOut, urlA) || !strings.Contains(errOut, urlB) || !strings.Contains(errOut, "--url or TRIAGE_URL") {
		t.Errorf("stats with two servers and none chosen: exit %d, stderr %q", code, errOut)
	}
	// Each chosen by flag or by environment, each with its own token.
	idA := submit(nil, "--url", urlA)
	idB := submit([]string{"TRIAGE_URL=" + urlB})
	for _, c := range []struct {
		name  string
		extra []string
		args  []string
		id    string
		want  int
	}{
		{"A's task on A, by --url", nil, []string{"--url", urlA}, idA, 0},
		{"B's task on B, by TRIAGE_URL", []string{"TRIAGE_URL=" + urlB}, nil, idB, 0},
		{"A's task is not on B", nil, []string{"--url", urlB}, idA, exitNotFound},
		{"B's task is not on A", []string{"TRIAGE_URL=" + urlA}, nil, idB, exitNotFound},
	} {
		if out, errOut, code := cli(c.extra, append(c.args, "get", c.id)...); code != c.want {
			t.Errorf("%s: exit %d, want %d\n%s%s", c.name, code, c.want, out, errOut)
		}
	}

	// B stops: its file goes, A's stays, and the CLI finds A alone.
	if err := syscall.Kill(-devB.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exitedB:
		if err != nil {
			t.Fatalf("second server exited with %v:\n%s", err, outB.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("second server still running 60 s after Ctrl-C")
	}
	if _, err := os.Stat(fileB); !os.IsNotExist(err) {
		t.Errorf("the stopped server's settings file is still there (%v)", err)
	}
	if _, err := os.Stat(fileA); err != nil {
		t.Errorf("the running server's settings file: %v", err)
	}
	if out, errOut, code := cli(nil, "get", idA); code != 0 || !strings.Contains(out, idA) {
		t.Errorf("get with only the first server running: exit %d\n%s%s", code, out, errOut)
	}
}
