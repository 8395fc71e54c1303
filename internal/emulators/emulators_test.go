package emulators

import (
	"context"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// TestStartStop starts the emulators from this checkout and checks that
// each runs in a process group of its own (so a terminal's Ctrl-C to the
// starting process's group does not reach them), answers on loopback, and
// has exited and been reaped when Stop returns.
func TestStartStop(t *testing.T) {
	e := startForTest(t)
	if len(e.procs) != 2 {
		t.Fatalf("%d processes, want 2", len(e.procs))
	}
	ours := syscall.Getpgrp()
	for _, c := range e.procs {
		pgid, err := syscall.Getpgid(c.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if pgid != c.Process.Pid || pgid == ours {
			t.Errorf("%s: process group %d; want its own (%d), not ours (%d)", c.Path, pgid, c.Process.Pid, ours)
		}
	}
	for _, url := range []string{e.SQSEndpoint, e.DynamoDBEndpoint} {
		resp, err := http.Get(url)
		if err != nil {
			t.Errorf("%s: %v", url, err)
			continue
		}
		resp.Body.Close()
	}
	e.Stop()
	for _, c := range e.procs {
		if c.ProcessState == nil {
			t.Errorf("%s (pid %d) not reaped when Stop returned", c.Path, c.Process.Pid)
		}
	}
}

// startForTest starts a pair of emulators of the test's own from this
// checkout; they are stopped when the test ends (Stop is idempotent, so a
// test may stop them earlier).
func startForTest(t *testing.T) *Emulators {
	t.Helper()
	root, err := FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e, err := Start(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	return e
}
