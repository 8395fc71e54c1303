// Command triage is triage's command-line tool: `triage dev` runs the whole
// dispatcher locally, and the other commands talk to its HTTP API.
//
// Exit codes: 0 success; 1 an error; 2 bad usage; 3 not found; 4 conflict
// (wrong state); 5 not authorized; 6 the task(s) waited on did not complete.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/triagehq/triage/client"
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
)

// errIncomplete marks a wait whose task ended in a state other than completed.
var errIncomplete = errors.New("task did not complete")

type usageError struct{ error }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRoot(os.Stdout, os.Stderr)
	err := root.ExecuteContext(ctx)
	if err != nil {
		// API errors already start with "triage:" (the client package
		// names itself, as libraries do); say it once.
		fmt.Fprintln(os.Stderr, "triage:", strings.TrimPrefix(err.Error(), "triage: "))
	}
	os.Exit(exitCode(err))
}

func exitCode(err error) int {
	var ue usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		return exitUsage
	case errors.Is(err, client.ErrNotFound):
		return exitNotFound
	case errors.Is(err, client.ErrConflict):
		return exitConflict
	case errors.Is(err, client.ErrUnauthorized), errors.Is(err, client.ErrForbidden):
		return exitAuth
	case errors.Is(err, errIncomplete):
		return exitIncomplete
	case errors.Is(err, client.ErrBadRequest):
		return exitUsage
	}
	return exitError
}
