// Package devserver runs all of triage in one process against a local AWS
// stack: emulators (unless AWS endpoints are configured), the bootstrap,
// the HTTP API with the dashboard, a consumer with the demo handlers, and
// the promoter. It is what `triage dev` and `make run` start.
package devserver

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/triagehq/triage/internal/api"
	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/app/apiapp"
	"github.com/triagehq/triage/internal/app/consumerapp"
	"github.com/triagehq/triage/internal/app/eventsapp"
	"github.com/triagehq/triage/internal/app/promoterapp"
	"github.com/triagehq/triage/internal/blob"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/emulators"
	"github.com/triagehq/triage/internal/events"
	"github.com/triagehq/triage/internal/eventsource"
	"github.com/triagehq/triage/internal/promote"
	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/tracing/otlpenv"
	"github.com/triagehq/triage/triageconfig"
	"github.com/triagehq/triage/triagetype"
)

// Options configures a dev server.
type Options struct {
	Getenv          func(string) string // configuration source (os.Getenv)
	Setenv          func(k, v string) error
	Root            string        // repository root, for installing emulators ("": the user's cache)
	PromoteInterval time.Duration // promoter period (TRIAGE_PROMOTE_INTERVAL or 5 s)
	Out             io.Writer     // the terminal: the banner, warnings and errors, the stop summary
	// Logs receives the full JSON logs (every transition). Nil: a file in
	// StateDir, named in the banner.
	Logs io.Writer
	// StateDir holds each server's log and settings file (the URL and token
	// the CLI falls back to, and the settings a worker needs), named by its
	// listen address (LogFileName, EnvFileName). Default: the user's cache
	// directory, under triage/.
	StateDir string
	// Timeouts bound the HTTP server's connections (DefaultTimeouts()).
	Timeouts Timeouts
	// Ready, if set, is called with the API's base URL and token once serving.
	Ready func(url, token string)
	// NoDemoHandlers leaves the demo handlers out of the consumer (and
	// TRIAGE_DEMO_HANDLERS is ignored either way), so a developer's own
	// worker runs every type; the API then accepts any type unless
	// TRIAGE_TYPES lists them. `triage dev --no-demo-handlers`.
	NoDemoHandlers bool
	// NoConsumer runs no consumer at all: the API, promoter and dashboard
	// only, for one's own workers. `triage dev --no-consumer`.
	NoConsumer bool
}

// DrainGrace is how long running tasks get to finish after Ctrl-C before
// the consumer hands them back to their queues (the attempt counted). A
// short task finishes; a long one is not waited for, since a developer who
// pressed Ctrl-C wants the prompt back.
const DrainGrace = 3 * time.Second

// Timeouts bound what one connection may hold of the dev server.
type Timeouts struct {
	ReadHeader time.Duration // request line and headers
	Read       time.Duration // the whole request, body included
	Write      time.Duration // from the end of the headers to the end of the response
	Idle       time.Duration // a keep-alive connection between requests
	MaxHeader  int           // bytes of request headers
}

// DefaultTimeouts suit the API: a batch body of up to 5 MiB arrives in well
// under 30 s even on a slow link, no handler takes long (the slowest reads
// a page of tasks), and a client that stops sending or sits idle lets its
// connection go instead of holding it forever. It is a function, not a
// variable, so no caller can change the defaults for everyone.
func DefaultTimeouts() Timeouts {
	return Timeouts{
		ReadHeader: 5 * time.Second,
		Read:       30 * time.Second,
		Write:      60 * time.Second,
		Idle:       90 * time.Second,
		MaxHeader:  64 << 10,
	}
}

// NewHTTPServer is the dev server's http.Server for h with timeouts t
// (zero fields take DefaultTimeouts()').
func NewHTTPServer(h http.Handler, t Timeouts) *http.Server {
	d := DefaultTimeouts()
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: cmp.Or(t.ReadHeader, d.ReadHeader),
		ReadTimeout:       cmp.Or(t.Read, d.Read),
		WriteTimeout:      cmp.Or(t.Write, d.Write),
		IdleTimeout:       cmp.Or(t.Idle, d.Idle),
		MaxHeaderBytes:    cmp.Or(t.MaxHeader, d.MaxHeader),
	}
}

