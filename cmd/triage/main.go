// Command triage is triage's command-line tool: `triage dev` runs the whole
// dispatcher locally, and the other commands talk to its HTTP API.
//
// Exit codes: 0 success; 1 an error; 2 bad usage; 3 not found; 4 conflict
// (wrong state); 5 not authorized; 6 the task(s) waited on did not complete;
// 7 wait --timeout ran out.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/internal/store"
)

// Exit codes.
const (
	exitOK         = 0
	exitError      = 1
	exitUsage      = 2
	exitNotFound   = 3
	exitConflict   = 4
	exitAuth       = 5
	exitIncomplete = 6
	exitTimeout    = 7
)

// errIncomplete marks a wait whose task ended in a state other than completed.
var errIncomplete = errors.New("task did not complete")

// errTimeout marks a wait that ran out of its --timeout.
var errTimeout = errors.New("timed out")

type usageError struct{ error }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The first Ctrl-C ends ctx and the command stops cleanly (`triage dev`
	// drains); after it, signals have their default effect again, so a
	// second Ctrl-C ends the process at once.
	go func() { <-ctx.Done(); stop() }()
	c, root := newRoot(os.Stdout, os.Stderr)
	err := root.ExecuteContext(ctx)
	if err != nil {
		// API errors already start with "triage:" (package triage names
		// itself, as libraries do); say it once.
		fmt.Fprintln(os.Stderr, "triage:", strings.TrimPrefix(err.Error(), "triage: "))
		if h := hint(err, c.endpoint()); h != "" {
			fmt.Fprintln(os.Stderr, "triage:", h)
		}
	}
	os.Exit(exitCode(err))
}

// version and commit are set at build time (make cli: -ldflags -X); a
// binary built by `go install` reports its module version and VCS revision.
var version, commit string

func versionString() string {
	v, rev := version, commit
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && rev == "" {
				rev = s.Value
			}
		}
	}
	if v == "" {
		v = "dev"
	}
	if rev != "" {
		return v + " (commit " + rev + ")"
	}
	return v
}

// hint says what to do about an error the user can fix, or "".
func hint(err error, ep endpoint) string {
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return ""
	}
	where := "no triage API answers at " + ep.url
	if ep.devFile != "" {
		where += " (the address in " + ep.devFile + ", left by a `triage dev` that is no longer running)"
	}
	return where + ". Start one with `make run` (in a checkout) or `triage dev`, or point --url / TRIAGE_URL at yours."
}

func exitCode(err error) int {
	var ue usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		return exitUsage
	case errors.Is(err, triage.ErrNotFound), errors.Is(err, store.ErrTokenNotFound):
		return exitNotFound
	case errors.Is(err, triage.ErrConflict), errors.Is(err, store.ErrTokenExists):
		return exitConflict
	case errors.Is(err, triage.ErrUnauthorized), errors.Is(err, triage.ErrForbidden):
		return exitAuth
	case errors.Is(err, errIncomplete):
		return exitIncomplete
	case errors.Is(err, errTimeout):
		return exitTimeout
	case errors.Is(err, triage.ErrBadRequest):
		return exitUsage
	}
	return exitError
}
