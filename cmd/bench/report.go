package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/triagehq/triage/internal/api"
	"github.com/triagehq/triage/triagetype"
)

// Results is everything a run measured; it is printed as tables and
// written as JSON. Structs (not maps) fix the key order of the JSON.
type Results struct {
	Environment Environment  `json:"environment"`
	Settings    options      `json:"settings"`
	Warmup      Warmup       `json:"warmup"`
	Ceiling     Ceiling      `json:"emulator_ceiling"`
	Submit      Submit       `json:"submit"`
	EndToEnd    []E2E        `json:"end_to_end"`
	Latency     Latency      `json:"latency_per_priority"`
	Requests    Requests     `json:"aws_requests_per_task"`
	Bound       Bound        `json:"throughput_bound"`
	WriteBound  WriteBound   `json:"write_bound"`
	Targets     []Target     `json:"local_speed_targets"`
	Cost        Cost         `json:"cost_per_million_tasks_usd"`
	Payloads    []PayloadRun `json:"payload_sizes"`
	Direct      []DirectRun  `json:"direct_send"`
	Flow        *FlowRun     `json:"flow,omitempty"`
	Stats       StatsScaling `json:"stats_vs_retained"`
	CrossCheck  []CrossCheck `json:"capacity_cross_check"`
	Schedules   ScheduleRun  `json:"schedule_ticks"`
	Waiting     *Waiting     `json:"waiting,omitempty"`
	Durable     *Durable     `json:"durable,omitempty"`
	IdleStart   *IdleStart   `json:"idle_start,omitempty"`
	IdleMonth   *IdleMonth   `json:"idle_month,omitempty"`
	Retention   *Retention   `json:"retention,omitempty"`
	Soak        *Soak        `json:"soak,omitempty"`
	Problems    []string     `json:"problems"`
	Notes       []string     `json:"notes"`
	WallSeconds float64      `json:"wall_seconds"`
}