// StateDir is where `triage dev` keeps its logs and settings files by default.
func StateDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "triage")
	}
	return filepath.Join(os.TempDir(), "triage")
}

// Run starts everything and blocks until ctx ends, then stops what it
// started: the consumer drains, the server shuts down, the emulators stop.
func Run(ctx context.Context, opt Options) error {
	if opt.Getenv == nil {
		opt.Getenv = os.Getenv
	}
	if opt.Setenv == nil {
		opt.Setenv = os.Setenv
	}
	cfg, err := triageconfig.FromEnv(opt.Getenv)
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	cfg.DemoHandlers = !opt.NoDemoHandlers && !opt.NoConsumer // whatever TRIAGE_DEMO_HANDLERS says
	if opt.StateDir == "" {
		opt.StateDir = StateDir()
	}
	if err := os.MkdirAll(opt.StateDir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", opt.StateDir, err)
	}
	// Listen first: the address names this server's log and settings file,
	// and a taken address fails before the emulators start.
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s (set %s to change it): %w", cfg.Addr, triageconfig.EnvAddr, err)
	}
	defer ln.Close() // on an early return; Shutdown closes it otherwise
	addr := ln.Addr().String()
	logPath := "(not kept)"
	if opt.Logs == nil {
		logPath = filepath.Join(opt.StateDir, LogFileName(addr))
		f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			return fmt.Errorf("open the log file: %w", err)
		}
		defer f.Close()
		opt.Logs = f
	}
	log, err := devLogger(opt.Out, opt.Logs, cfg.LogLevel, opt.Getenv(triageconfig.EnvLogFormat), opt.Getenv(triageconfig.EnvLogLevel) != "")
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}

	var emu *emulators.Emulators // nil when AWS endpoints are configured
	if !emulators.EndpointsSet(opt.Getenv) {
		if emulators.Installed(opt.Root) {
			fmt.Fprintln(opt.Out, "starting local AWS emulators (SQS: fauxqs, DynamoDB: DynamoDB Local)...")
		} else {
			dir, _ := emulators.InstallDir(opt.Root)
			fmt.Fprintf(opt.Out, "installing the local AWS emulators into %s from npm (first start only; needs a Java 17 JDK)...\n", dir)
		}
		if emu, err = emulators.Start(ctx, opt.Root); err != nil {
			return err
		}
		defer emu.Stop() // on an early return; the stop below has stopped them already
		// The SDK reads its endpoints from the environment, exactly as it
		// would for LocalStack or AWS.
		for k, v := range emu.Env() {
			if err := opt.Setenv(k, v); err != nil {
				return err
			}
		}
	}
	for k, v := range localAWSDefaults() {
		if os.Getenv(k) == "" {
			_ = opt.Setenv(k, v)
		}
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("load AWS config: %w", err)
	}
	sp := spec.Of(cfg.Prefix, cfg.Table, cfg.Bucket)
	fmt.Fprintf(opt.Out, "creating the table %s, its queues and the bucket %s unless they exist...\n", sp.Table.Name, sp.Bucket.Name)
	if _, err := emulators.Bootstrap(ctx, store.NewClient(awsCfg), sqs.NewFromConfig(awsCfg), blob.NewClient(awsCfg), sp); err != nil {
		return err
	}

	token := cfg.Token
	if token == "" {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		token = "dev-" + hex.EncodeToString(b)
		cfg.Token = token
	}
	a, err := app.New(ctx, cfg, log)
	if err != nil {
		return err
	}
	// Spans over OTLP when the OTEL_* variables name an endpoint, as the
	// Lambda functions do; flushed on the way out.
	if a.Tracing, err = otlpenv.FromEnv(ctx, "triage", opt.Getenv); err != nil {
		return err
	}
	defer func() { _ = a.Tracing.Shutdown(context.WithoutCancel(ctx)) }()
	tokens, err := apiapp.TableAuth(ctx, a, nil, 0)
	if err != nil {
		return err
	}
	reg, err := consumerapp.Handlers(a)
	if err != nil {
		return err
	}
	interval := opt.PromoteInterval
	if interval <= 0 {
		interval = 5 * time.Second
		if opt.Getenv(triageconfig.EnvPromoteInterval) != "" {
			interval = cfg.PromoteInterval
		}
	}

	runs := "the consumer (demo handlers) and the promoter"
	switch {
	case opt.NoConsumer:
		runs = "the promoter (no consumer: run your own workers)"
	case opt.NoDemoHandlers:
		runs = "the consumer (no demo handlers) and the promoter"
	}
	fmt.Fprintf(opt.Out, "starting the API on %s, %s...\n", addr, runs)
	// With its demo handlers the dev server knows every type it can run:
	// it refuses the others at submit, unless TRIAGE_TYPES says otherwise.
	// Without them the types are the developer's workers' to run: any is
	// accepted (or those TRIAGE_TYPES lists).
	known := cfg.Types
	if len(known) == 0 && cfg.DemoHandlers {
		known = reg.Types()
	}
	// Lifecycle events: the counters' Poller feeds GET /api/v1/events (and
	// any configured webhooks).
	broker := events.NewBroker(0)
	if _, err := eventsapp.Attach(a, opt.Getenv, broker); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	rec, sink, err := devMetrics()
	if err != nil {
		return err
	}
	srv := NewHTTPServer(withMetrics(apiapp.Handler(a, tokens, api.Options{KnownTypes: known, Events: broker, Metrics: rec,
		Aging: api.Aging{LowAfter: cfg.LowAfter, MediumAfter: cfg.MediumAfter, Interval: interval}}), sink), opt.Timeouts)
	base := "http://" + ln.Addr().String()

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	errc := make(chan error, 3)
	wg.Add(4)
	go func() { defer wg.Done(); promoterapp.SampleQueuesEvery(runCtx, a, rec, interval) }()
	go func() {
		defer wg.Done()
		if err := a.CounterPoller().Run(runCtx); err != nil && runCtx.Err() == nil {
			a.Log.Error("the stream poller stopped: /stats counters and lifecycle events are not updated", "error", err)
		}
	}()
	go func() {
		defer wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("API server: %w", err)
		}
	}()
	var consumers *environments // nil with NoConsumer
	if !opt.NoConsumer {
		// The queues start the consumer as they do in Lambda: a local event
		// source invokes the consumer function's handler with SQS events.
		consumers = &environments{}
		src := &eventsource.Source{
			SQS: a.SQS, Queues: queueURLs(a), Wait: cfg.PollWait, Log: log,
			NewFunction: func() (lambda.Handler, error) {
				c := consumerapp.New(a, reg, dispatch.Options{DrainTimeout: DrainGrace, APIURL: base}, dispatch.Deps{Metrics: rec, Kind: triagetype.WorkerKindDev})
				consumers.add(c)
				return lambda.NewHandler(consumerapp.FunctionHandler(c, a.Queues, consumerapp.LambdaReserve)), nil
			},
		}
		wg.Add(1)
		go func() { defer wg.Done(); _ = src.Run(runCtx) }()
	}
	go func() {
		defer wg.Done()
		_ = promoterapp.New(a, promote.Options{Metrics: rec, Counts: a.Counters}).Run(runCtx, interval)
	}()

	banner := fmt.Sprintf("  API:        %s/api/v1\n  dashboard:  %s/#token=%s\n  token:      %s\n", base, base, token, token)
	wenv := workerEnv(opt.Getenv, emu, cfg)
	try := ""
	if cfg.DemoHandlers {
		try = "  curl -H \"Authorization: Bearer $TRIAGE_TOKEN\" -d '{\"type\":\"echo\",\"payload\":{\"x\":1},\"priority\":\"high\"}' $TRIAGE_URL/api/v1/tasks\n"
	}
	// The CLI's settings file goes first: once the banner shows, a `triage`
	// command in another shell finds this server.
	envPath := filepath.Join(opt.StateDir, EnvFileName(addr))
	envBody := envBody(base, token, os.Getpid(), wenv)
	if err := os.WriteFile(envPath, envBody, 0o600); err != nil {
		log.Warn("could not write the CLI's settings file", "path", envPath, "error", err)
	}
	defer removeIfUnchanged(envPath, envBody)
	fmt.Fprintf(opt.Out, "\ntriage is running\n%s  logs:       %s (the terminal shows warnings and errors)\n\n  export TRIAGE_URL=%s TRIAGE_TOKEN=%s\n%s\n%s\nPress Ctrl-C to stop.\n",
		banner, logPath, base, token, try, workerBanner(wenv))
	consumerStart := "none"
	if consumers != nil {
		consumerStart = "sqs events"
	}
	log.Info("dev server ready", "url", base, "table", cfg.Table, "promote_interval", interval.String(), "consumer", consumerStart)
	if opt.Ready != nil {
		opt.Ready(base, token)
	}

	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	stop() // the consumer hands running tasks back while the emulators still answer
	shutCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutCtx)
	wg.Wait()
	log.Info("dev server stopped")
	line := "stopped: no consumer"
	if consumers != nil {
		line = "stopped: " + handedBack(consumers.handedBack())
	}
	if emu != nil {
		emu.Stop() // after the drain: the hand-backs were written to them
		line += ", emulators stopped"
	}
	fmt.Fprintf(opt.Out, "\n%s\n%s", line, banner)
	return err
}

