package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/emulators"
)

// syncBuffer collects a child's output while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A user who ran `go install` runs `triage dev` from a directory outside
// any checkout: the emulators install from what the binary carries, the
// API serves a task, and Ctrl-C (SIGINT to the terminal's process group)
// hands the running tasks back while the emulators still answer, says so in
// one line, exits 0 with no ERROR line, and leaves no process behind.
func TestDevOutsideACheckoutAndCtrlC(t *testing.T) {
	if testing.Short() {
		t.Skip("installs the binary and starts the emulators")
	}
	root, err := emulators.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	gobin := t.TempDir()
	install := exec.Command("go", "install", "./cmd/triage")
	install.Dir, install.Env = root, append(os.Environ(), "GOBIN="+gobin)
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("go install: %v\n%s", err, out)
	}
	dev, addr, out, exited := startDev(t, filepath.Join(gobin, "triage"), t.TempDir(), append(cleanEnv(), "XDG_CACHE_HOME="+t.TempDir()))
	emulators := children(dev.Process.Pid)
	if len(emulators) != 2 {
		t.Fatalf("triage dev runs %d child processes (%v), want the two emulators", len(emulators), emulators)
	}

	base := "http://" + addr + "/api/v1"
	call := func(method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	idOf := func(body string) string {
		_, rest, _ := strings.Cut(body, `"id":"`)
		id, _, _ := strings.Cut(rest, `"`)
		return id
	}
	var ids []string
	for range 2 {
		code, body := call("POST", "/tasks", `{"type":"sleep","priority":"high","payload":{"ms":60000}}`)
		if code != http.StatusCreated {
			t.Fatalf("submit = %d %s", code, body)
		}
		ids = append(ids, idOf(body))
	}
	for _, id := range ids {
		for deadline := time.Now().Add(30 * time.Second); ; {
			if _, body := call("GET", "/tasks/"+id, ""); strings.Contains(body, `"status":"executing"`) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("task %s never started:\n%s", id, out.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	interrupted := time.Now()
	if err := syscall.Kill(-dev.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("triage dev exited with %v after Ctrl-C, want 0:\n%s", err, out.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("triage dev still running 60 s after Ctrl-C:\n%s", out.String())
	}
	t.Logf("stopped %v after Ctrl-C", time.Since(interrupted).Round(time.Millisecond))
	text := out.String()
	if !strings.Contains(text, "stopped: 2 running tasks handed back to their queues, emulators stopped\n") {
		t.Errorf("no stop summary:\n%s", text)
	}
	if strings.Contains(text, "ERROR") {
		t.Errorf("error lines on stop:\n%s", text)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		var alive []int
		for _, pid := range emulators {
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				alive = append(alive, pid)
			}
		}
		if len(alive) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("emulator processes %v still alive after triage dev exited", alive)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cleanEnv is this process's environment without endpoint overrides or
// triage settings, as a user's shell would have it.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_ENDPOINT_URL") && !strings.HasPrefix(kv, "TRIAGE_") {
			env = append(env, kv)
		}
	}
	if c := goCache(); c != "" {
		env = append(env, "GOCACHE="+c)
	}
	return env
}

// startDev runs `<bin> dev` in dir, as a terminal would run a job (its own
// process group), on a free loopback port with token "tok", and waits for
// its banner. exited gets its Wait result; the test's cleanup kills what is
// left.
func startDev(t *testing.T, bin, dir string, env []string) (dev *exec.Cmd, addr string, out *syncBuffer, exited chan error) {
	t.Helper()
	return startDevWithToken(t, bin, dir, env, "tok")
}

// startDevWithToken is startDev with the admin token given, and more
// arguments for `dev`.
func startDevWithToken(t *testing.T, bin, dir string, env []string, token string, args ...string) (dev *exec.Cmd, addr string, out *syncBuffer, exited chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = ln.Addr().String()
	ln.Close()
	dev = exec.Command(bin, append([]string{"dev"}, args...)...)
	dev.Dir = dir
	dev.Env = append(env, "TRIAGE_ADDR="+addr, "TRIAGE_TOKEN="+token)
	dev.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out = &syncBuffer{}
	dev.Stdout, dev.Stderr = out, out
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	exited = make(chan error, 1)
	go func() { exited <- dev.Wait() }()
	t.Cleanup(func() {
		kids := children(dev.Process.Pid)
		_ = syscall.Kill(-dev.Process.Pid, syscall.SIGKILL)
		for _, pid := range kids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	for deadline := time.Now().Add(5 * time.Minute); !strings.Contains(out.String(), "triage is running"); {
		select {
		case err := <-exited:
			t.Fatalf("triage dev exited: %v\n%s", err, out.String())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no banner in 5 min:\n%s", out.String())
		}
	}
	return dev, addr, out, exited
}

// children lists the processes whose parent is pid (from /proc).
func children(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after ')'.
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 1 && fields[1] == fmt.Sprint(pid) {
			out = append(out, child)
		}
	}
	return out
}