// Environment describes the machine and the emulators.
type Environment struct {
	CPUs       int    `json:"cpus"`
	CPUModel   string `json:"cpu_model"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	GoVersion  string `json:"go_version"`
	OSArch     string `json:"os_arch"`
	MemoryGiB  int    `json:"memory_gib"`
	SQS        string `json:"sqs_emulator"`
	DynamoDB   string `json:"dynamodb_emulator"`
	StartedAt  string `json:"started_at"`
	// The machine's load average before and after the run: other work on
	// the same 2 cores (tests, builds) skews every figure.
	LoadStart string `json:"load_average_start"`
	LoadEnd   string `json:"load_average_end"`
	Quick     bool   `json:"quick"`
}

// writeJSON writes r to path, indented, with a trailing newline.
func writeJSON(path string, r *Results) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("encode results: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	return nil
}

func printEnvironment(w io.Writer, e Environment) {
	t := &table{title: "environment", head: []string{"item", "value"}}
	t.row("CPUs (runtime.NumCPU)", d(e.CPUs))
	t.row("CPU model", e.CPUModel)
	t.row("GOMAXPROCS", d(e.GOMAXPROCS))
	t.row("Go", e.GoVersion)
	t.row("OS/arch", e.OSArch)
	t.row("memory", fmt.Sprintf("%d GiB", e.MemoryGiB))
	t.row("SQS emulator", e.SQS)
	t.row("DynamoDB emulator", e.DynamoDB)
	t.row("started", e.StartedAt)
	t.row("load average (1/5/15 min) at start", e.LoadStart)
	t.row("load average (1/5/15 min) at end", e.LoadEnd)
	if e.Quick {
		t.note("-quick: every scenario is 2-10x smaller; figures are a smoke test, not a benchmark")
	}
	t.write(w)
}

func printWarmup(w io.Writer, wu Warmup) {
	t := &table{title: "0. warm-up (not a measurement)", head: []string{"round", "tasks/s"}}
	for i, r := range wu.Rounds {
		t.row(d(i+1), f(r, 1))
	}
	state := "settled"
	if !wu.Converged {
		state = "NOT settled (time limit)"
	}
	t.note("%s after %d tasks in %.1f s; %s", state, wu.Tasks, wu.Seconds, wu.Verdict)
	t.note("rule: %s", wu.Rule)
	t.note("why: DynamoDB Local (a JVM) writes ~4x faster after ~20 s of load than cold; every figure below is taken warm")
	t.write(w)
}

func printCeiling(w io.Writer, c Ceiling) {
	t := &table{
		title: fmt.Sprintf("1. emulator ceiling (concurrency %d, measured first)", c.Concurrency),
		head:  []string{"primitive", "calls", "seconds", "calls/s", "msgs/s", "how"},
	}
	for _, o := range c.Ops {
		msgs := ""
		if o.Entries > 0 {
			msgs = f(o.EntriesSec, 0)
		}
		t.row(o.Name, d(o.Calls), f(o.Seconds, 2), f(o.PerSecond, 0), msgs, o.Note)
	}
	t.note("the bound on tasks/s derived from the concurrency-%d rates is in group 5 (it needs the calls per task measured there)", c.Concurrency)
	t.write(w)
}

func printSubmit(w io.Writer, s Submit) {
	t := &table{
		title: "2. submit through the HTTP API (loopback server running api.New)",
		head:  []string{"mode", "conc", "requests", "tasks", "errors", "req/s", "tasks/s", "p50 ms", "p95 ms", "p99 ms"},
	}
	for _, l := range s.Single {
		t.row("POST /api/v1/tasks", d(l.Concurrency), d(l.Requests), d(l.Tasks), d(l.Errors), f(l.ReqPerSec, 1), f(l.TasksPerSec, 1),
			f(l.Latency.P50, 2), f(l.Latency.P95, 2), f(l.Latency.P99, 2))
	}
	for _, l := range s.Batch {
		t.row(fmt.Sprintf("batch of %d", s.BatchSize), d(l.Concurrency), d(l.Requests), d(l.Tasks), d(l.Errors), f(l.ReqPerSec, 1), f(l.TasksPerSec, 1),
			f(l.Latency.P50, 2), f(l.Latency.P95, 2), f(l.Latency.P99, 2))
	}
	b := s.Baselines
	for _, l := range b.Beside {
		t.row("POST /api/v1/tasks beside a consumer", d(l.Concurrency), d(l.Requests), d(l.Tasks), d(l.Errors), f(l.ReqPerSec, 1), f(l.TasksPerSec, 1),
			f(l.Latency.P50, 2), f(l.Latency.P95, 2), f(l.Latency.P99, 2))
	}
	t.note("batch mode: %s", s.BatchMode)
	t.note("latency is per request (a batch request carries %d tasks)", s.BatchSize)
	t.note("beside a consumer: the same submits with a 32-slot consumer running what they submit and the counters poller reading the stream, as under make run")
	t.write(w)

	t = &table{
		title: "2a. raw baselines: the same emulators without triage, same run, same table and queue",
		head:  []string{"primitive", "conc", "calls", "calls/s", "p50 ms", "p95 ms", "p99 ms"},
	}
	for i := range b.Put {
		for _, x := range []struct {
			name string
			l    SubmitLevel
		}{{"PutItem (conditional, task item)", b.Put[i]}, {"PutItem + SendMessage", b.Pair[i]}} {
			t.row(x.name, d(x.l.Concurrency), d(x.l.Requests), f(x.l.ReqPerSec, 1), f(x.l.Latency.P50, 2), f(x.l.Latency.P95, 2), f(x.l.Latency.P99, 2))
		}
	}
	for _, l := range b.PairBeside {
		t.row("PutItem + SendMessage beside a consumer", d(l.Concurrency), d(l.Requests), f(l.ReqPerSec, 1), f(l.Latency.P50, 2), f(l.Latency.P95, 2), f(l.Latency.P99, 2))
	}
	t.row(fmt.Sprintf("batch bound: %d tasks", b.BatchTasks), "", d(b.BatchTasks), f(b.BatchPerSec, 1)+" tasks/s", "", "", "")
	t.note("task item: the store's own attributes and index keys (store.Item), written with attribute_not_exists(pk) to the task table (its indexes and stream on)")
	t.note("beside a consumer: the consumer runs these tasks too (task records, triage's message body), so the emulators do the same work behind each write as behind a submit")
	t.note("batch bound: conditional PutItems from the workers, each sending its messages 10 per SendMessageBatch")
	t.write(w)
}

func printTargets(w io.Writer, r *Results) {
	t := &table{
		title: "targets of the local stack, each against a floor measured in this run",
		head:  []string{"figure", "measured", "target", "unit", "met", "target from"},
	}
	for _, x := range r.Targets {
		op := "≥ "
		if x.Cmp == "<=" {
			op = "≤ "
		}
		met := "yes"
		if !x.Met {
			met = "MISSED"
		}
		t.row(x.Metric, f(x.Measured, 1), op+f(x.Target, 1), x.Unit, met, x.Basis)
	}
	if wb := r.WriteBound; wb.Bound > 0 {
		t.note("implied end-to-end bound: %.0f conditional writes/s (task table, indexes and stream; group 1) ÷ %.2f DynamoDB writes per task in the consumer = %.0f tasks/s", wb.Ceiling, wb.WritesPerTask, wb.Bound)
	}
	t.write(w)
}

func printE2E(w io.Writer, es []E2E) {
	t := &table{
		title: "3. end to end: noop tasks, all submitted first, then consumed",
		head:  []string{"setup", "tasks", "load tasks/s", "completed", "seconds", "tasks/s", "bound", "x bound", "ledger"},
	}
	for _, e := range es {
		ledger := "ok"
		if !e.Verdict.ok() {
			ledger = "FAILED"
		}
		if !e.Complete {
			ledger += " (incomplete)"
		}
		t.row(e.Setup, d(e.Tasks), f(e.LoadPerSec, 0), d(e.Completed), f(e.Seconds, 2), f(e.PerSec, 1), f(e.Bound, 0), f(e.RatioToBound, 2), ledger)
	}
	t.note("tasks/s: completions / (consumer start -> last completion); all tasks are submitted (batches of 100) before the consumers start")
	t.note("bound: the consumer-phase bound in tasks/s from the emulator ceiling and the setup's own calls per task (group 5); x bound = tasks/s / bound")
	t.note("x bound above 1 is possible: the ceiling is taken at concurrency 16, a 32-slot consumer keeps more calls in flight, and DynamoDB Local's rate rises with calls in flight (group 1)")
	for _, e := range es {
		t.note("%s: %s; DynamoDB status=completed high/medium/low = %d/%d/%d; messages left on queues+DLQs: %d",
			e.Setup, e.Verdict, e.StoreCompleted[triagetype.High], e.StoreCompleted[triagetype.Medium], e.StoreCompleted[triagetype.Low], e.LeftoverMessages)
		for _, wn := range e.Warnings {
			t.note("%s: consumer log: %s", e.Setup, wn)
		}
	}
	t.write(w)
	for _, e := range es {
		printHotKeys(w, "3b. partition keys, "+e.Setup+" (submit + consume + the counters catching up; table and every index)", e.HotKeys, e.HotReadKeys, e.Ceiling)
	}
}

// printHotKeys prints the hottest write keys, then the hottest read keys
// not already shown, and the projected ceiling.
func printHotKeys(w io.Writer, title string, hotW, hotR []HotKey, c KeyCeiling) {
	h := &table{
		title: title,
		head:  []string{"partition key", "ranked by", "write units/task", "read units/task", "write ceiling tasks/s", "read ceiling tasks/s"},
	}
	ceil := func(x float64) string {
		if x == 0 {
			return "-"
		}
		return f(x, 0)
	}
	shown := map[string]bool{}
	for _, k := range hotW {
		shown[k.Key] = true
		h.row(k.Key, "writes", f(k.WriteUnitsPerTask, 4), f(k.ReadUnitsPerTask, 4), ceil(k.CeilingTasksPerSec), ceil(k.ReadCeilingTasksPerSec))
	}
	for _, k := range hotR {
		if !shown[k.Key] {
			h.row(k.Key, "reads", f(k.WriteUnitsPerTask, 4), f(k.ReadUnitsPerTask, 4), ceil(k.CeilingTasksPerSec), ceil(k.ReadCeilingTasksPerSec))
		}
	}
	h.note("projected real-AWS ceiling: %s tasks/s = min(1,000 WCU/s ÷ %.4f write units/task on %s, 3,000 RCU/s ÷ %.4f read units/task on %s)",
		ceil(c.TasksPerSec), c.WriteUnitsPerTask, orNone(c.HottestWriteKey), c.ReadUnitsPerTask, orNone(c.HottestReadKey))
	h.note("a partition key takes at most 1,000 write units/s and 3,000 read units/s on DynamoDB; the hottest key bounds the rate of one task type at one priority")
	h.note("every task here has the same type at one priority: the worst case the data model is sized for (with the type index, TRIAGE_TYPE_INDEX, one type's tasks also share by-type's shards)")
	h.note("control items (table CTRL#…) are read once per consumer per control-cache period, not per task: their units per task fall as the rate rises, so their read ceiling here is a lower bound")
	h.note("units per key are computed (group 10 compares the totals with what DynamoDB reported); \"table <pk>\" is a table item, \"<index> <partition>\" an index partition")
	h.write(w)
}

func printLatency(w io.Writer, l Latency) {
	state := "complete"
	if !l.Complete {
		state = "INCOMPLETE (bounded; figures are for the tasks that finished)"
	}
	t := &table{
		title: fmt.Sprintf("4. latency per priority under load: %d low backlog + high at %.0f/s for %.0f s; %s; weights %s",
			l.Backlog, l.HighRate, l.HighSeconds, l.Setup, l.Weights),
		head: []string{"tasks", "measure", "n", "p50 ms", "p95 ms", "p99 ms", "max ms"},
	}
	for _, r := range []struct {
		who, what string
		d         Dist
	}{
		{"high", "queue wait (started - created)", l.HighWait},
		{"high", "end to end (completed - created)", l.HighE2E},
		{"low", "queue wait (started - created)", l.LowWait},
		{"low", "end to end (completed - created)", l.LowE2E},
	} {
		t.row(r.who, r.what, d(r.d.N), f(r.d.P50, 1), f(r.d.P95, 1), f(r.d.P99, 1), f(r.d.Max, 1))
	}
	t.note("%s in %.1f s: %d of %d high and %d of %d low completed; %s", state, l.Seconds, l.HighCompleted, l.HighSubmitted, l.LowCompleted, l.Backlog, l.Verdict)
	for _, wn := range l.Warnings {
		t.note("consumer log: %s", wn)
	}
	t.write(w)
}

func printRequests(w io.Writer, r Requests, b Bound) {
	for _, p := range r.Phases {
		t := &table{
			title: fmt.Sprintf("5. AWS requests per task: %s (%d tasks)", p.Name, p.Tasks),
			head:  []string{"operation [item]", "calls/task", "attempts/task", "errors", "msgs/call", "avg ms"},
		}
		for _, o := range p.Ops {
			avg := ""
			if o.AvgEntries > 0 {
				avg = f(o.AvgEntries, 2)
			}
			t.row(o.Op, f(o.PerTask, 4), f(o.Attempts, 4), errorsCell(o), avg, f(o.AvgMillis, 2))
		}
		t.row("= DynamoDB requests", f(p.DDBCalls, 4))
		t.row("= DynamoDB write units (table only)", f(p.DDBWriteTable, 3))
		t.row("= DynamoDB write units (with GSI writes)", f(p.DDBWriteWithGSI, 3))
		t.row("= DynamoDB read units", f(p.DDBRead, 3))
		t.row("= SQS requests", f(p.SQSRequests, 4))
		t.note("errors: 'canceled' are calls cut short when the consumers were stopped; 'refused' are conditional writes that lost a race (each still costs 1 write unit)")
		t.write(w)
	}
	t := &table{title: "5. targets (the benchmark and data-model issues)", head: []string{"metric", "measured", "DynamoDB reports", "target", "result"}}
	for _, g := range r.Targets {
		res := "met"
		if !g.Met {
			res = "NOT met"
		}
		rep := ""
		if g.Reported != nil {
			rep = f(*g.Reported, 3)
		}
		digits := 3
		if g.Measured >= 1000 {
			digits = 0
		}
		t.row(g.Metric, f(g.Measured, digits), rep, g.Cmp+" "+targetText(g.Target), res)
	}
	t.note("write units and SQS requests: steady state with batching (scenario 3 load + consumer), not counting the counters (their units are a phase of their own above)")
	t.note("a target in capacity units is met only when the computed figure and DynamoDB's reported one (ReturnConsumedCapacity) both are")
	t.note("capacity estimate: %s", r.CapacityMethod)
	t.write(w)

	t = &table{title: "5. throughput bound from the emulator ceiling", head: []string{"operation", "ceiling primitive", "rate/s", "consumer calls/task", "submit calls/task", "consumer us/task", "pipeline us/task"}}
	for _, x := range b.Terms {
		t.row(x.Op, x.Primitive, f(x.Rate, 0), f(x.ConsumerPerTask, 4), f(x.SubmitPerTask, 4), f(x.ConsumerMicros, 1), f(x.PipelineMicros, 1))
	}
	t.note("%s", b.Formula)
	t.note("consumer-phase bound: %.1f tasks/s (what scenario 3 is compared with); whole pipeline (submit + consume): %.1f tasks/s", b.Consumer, b.Pipeline)
	t.note("if the two emulators did not share CPU, the slower alone would allow %.1f tasks/s (consumer phase)", b.ConsumerMin)
	t.write(w)
}

func printCost(w io.Writer, c Cost) {
	p := c.Prices
	t := &table{title: "5. cost per million tasks (USD, on-demand, us-east-1)", head: []string{"path", "SQS", "DDB writes", "DDB reads", "S3", "API GW", "API λ", "consumer λ", "counters", "total", "(DDB writes table only)"}}
	for _, x := range c.Paths {
		t.row(x.Name, f(x.SQS, 3), f(x.DDBWrites, 3), f(x.DDBReads, 3), f(x.S3, 3), f(x.APIGateway, 3), f(x.APILambda, 3), f(x.ConsumerLambda, 3), f(x.Counters, 3), f(x.Total, 3), f(x.DDBWritesTable, 3))
	}
	t.note("prices: SQS $%.2f per million requests; DynamoDB $%.3f per million write request units, $%.3f per million read request units;",
		p.SQSPerMillionRequests, p.DDBPerMillionWriteUnits, p.DDBPerMillionReadUnits)
	t.note("        S3 Standard $%.4f per 1,000 PUT/COPY/POST/LIST requests, $%.4f per 1,000 GET and other requests (DELETE free);", p.S3PerThousandPut, p.S3PerThousandGet)
	t.note("        API Gateway HTTP API $%.2f per million requests; Lambda $%.2f per million requests + $%.10f per GB-second (arm64); λ sizes: API %d MB, consumer %d MB, counters %d MB",
		p.APIGatewayPerMillionRequests, p.LambdaPerMillionRequests, p.LambdaPerGBSecondARM, p.APILambdaMB, p.ConsumerLambdaMB, p.CountersLambdaMB)
	for _, a := range c.Assumptions {
		t.note("assumption: %s", a)
	}
	t.write(w)
	fmt.Fprintln(w)
	s := &table{title: "5b. cost per million tasks by service (USD; λ billed at AWS-like call latencies, see the assumptions above)",
		head: []string{"path", "Lambda", "DynamoDB", "SQS", "API Gateway", "S3", "total on-demand", "target", "DynamoDB provisioned", "total provisioned", "target"}}
	for _, x := range c.Paths {
		onT, provT := "", ""
		if x.Name == directSQS {
			onT, provT = fmt.Sprintf("<= %.2f %s", targetDirectCostOnDemand, metMark(x.Total <= targetDirectCostOnDemand)),
				fmt.Sprintf("<= %.2f %s", targetDirectCostProvisioned, metMark(x.TotalProvisioned <= targetDirectCostProvisioned))
		}
		b := x.ByService
		s.row(x.Name, f(b.Lambda, 3), f(b.DynamoDB, 3), f(b.SQS, 3), f(b.APIGateway, 3), f(b.S3, 3), f(x.Total, 3), onT, f(x.DynamoDBProvisioned, 3), f(x.TotalProvisioned, 3), provT)
	}
	s.write(w)
}

// metMark says whether a target was met.
func metMark(ok bool) string {
	if ok {
		return "(met)"
	}
	return "(NOT met)"
}

func printPayloads(w io.Writer, ps []PayloadRun) {
	t := &table{
		title: "7. units and requests per task by payload size (API submit + consumer, counted as the store makes them)",
		head:  []string{"payload", "tasks", "per batch", "table WCU", "index WCU", "billed WCU", "reported WCU", "RCU", "reported RCU", "S3 PUT", "S3 GET", "SQS req", "target", "result", "ledger"},
	}
	for _, p := range ps {
		target, res := "", ""
		if p.Target > 0 {
			target = "<= " + targetText(p.Target)
			res = "met"
			if p.Total.DDBWriteWithGSI > p.Target || (p.Total.Reported.CallsShare > 0 && p.Total.Reported.WriteUnits > p.Target) {
				res = "NOT met"
			}
		}
		ledger := "ok"
		if !p.Verdict.ok() {
			ledger = "FAILED"
		}
		if !p.Complete {
			ledger += " (incomplete)"
		}
		tt := p.Total
		t.row(bytesText(p.PayloadBytes), d(p.Tasks), d(p.APIBatch), f(tt.DDBWriteTable, 3), f(tt.DDBWriteWithGSI-tt.DDBWriteTable, 3), f(tt.DDBWriteWithGSI, 3),
			f(tt.Reported.WriteUnits, 3), f(tt.DDBRead, 3), f(tt.Reported.ReadUnits, 3), f(tt.S3Put, 3), f(tt.S3Get, 3), f(tt.SQSRequests, 3), target, res, ledger)
	}
	if len(ps) > 0 {
		t.note("payload: a JSON object of exactly that many bytes; tasks submitted through %s in batches as large as the API's %d MB body limit allows, then consumed; the counters are left out here (group 3 has them)",
			ps[0].BatchMode, api.MaxBatchBody>>20)
	}
	t.note("billed WCU = table + index writes, computed from the items the calls carry; reported = DynamoDB's ReturnConsumedCapacity for the same run (refused writes have no report)")
	t.note("S3 columns count whatever S3 requests the app made (by price class); 0 means the payload stayed on the task item")
	t.write(w)
}

func printDirect(w io.Writer, ds []DirectRun) {
	t := &table{
		title: "8. direct send: submitted without the HTTP API, consumed, counters caught up",
		head:  []string{"path", "tasks", "load s", "consume s", "tasks/s", "billed WCU", "counters WCU", "RCU", "SQS req", "S3 req", "ceiling tasks/s", "ledger"},
	}
	for _, x := range ds {
		ledger := "ok"
		if !x.Verdict.ok() {
			ledger = "FAILED"
		}
		if !x.Complete {
			ledger += " (incomplete)"
		}
		sc := combine("", x.Submit, x.Consume)
		t.row(x.Path, d(x.Tasks), f(x.LoadSec, 2), f(x.Seconds, 2), f(x.PerSec, 1), f(sc.DDBWriteWithGSI, 3), f(x.Counters.DDBWriteWithGSI, 3),
			f(x.Total.DDBRead, 3), f(x.Total.SQSRequests, 3), f(x.Total.S3Put+x.Total.S3Get, 3), f(x.Ceiling.TasksPerSec, 0), ledger)
	}
	t.note("direct send: %d-byte bodies %s, sent to the medium queue; the consumer creates each record under an id derived from the message id (one conditional put; a redelivery finds it by its key)", len(directBody), directBody)
	t.note("direct producer: triage.Client over package direct, the API's submit service in process (PutItem, then one SendMessage per task)")
	t.note("billed WCU: submit + consume, indexes included; counters WCU: folding the run's stream records into the /stats counters; their cost is in group 5")
	for _, x := range ds {
		t.note("%s: %s", x.Path, x.Verdict)
	}
	for _, x := range ds {
		if x.Path == directSQS {
			t.note("direct send, SQS requests a task by kind: %s", sqsSplit(x))
		}
	}
	t.write(w)
	for _, x := range ds {
		name, _, _ := strings.Cut(x.Path, ":")
		printHotKeys(w, "8b. partition keys, "+name+" (submit + consume + counters)", x.HotKeys, x.HotRead, x.Ceiling)
	}
}

func printStats(w io.Writer, s StatsScaling) {
	t := &table{
		title: fmt.Sprintf("9. GET /api/v1/stats with retained tasks (%d timed requests per size, round-robin over the sizes)", s.Requests),
		head:  []string{"retained", "wanted", "fill s", "p50 ms", "p95 ms", "DDB calls/req", "read units/req", "reported RCU/req", "SQS req/req"},
	}
	for _, r := range s.Runs {
		t.row(d(r.Retained), d(r.Wanted), f(r.FillSeconds, 1), f(r.Latency.P50, 2), f(r.Latency.P95, 2), f(r.DDBCalls, 2), f(r.ReadUnits, 3), f(r.ReportedRead, 3), f(r.SQSRequests, 2))
	}
	if s.Quick {
		t.note("-quick: %v retained tasks instead of the full run's 1,000/10,000/100,000", s.Sizes)
	}
	if s.Partial {
		t.note("PARTIAL: the fill's time budget (-stats-fill) ran out before every size was reached; the sizes compared are those in the first column")
	}
	t.note("largest ÷ smallest: p50 latency %.3f, read units %.3f (DynamoDB reports %.3f); target <= %.1f each", s.LatencyRatio, s.ReadRatio, s.ReportedRatio, targetStatsRatio)
	t.note("each size has its own table, filled with completed tasks built by store.Item (BatchWriteItem, not counted) and folded into the /stats counters by counters.Keeper.Apply, the stream reader's own code, in batches of 1,000;")
	t.note("  the stream itself is off for these tables: DynamoDB Local's per-write stream bookkeeping grows with the records it holds, which made a 100,000-task fill quadratic")
	t.note("the counters hold exactly the retained tasks before the first request; nothing else runs while /stats is timed")
	t.note("measured first, on the fresh emulators: DynamoDB Local's writes slow down as the run's stream records pile up (deleted tables' included), which would stretch the fill;")
	t.note("  the fill warms DynamoDB Local up, and %d untimed requests per size go before the timed ones", statsUntimed)
	t.note("the emulators' latency is not AWS's: the ratio between sizes is the point, not the milliseconds")
	t.write(w)
}

func printCrossCheck(w io.Writer, rows []CrossCheck) {
	t := &table{
		title: "10. DynamoDB units per task: computed by the bench vs reported by DynamoDB (ReturnConsumedCapacity=INDEXES)",
		head:  []string{"phase", "tasks", "calls reported", "computed WCU", "reported WCU", "of which index", "diff %", "computed RCU", "reported RCU", "diff %"},
	}
	for _, r := range rows {
		t.row(r.Phase, d(r.Tasks), f(r.ShareReported*100, 1)+"%", f(r.ComputedWrite, 3), f(r.ReportedWrite, 3), f(r.ReportedIndex, 3), f(r.WriteDiff, 1),
			f(r.ComputedRead, 3), f(r.ReportedRead, 3), f(r.ReadDiff, 1))
	}
	t.note("both columns cover the same calls: those that came back with a ConsumedCapacity (a write refused by its condition comes back as an error with none; the computed figures elsewhere charge it 1 unit)")
	t.note("the emulator is DynamoDB Local: its figures follow its own reading of the billing rules, not necessarily AWS's (diff %% = (computed - reported) / reported)")
	t.note("known differences, checked against DynamoDB Local 3.3.0, where the computed figure follows AWS's documented rules:")
	t.note("  reads: it charges nothing for a BatchGetItem key that finds no item and nothing for a Query that returns none (AWS: each BatchGetItem key is read like a GetItem,")
	t.note("    which costs a unit even for a missing item; a Query reads at least one 4 KB unit); /stats asks for throughput buckets that may not exist and queries 16 type")
	t.note("    shards, most of them empty, so its computed reads are the higher, and the ones its target is checked on")
	t.note("  transactions: it reports 2 units for a TransactWriteItems of several small updates (AWS: 2 units per item per KB); the counters' transactions are all updates")
	t.write(w)
}

// targetText writes a target without trailing zeros.
func targetText(x float64) string {
	if x >= 1000 {
		return f(x, 0)
	}
	return strings.TrimRight(strings.TrimRight(f(x, 2), "0"), ".")
}

func printCPU(w io.Writer, es []E2E) {
	t := &table{
		title: "6. consumer CPU time per task (getrusage RUSAGE_SELF over the consumer-only window of scenario 3)",
		head:  []string{"setup", "user s", "sys s", "wall s", "cores busy", "CPU us/task", "fauxqs us/task", "DynamoDB Local us/task"},
	}
	for _, e := range es {
		fq, dl := "n/a", "n/a"
		if e.CPU.EmulatorsKnown {
			fq, dl = f(e.CPU.FauxqsPerTask, 1), f(e.CPU.DynamoPerTask, 1)
		}
		t.row(e.Setup, f(e.CPU.UserSeconds, 2), f(e.CPU.SystemSeconds, 2), f(e.CPU.WallSeconds, 2), f(e.CPU.CoresBusy, 2), f(e.CPU.PerTaskMicros, 1), fq, dl)
	}
	t.note("the bench process also hosts the producer, but every task was submitted before the window opened; nothing is subtracted")
	t.note("the window runs from consumer start until Run returned (drain and final delete flush included)")
	t.note("the consumer's CPU includes the SDK's request signing and JSON, slog JSON formatting of every transition (to a discarded writer), and the bench's ledger")
	t.note("emulator columns: utime+stime of the child processes (node = fauxqs, java = DynamoDB Local) from /proc over the same window")
	t.write(w)
}

func printProblems(w io.Writer, r *Results) {
	t := &table{title: "checks"}
	if len(r.Problems) == 0 {
		t.note("no task was lost or ran twice; no submit failed")
	}
	for _, p := range r.Problems {
		t.note("PROBLEM: %s", p)
	}
	for _, n := range r.Notes {
		t.note("note: %s", n)
	}
	t.write(w)
}

// printAll prints every group that has data.
func printAll(w io.Writer, r *Results) {
	printEnvironment(w, r.Environment)
	if len(r.Warmup.Rounds) > 0 {
		printWarmup(w, r.Warmup)
	}
	if len(r.Ceiling.Ops) > 0 {
		printCeiling(w, r.Ceiling)
	}
	if len(r.Submit.Single) > 0 {
		printSubmit(w, r.Submit)
	}
	if len(r.EndToEnd) > 0 {
		printE2E(w, r.EndToEnd)
	}
	if r.Latency.Backlog > 0 {
		printLatency(w, r.Latency)
	}
	if len(r.Requests.Phases) > 0 {
		printRequests(w, r.Requests, r.Bound)
		printCost(w, r.Cost)
	}
	if len(r.EndToEnd) > 0 {
		printCPU(w, r.EndToEnd)
	}
	if len(r.Payloads) > 0 {
		printPayloads(w, r.Payloads)
	}
	if len(r.Direct) > 0 {
		printDirect(w, r.Direct)
	}
	if len(r.Stats.Runs) > 0 {
		printStats(w, r.Stats)
	}
	if len(r.CrossCheck) > 0 {
		printCrossCheck(w, r.CrossCheck)
	}
	printFlow(w, r.Flow)
	if r.Schedules.Ticks > 0 {
		printSchedules(w, r.Schedules)
	}
	if r.Waiting != nil {
		printWaiting(w, *r.Waiting)
	}
	if r.IdleStart != nil {
		printIdleStart(w, *r.IdleStart)
	}
	if r.Durable != nil {
		printDurable(w, *r.Durable)
	}
	if r.IdleMonth != nil {
		printIdleMonth(w, *r.IdleMonth)
	}
	if r.Retention != nil {
		printRetention(w, *r.Retention)
	}
	if r.Soak != nil {
		printSoak(w, *r.Soak)
	}
	if len(r.Targets) > 0 {
		printTargets(w, r)
	}
	printProblems(w, r)
}

// errorsCell shows an operation's errors by kind.
func errorsCell(o OpPerTask) string {
	if o.Errors == 0 {
		return "0"
	}
	var parts []string
	if o.Canceled > 0 {
		parts = append(parts, fmt.Sprintf("%d canceled", o.Canceled))
	}
	if o.Refused > 0 {
		parts = append(parts, fmt.Sprintf("%d refused", o.Refused))
	}
	if other := o.Errors - o.Canceled - o.Refused; other > 0 {
		parts = append(parts, fmt.Sprintf("%d other", other))
	}
	return strings.Join(parts, ", ")
}

// sqsSplit says what a direct send's SQS requests a task are: sends,
// receives that brought messages, delete batches (each with its mean
// entries), and the receives that brought none, which a busy consumer
// makes per second (probes and long polls of its empty queues), not per
// task, so they are also given per second of the consume phase.
func sqsSplit(x DirectRun) string {
	var send, recv, empty, del, other float64
	var recvMsgs, delMsgs float64 // messages per task the receives brought, the deletes carried
	for _, o := range x.Total.Ops {
		switch {
		case strings.HasPrefix(o.Op, "SQS SendMessage"):
			send += o.Attempts
		case strings.HasPrefix(o.Op, "SQS ReceiveMessage"):
			recv += o.Attempts - o.Empty
			empty += o.Empty
			recvMsgs += o.AvgEntries * o.PerTask
		case strings.HasPrefix(o.Op, "SQS DeleteMessageBatch"):
			del += o.Attempts
			delMsgs += o.AvgEntries * o.PerTask
		case strings.HasPrefix(o.Op, "SQS "):
			other += o.Attempts
		}
	}
	each := func(msgs, calls float64) float64 {
		if calls <= 0 {
			return 0
		}
		return msgs / calls
	}
	perSec := 0.0
	if x.Seconds > 0 {
		perSec = empty * float64(x.Tasks) / x.Seconds
	}
	return fmt.Sprintf("sends %.4f + receives with messages %.4f (%.2f each) + delete batches %.4f (%.2f each) + other %.4f = %.4f a task (the floor: 0.3, ten a request), "+
		"and empty receives %.4f a task (%.1f a second over the %.1f s consume phase: the probes and long polls of the queues with no work, paid per second)",
		send, recv, each(recvMsgs, recv), del, each(delMsgs, del), other, send+recv+del+other, empty, perSec, x.Seconds)
}