// environments are the consumers the local event source started, one per
// environment, as Lambda starts them.
type environments struct {
	mu sync.Mutex
	cs []*dispatch.Consumer
}

func (e *environments) add(c *dispatch.Consumer) {
	e.mu.Lock()
	e.cs = append(e.cs, c)
	e.mu.Unlock()
}

// handedBack is how many running tasks their drains handed back.
func (e *environments) handedBack() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	var n int64
	for _, c := range e.cs {
		n += c.Counts().HandedBack
	}
	return n
}

// queueURLs are the priority queues' URLs, highest first.
func queueURLs(a *app.App) []string {
	var urls []string
	for _, p := range triagetype.Priorities() {
		urls = append(urls, a.Queues.URL(p))
	}
	return urls
}

// handedBack says what the drain did with the tasks that were running.
func handedBack(n int64) string {
	switch n {
	case 0:
		return "no running tasks to hand back"
	case 1:
		return "1 running task handed back to its queue"
	}
	return fmt.Sprintf("%d running tasks handed back to their queues", n)
}

// removeIfUnchanged removes the server's settings file at stop, unless
// another `triage dev` on the same address (started after this one was
// killed, say) has replaced it with its own.
func removeIfUnchanged(path string, wrote []byte) {
	if b, err := os.ReadFile(path); err == nil && bytes.Equal(b, wrote) {
		_ = os.Remove(path)
	}
}

// devLogger writes readable logs at warn and above to the terminal (or at
// TRIAGE_LOG_LEVEL when it is set), and every log line as JSON to logs; with
// TRIAGE_LOG_FORMAT=json the terminal gets the JSON lines instead. Any
// other format is an error naming the variable, as triageconfig.FromEnv does for
// the settings it reads.
func devLogger(term, logs io.Writer, level, format string, levelSet bool) (*slog.Logger, error) {
	switch format {
	case "json":
		return app.NewLogger(io.MultiWriter(term, logs), level), nil
	case "", "text":
	default:
		return nil, fmt.Errorf("%s: want text or json, got %q", triageconfig.EnvLogFormat, format)
	}
	termLevel := slog.LevelWarn
	if levelSet {
		termLevel = app.ParseLevel(level)
	}
	return slog.New(slog.NewMultiHandler(
		slog.NewTextHandler(term, &slog.HandlerOptions{Level: termLevel}),
		slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: app.ParseLevel(level)}),
	)), nil
}
