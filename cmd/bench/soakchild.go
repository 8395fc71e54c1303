package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/triagehq/triage/internal/api"
	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/app/apiapp"
	"github.com/triagehq/triage/internal/app/consumerapp"
	"github.com/triagehq/triage/internal/app/promoterapp"
	"github.com/triagehq/triage/internal/devserver"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/promote"
	"github.com/triagehq/triage/triageconfig"
)

// The soak's child processes are this binary, re-executed with
// soakChildEnv naming the role it plays. Each builds triage's app from its
// environment (the emulators' endpoints and the soak's table, as the
// parent passes them) the way `triage dev` does, prints one ready line on
// stdout and logs JSON to stderr, which the parent keeps in a file.
const (
	soakChildEnv = "TRIAGE_BENCH_CHILD"     // "api", "consumer" or "promoter"
	soakRunsEnv  = "TRIAGE_BENCH_SOAK_RUNS" // directory of the handlers' trace files
	soakReady    = "READY"                  // first word of a child's ready line
	soakType     = "soak"                   // the task type the soak's handler runs
)

// Trace events a consumer child's handler appends to its trace file, one
// line each: "<event> <task id> <pid> <unix nanoseconds> <attempt>".
const (
	traceStart = "start" // the handler began an attempt
	traceDone  = "done"  // it finished (returned success)
	traceAbort = "abort" // its context ended first (lease lost, drain)
)

// isSoakChild reports the role this process was started for ("" when it
// is the bench itself).
func isSoakChild() string { return os.Getenv(soakChildEnv) }

// runSoakChild runs role until SIGTERM or SIGINT, or until its parent
// dies, and returns the exit status. The parent normally ends it with
// SIGKILL.
func runSoakChild(role string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go exitWithParent(ctx, stop)
	if err := soakChild(ctx, role); err != nil {
		fmt.Fprintf(os.Stderr, "bench soak child %s (pid %d): %v\n", role, os.Getpid(), err)
		return 1
	}
	return 0
}

// exitWithParent stops the child once its parent is gone (it is then
// re-parented), in case the parent died before it could kill it and the
// parent-death signal did not fire.
func exitWithParent(ctx context.Context, stop func()) {
	parent := os.Getppid()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if os.Getppid() != parent {
				stop()
				return
			}
		}
	}
}

func soakChild(ctx context.Context, role string) error {
	cfg, err := triageconfig.FromEnv(os.Getenv)
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	log := app.NewLogger(os.Stderr, cfg.LogLevel).With("role", role, "pid", os.Getpid())
	a, err := app.New(ctx, cfg, log)
	if err != nil {
		return err
	}
	switch role {
	case "api":
		return soakAPI(ctx, a)
	case "consumer":
		return soakConsumer(ctx, a)
	case "promoter":
		return soakPromoter(ctx, a)
	}
	return fmt.Errorf("unknown role %q", role)
}

// soakAPI serves the HTTP API on a loopback port of its own and says
// which: "READY 127.0.0.1:PORT".
func soakAPI(ctx context.Context, a *app.App) error {
	tokens, err := apiapp.Tokens(ctx, a, nil)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := devserver.NewHTTPServer(apiapp.Handler(a, tokens, api.Options{}), devserver.Timeouts{})
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	fmt.Printf("%s %s\n", soakReady, ln.Addr())
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// soakConsumer runs a consumer with the configured settings whose handler
// for soakType leaves a trace; it says "READY <worker id>".
func soakConsumer(ctx context.Context, a *app.App) error {
	dir := os.Getenv(soakRunsEnv)
	if dir == "" {
		return errors.New(soakRunsEnv + " is not set")
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(os.Getpid())+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open the trace file: %w", err)
	}
	defer f.Close()
	reg, err := consumerapp.Handlers(a)
	if err != nil {
		return fmt.Errorf("handlers: %w", err)
	}
	reg.Replace(soakType, soakHandler(f))
	c := consumerapp.New(a, reg, dispatch.Options{DrainTimeout: 3 * time.Second}, dispatch.Deps{})
	fmt.Printf("%s %s\n", soakReady, c.WorkerID())
	return c.Run(ctx)
}

// soakHandler appends a start line, sleeps 10-200 ms (so a SIGKILL often
// lands mid-run), then appends a done line and succeeds. Each line is one
// write(2) to a file opened with O_APPEND, so it survives the process's
// SIGKILL whole.
func soakHandler(f *os.File) handler.Func {
	pid := strconv.Itoa(os.Getpid())
	trace := func(event string, r handler.Request) {
		_, _ = fmt.Fprintf(f, "%s %s %s %d %d\n", event, r.ID, pid, time.Now().UnixNano(), r.Attempt)
	}
	return func(ctx context.Context, r handler.Request) (json.RawMessage, error) {
		trace(traceStart, r)
		select {
		case <-time.After(time.Duration(10+rand.IntN(191)) * time.Millisecond):
		case <-ctx.Done():
			trace(traceAbort, r)
			return nil, ctx.Err()
		}
		trace(traceDone, r)
		return json.RawMessage(`{"ok":true}`), nil
	}
}

// soakPromoter runs the promoter's sweep every TRIAGE_PROMOTE_INTERVAL as
// promote.Promoter.Run does, and logs each sweep that did something, so
// the parent can count what it released, reconciled and rescued.
func soakPromoter(ctx context.Context, a *app.App) error {
	p := promoterapp.New(a, promote.Options{})
	fmt.Println(soakReady)
	t := time.NewTicker(a.Config.PromoteInterval)
	defer t.Stop()
	for {
		r, err := p.RunOnce(ctx)
		if err != nil && ctx.Err() == nil {
			a.Log.Warn("promoter run had errors", "error", err)
		}
		if r.Released+r.Reconciled+r.Rescued+r.Tracked+r.Errors > 0 || len(r.Promoted) > 0 && sum(r.Promoted) > 0 {
			a.Log.Info(soakSweepMsg, "released", r.Released, "reconciled", r.Reconciled, "rescued", r.Rescued, "tracked", r.Tracked, "errors", r.Errors)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// soakSweepMsg is the promoter child's log message for a sweep that did
// something; the parent sums its fields.
const soakSweepMsg = "soak promoter sweep"

func sum[K comparable](m map[K]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
