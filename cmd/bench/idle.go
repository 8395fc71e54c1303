package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/triagehq/triage/internal/app/consumerapp"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/eventsource"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Group 14: the first task after idle, through the local event source.
//
// Each try is its own deployment (table and queues) with its own event
// source, idle for IdleFor before its one task is submitted; the tries'
// submits are spread IdleGap apart, so no two starts overlap. Measured:
// from just before the submit call to the handler's start.

// IdleStart is group 14's result.
type IdleStart struct {
	Tries       int     `json:"tries"`
	IdleSeconds float64 `json:"idle_seconds"`
	Start       Dist    `json:"first_start"`
	// AfterSubmit is the same start from the submit call's return: the
	// submit itself (send, then record write) is left out.
	AfterSubmit Dist `json:"first_start_after_submit_returned"`
	// Each is every try's start from the submit call, in ms, in order.
	Each     []float64 `json:"each_ms"`
	TargetMS float64   `json:"target_ms"`
	// IdleInvocations are the invocations every source made before its
	// task was sent (want 0: nothing runs while nothing is queued), and
	// IdleReceives its pollers' receive requests over the same time.
	IdleInvocations int64 `json:"idle_invocations"`
	IdleReceives    int64 `json:"idle_receives"`
	// IdleWorkers is how many worker registry items existed just before
	// the submits (want 0: nothing heartbeats while nothing runs).
	IdleWorkers int `json:"idle_workers"`
	// IdleDynamoDB is every DynamoDB request the deployments made over the
	// idle window, and IdleDynamoDBWriteUnits their write units (want 0:
	// nothing heartbeats, nothing polls the table).
	IdleDynamoDB           int64    `json:"idle_dynamodb_requests"`
	IdleDynamoDBWriteUnits float64  `json:"idle_dynamodb_write_units"`
	Model                  []string `json:"aws_model"`
	// Lone is what each try's task cost: one task alone in its
	// invocation, the price of scaling to zero for sparse traffic.
	Lone *LoneTask `json:"lone_task,omitempty"`
}

// LoneTask is the price of a task sent to an idle deployment, measured
// over group 14's tries: its invocation (billed for its measured
// duration, the idle tail included), every DynamoDB and SQS request from
// its submit (a send, then the record, as the API function does; API
// Gateway and the API function left out) to its invocation's return, the
// worker registry's writes included. The mapping pollers' receives are
// left out (they poll whether or not tasks come: the idle month prices
// them) and counted apart.
type LoneTask struct {
	Invocations    float64 `json:"invocations_per_task"`
	BilledMS       float64 `json:"billed_ms_per_invocation"`
	WriteUnits     float64 `json:"dynamodb_write_units_per_task"`
	ReadUnits      float64 `json:"dynamodb_read_units_per_task"`
	RefusedWrites  float64 `json:"refused_conditional_writes_per_task"`
	SQSRequests    float64 `json:"sqs_requests_per_task"`
	PollerReceives float64 `json:"poller_receives_per_task"`
	LambdaUSD      float64 `json:"lambda_usd_per_million"`
	DynamoDBUSD    float64 `json:"dynamodb_usd_per_million"`
	SQSUSD         float64 `json:"sqs_usd_per_million"`
	TotalUSD       float64 `json:"total_usd_per_million"`
	MemoryMB       int     `json:"consumer_mb"`
}

// priceLone prices n lone tasks from their requests and their sources'
// counts.
func priceLone(n int, reqs counts, invocations int64, billed time.Duration, pollerReceives int64, pr Prices) LoneTask {
	per := func(v float64) float64 { return v / float64(n) }
	ddb, q := reqs.total(svcDynamoDB), reqs.total(svcSQS)
	l := LoneTask{
		Invocations:    round(per(float64(invocations)), 3),
		WriteUnits:     round(per(ddb.WriteTable+ddb.WriteIndex), 3),
		ReadUnits:      round(per(ddb.Read), 3),
		RefusedWrites:  round(per(float64(ddb.Refused)), 3),
		SQSRequests:    round(per(float64(q.Attempts-pollerReceives)), 3),
		PollerReceives: round(per(float64(pollerReceives)), 3),
		MemoryMB:       pr.ConsumerLambdaMB,
	}
	if invocations > 0 {
		l.BilledMS = round(ms(billed)/float64(invocations), 1)
	}
	gbs := billed.Seconds() * float64(pr.ConsumerLambdaMB) / 1024
	l.LambdaUSD = sig(per(float64(invocations)*pr.LambdaPerMillionRequests+gbs*pr.LambdaPerGBSecondARM*1e6), 3)
	l.DynamoDBUSD = sig(l.WriteUnits*pr.DDBPerMillionWriteUnits+l.ReadUnits*pr.DDBPerMillionReadUnits, 3)
	l.SQSUSD = sig(l.SQSRequests*pr.SQSPerMillionRequests, 3)
	l.TotalUSD = sig(l.LambdaUSD+l.DynamoDBUSD+l.SQSUSD, 3)
	return l
}

const idleStartTargetMS = 250

// idleAWSModel is how a task sent to an idle AWS deployment starts, step
// by step; the local figure measures the steps this machine has.
var idleAWSModel = []string{
	"poller: Lambda's SQS pollers hold 20 s long polls on each queue; a message sent during one is returned at once (SQS long-poll wake-up, typically 10-50 ms), none waits for the next poll",
	"batching window 0 s: the poller invokes at once with what the receive brought",
	"cold start: a new environment for the 512 MB arm64 provided.al2023 Go bootstrap, about 100-200 ms init (app assembly, one GetQueueUrl-free config read) when no warm one is left (warm ones are reused for minutes after an invocation)",
	"claim: one GetItem and one conditional UpdateItem, ~10 ms in region; then the handler starts",
	"model total: ~50 ms warm, ~250-350 ms cold; within the 1 s the issue asks of AWS",
}

// measureIdleStart runs group 14.
func measureIdleStart(ctx context.Context, cl clients, cnt *counter, o options, progress func(string, ...any)) (IdleStart, error) {
	tries := 20
	if o.Quick {
		tries = 5
	}
	const idleFor, gap = 60 * time.Second, 2 * time.Second
	res := IdleStart{Tries: tries, IdleSeconds: idleFor.Seconds(), TargetMS: idleStartTargetMS, Model: idleAWSModel}

	type try struct {
		d       *deployment
		src     *eventsource.Source
		started chan time.Time
	}
	// One more deployment, not measured, runs a task before the idle
	// window: the emulators' first writes and reads of the run are slow
	// (the JVM compiling DynamoDB Local's paths), which a full run's
	// warm-up group absorbs and AWS does not have.
	ts := make([]*try, tries+1)
	for i := range ts {
		d, err := deploy(ctx, cl, fmt.Sprintf("bench-idle-%d", i))
		if err != nil {
			return res, err
		}
		defer func() { _ = d.teardown(context.WithoutCancel(ctx), cl) }()
		reg, err := consumerapp.Handlers(d.app)
		if err != nil {
			return res, err
		}
		t := &try{d: d, started: make(chan time.Time, 1)}
		reg.Replace("noop", handler.Func(func(context.Context, handler.Request) (json.RawMessage, error) {
			select {
			case t.started <- time.Now():
			default:
			}
			return json.RawMessage(`{}`), nil
		}))
		var urls []string
		for _, p := range triagetype.Priorities() {
			urls = append(urls, d.app.Queues.URL(p))
		}
		t.src = &eventsource.Source{
			SQS: cl.sqs, Queues: urls, Wait: 20 * time.Second, // Lambda's pollers' long poll
			NewFunction: func() (lambda.Handler, error) {
				c := consumerapp.New(d.app, reg, dispatch.Options{}, dispatch.Deps{})
				return lambda.NewHandler(consumerapp.FunctionHandler(c, d.app.Queues, consumerapp.LambdaReserve)), nil
			},
		}
		ts[i] = t
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	for _, t := range ts {
		wg.Add(1)
		go func() { defer wg.Done(); _ = t.src.Run(runCtx) }()
	}
	warm := ts[tries]
	ts = ts[:tries]
	if _, _, err := warm.d.app.Enqueuer.Submit(ctx, (&task.Request{Type: "noop", Priority: triagetype.High}).NewTask(time.Now().UTC(), time.Minute)); err != nil {
		return res, fmt.Errorf("warm-up submit: %w", err)
	}
	select {
	case <-warm.started:
	case <-time.After(time.Minute):
		return res, errors.New("warm-up task did not start within a minute")
	}
	for warm.src.Stats().Deleted < 1 { // its invocation has returned: the idle window holds none
		if err := ctx.Err(); err != nil {
			return res, err
		}
		sleepCtx(ctx, 50*time.Millisecond)
	}
	progress("   %d deployments idle for %v, then one high task each, %v apart", tries, idleFor, gap)
	before := cnt.snapshot()
	select {
	case <-time.After(idleFor):
	case <-ctx.Done():
		return res, ctx.Err()
	}
	idle := cnt.snapshot().since(before).total(svcDynamoDB)
	res.IdleDynamoDB, res.IdleDynamoDBWriteUnits = idle.Calls, round(idle.WriteTable+idle.WriteIndex, 3)
	for _, t := range ts {
		st := t.src.Stats()
		res.IdleInvocations += st.Invocations
		res.IdleReceives += st.Receives
		ws, err := t.d.app.Workers.List(ctx)
		if err != nil {
			return res, err
		}
		res.IdleWorkers += len(ws)
	}
	srcBefore := make([]eventsource.Stats, len(ts))
	for i, t := range ts {
		srcBefore[i] = t.src.Stats()
	}
	before = cnt.snapshot()
	var starts, after []time.Duration
	for i, t := range ts {
		if i > 0 {
			sleepCtx(ctx, gap)
		}
		r := task.Request{Type: "noop", Priority: triagetype.High}
		sent := time.Now()
		if _, _, err := t.d.app.Enqueuer.Submit(ctx, r.NewTask(sent.UTC(), time.Minute)); err != nil {
			return res, fmt.Errorf("submit: %w", err)
		}
		returned := time.Now()
		select {
		case at := <-t.started:
			starts = append(starts, at.Sub(sent))
			after = append(after, max(at.Sub(returned), 0))
			res.Each = append(res.Each, round(ms(at.Sub(sent)), 1))
		case <-time.After(30 * time.Second):
			return res, fmt.Errorf("try %d: the task did not start within 30 s", i)
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
	res.Start, res.AfterSubmit = distOf(starts), distOf(after)
	// Each try's invocation returns after its idle tail; then its task's
	// requests are all counted.
	for _, t := range ts {
		for t.src.Stats().Deleted < 1 {
			if err := ctx.Err(); err != nil {
				return res, err
			}
			sleepCtx(ctx, 50*time.Millisecond)
		}
	}
	var invocations, polls int64
	var billed time.Duration
	for i, t := range ts {
		st := t.src.Stats()
		invocations += st.Invocations - srcBefore[i].Invocations
		polls += st.Receives - srcBefore[i].Receives
		billed += st.Billed - srcBefore[i].Billed
	}
	lone := priceLone(len(ts), cnt.snapshot().since(before), invocations, billed, polls, publicPrices())
	res.Lone = &lone
	return res, nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func printIdleStart(w io.Writer, x IdleStart) {
	fmt.Fprintf(w, "\n14. first task start after %.0f s idle, through the local event source (%d tries)\n", x.IdleSeconds, x.Tries)
	fmt.Fprintf(w, "  submit -> handler start: p50 %.1f ms, p99 %.1f ms, max %.1f ms   (target <= %.0f ms)\n", x.Start.P50, x.Start.P99, x.Start.Max, x.TargetMS)
	fmt.Fprintf(w, "  from the submit's return: p50 %.1f ms, p99 %.1f ms; each try from the call: %v\n", x.AfterSubmit.P50, x.AfterSubmit.P99, x.Each)
	fmt.Fprintf(w, "  while idle: %d invocations (want 0), %d worker items (want 0), %d DynamoDB requests and %.0f write units (want 0), %d poller receives\n",
		x.IdleInvocations, x.IdleWorkers, x.IdleDynamoDB, x.IdleDynamoDBWriteUnits, x.IdleReceives)
	if l := x.Lone; l != nil {
		fmt.Fprintf(w, "  a task alone (each try's): %.2f invocations of %.0f ms billed at %d MB, %.2f DynamoDB write units (%.2f refused conditional writes) and %.2f read units, %.2f SQS requests (+%.1f mapping poller receives, in the idle month)\n",
			l.Invocations, l.BilledMS, l.MemoryMB, l.WriteUnits, l.RefusedWrites, l.ReadUnits, l.SQSRequests, l.PollerReceives)
		fmt.Fprintf(w, "  a task alone per million: $%.3f = Lambda $%.3f + DynamoDB $%.3f + SQS $%.3f (API Gateway and the API function apart)\n",
			l.TotalUSD, l.LambdaUSD, l.DynamoDBUSD, l.SQSUSD)
	}
	fmt.Fprintln(w, "  AWS model:")
	for _, m := range x.Model {
		fmt.Fprintf(w, "    - %s\n", m)
	}
}

// Group 15: the idle month, priced from the synthesized template.

// IdleMonth is group 15's result: every line of an idle month's bill.
type IdleMonth struct {
	Template    string     `json:"template"`
	Lines       []CostLine `json:"lines"`
	Total       float64    `json:"total_usd"`             // without alarms and dashboards
	Observation float64    `json:"alarms_dashboards_usd"` // listed apart
	TargetUSD   float64    `json:"target_usd"`
	Assumptions []string   `json:"assumptions"`
}

// CostLine is one line of the idle month.
type CostLine struct {
	What     string  `json:"what"`
	Quantity string  `json:"quantity"`
	USD      float64 `json:"usd"`
	Apart    bool    `json:"apart,omitempty"` // alarms and dashboards
}

const idleMonthTargetUSD = 1.0

// Idle-month assumptions beyond the template.
const (
	monthSeconds = 30 * 24 * 3600
	// pollersPerMapping is how many long polls Lambda keeps on an idle
	// queue per SQS event source mapping (its documented starting number
	// of pollers), each waiting 20 s: 3 receives a minute each.
	pollersPerMapping = 5
	pollerWait        = 20.0
	// promoterIdleSeconds is one idle promoter run's billed duration: a
	// handful of queries and receives, each ~10 ms in region.
	promoterIdleSeconds = 0.3
	// promoterFullReadUnits and promoterIdleSQS are one idle promoter
	// run's requests when it sweeps everything, as internal/eventsource's
	// TestIdleStackWritesNothing counts them on an idle stack with the
	// default 16 shards: 176 Queries (the due index's classes and the aging
	// sweeps' windows, per shard) at 0.5 read units and 39 consistent
	// GetItems (marks, controls, schedules, cleanup) at 1, and a receive on
	// each of the three DLQs. It writes nothing. A run sweeps everything
	// once every promote.FullSweepEvery (10 runs); the runs between read
	// the task counters first and skip the task sweeps when nothing is
	// counted: 16 Queries (the schedule ticker's due index, per shard) and
	// 2 GetItems (the counters, eventually consistent, and the cleanup
	// job), as the same test counts them.
	promoterFullReadUnits = 176*0.5 + 39
	promoterSkipReadUnits = 16*0.5 + 0.5 + 1
	promoterRunsPerFull   = 10
	promoterIdleReadUnits = (promoterFullReadUnits + (promoterRunsPerFull-1)*promoterSkipReadUnits) / promoterRunsPerFull
	promoterIdleSQS       = 3
	// scheduledConsumerReserve is how long before its deadline a scheduled
	// consumer stops polling (consumerapp.LambdaReserve); it drains then.
	scheduledPollWait = 1.0 // TRIAGE_POLL_WAIT: one receive per queue a second
	heartbeatEvery    = 10.0
)

var rateExpr = regexp.MustCompile(`^rate\((\d+) (minute|minutes|hour|hours)\)$`)

// priceIdleMonth prices the template at path line by line.
func priceIdleMonth(path string, pr Prices) (IdleMonth, error) {
	res := IdleMonth{Template: path, TargetUSD: idleMonthTargetUSD}
	b, err := os.ReadFile(path)
	if err != nil {
		return res, fmt.Errorf("read the template (run make synth first): %w", err)
	}
	var tmpl struct {
		Resources map[string]struct {
			Type       string         `json:"Type"`
			Properties map[string]any `json:"Properties"`
		} `json:"Resources"`
	}
	if err := json.Unmarshal(b, &tmpl); err != nil {
		return res, fmt.Errorf("template: %w", err)
	}
	ids := make([]string, 0, len(tmpl.Resources))
	for id := range tmpl.Resources {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	fnMB := map[string]float64{}
	fnTimeout := map[string]float64{}
	queues := map[string]bool{}
	for _, id := range ids {
		r := tmpl.Resources[id]
		switch r.Type {
		case "AWS::Lambda::Function":
			fnMB[id], _ = r.Properties["MemorySize"].(float64)
			fnTimeout[id], _ = r.Properties["Timeout"].(float64)
		case "AWS::SQS::Queue":
			queues[id] = true
		}
	}
	add := func(l CostLine) {
		l.USD = sig(l.USD, 3)
		res.Lines = append(res.Lines, l)
		if l.Apart {
			res.Observation += l.USD
		} else {
			res.Total += l.USD
		}
	}
	gbs := func(sec, mb float64) float64 { return sec * mb / 1024 * pr.LambdaPerGBSecondARM }
	for _, id := range ids {
		r := tmpl.Resources[id]
		switch r.Type {
		case "AWS::Events::Rule":
			expr, _ := r.Properties["ScheduleExpression"].(string)
			m := rateExpr.FindStringSubmatch(expr)
			if m == nil {
				continue
			}
			n, _ := strconv.Atoi(m[1])
			per := float64(n) * 60
			if strings.HasPrefix(m[2], "hour") {
				per *= 60
			}
			runs := monthSeconds / per
			targets, _ := r.Properties["Targets"].([]any)
			for _, tg := range targets {
				fn := refOf(tg.(map[string]any)["Arn"])
				mb := fnMB[fn]
				if strings.Contains(fn, "Consumer") {
					// A scheduled consumer polls until its reserve, whatever is queued.
					sec := fnTimeout[fn] - consumerapp.LambdaReserve.Seconds()
					add(CostLine{What: fmt.Sprintf("%s: scheduled consumer, %s", fn, expr), Quantity: fmt.Sprintf("%.0f invocations of %.0f s at %.0f MB", runs, sec, mb),
						USD: runs*pr.LambdaPerMillionRequests/1e6 + runs*gbs(sec, mb)})
					receives := runs * sec / scheduledPollWait * 3
					add(CostLine{What: fmt.Sprintf("%s: its empty receives", fn), Quantity: fmt.Sprintf("%.0f (3 queues, one per %.0f s)", receives, scheduledPollWait),
						USD: receives * pr.SQSPerMillionRequests / 1e6})
					beats := runs * sec / heartbeatEvery
					add(CostLine{What: fmt.Sprintf("%s: worker heartbeats and their stream records", fn), Quantity: fmt.Sprintf("%.0f writes (every %.0f s while it runs)", beats, heartbeatEvery),
						USD: beats * pr.DDBPerMillionWriteUnits / 1e6})
					continue
				}
				add(CostLine{What: fmt.Sprintf("%s: %s", fn, expr), Quantity: fmt.Sprintf("%.0f invocations of %.1f s at %.0f MB", runs, promoterIdleSeconds, mb),
					USD: runs*pr.LambdaPerMillionRequests/1e6 + runs*gbs(promoterIdleSeconds, mb)})
				add(CostLine{What: fmt.Sprintf("%s: its idle requests", fn), Quantity: fmt.Sprintf("%.0f DynamoDB read units, %.0f DLQ receives", runs*promoterIdleReadUnits, runs*promoterIdleSQS),
					USD: runs*promoterIdleReadUnits*pr.DDBPerMillionReadUnits/1e6 + runs*promoterIdleSQS*pr.SQSPerMillionRequests/1e6})
			}
		case "AWS::Lambda::EventSourceMapping":
			src := refOf(r.Properties["EventSourceArn"])
			if !queues[src] {
				add(CostLine{What: fmt.Sprintf("%s: stream trigger of %s", id, refOf(r.Properties["FunctionName"])), Quantity: "no records while idle (heartbeats: none, nothing runs); Lambda's stream reads are not billed", USD: 0})
				continue
			}
			receives := pollersPerMapping * monthSeconds / pollerWait
			add(CostLine{What: fmt.Sprintf("%s: SQS event source pollers on %s", id, src), Quantity: fmt.Sprintf("%.0f empty receives (%d long polls of %.0f s)", receives, pollersPerMapping, pollerWait),
				USD: receives * pr.SQSPerMillionRequests / 1e6})
		case "AWS::CloudWatch::Alarm":
			n := 1.0
			if ms, ok := r.Properties["Metrics"].([]any); ok {
				n = 0
				for _, m := range ms {
					if _, ok := m.(map[string]any)["MetricStat"]; ok {
						n++
					}
				}
			}
			add(CostLine{What: id, Quantity: fmt.Sprintf("alarm on %.0f metric(s)", n), USD: n * pr.AlarmPerMetricMonth, Apart: true})
		case "AWS::CloudWatch::Dashboard":
			add(CostLine{What: id, Quantity: "dashboard", USD: pr.DashboardMonth, Apart: true})
		case "AWS::SecretsManager::Secret":
			add(CostLine{What: id, Quantity: "secret", USD: pr.SecretMonth})
		}
	}
	res.Total, res.Observation = sig(res.Total, 3), sig(res.Observation, 3)
	res.Assumptions = []string{
		"us-east-1 list prices, arm64, no free tier; a 30-day month",
		fmt.Sprintf("SQS event source mappings: Lambda keeps %d long polls of %.0f s on each idle queue, billed as SQS receives (Lambda's pollers are not otherwise charged)", pollersPerMapping, pollerWait),
		fmt.Sprintf("an idle promoter run bills %.1f s, reads %.1f units on average (one run in %d sweeps everything: 176 queries and 39 reads, %.0f units; the others read the task counters and skip the task sweeps: 16 queries and 2 reads, %.1f units; counted by TestIdleStackWritesNothing), writes nothing and receives from the 3 DLQs",
			promoterIdleSeconds, float64(promoterIdleReadUnits), promoterRunsPerFull, float64(promoterFullReadUnits), float64(promoterSkipReadUnits)),
		"a scheduled consumer (opt-in) polls until 40 s before its timeout, one receive per queue a second, and heartbeats every 10 s",
		"free while idle: EventBridge schedules, empty table/bucket/queues/log groups, the HTTP API, SQS-managed encryption, the stream trigger",
	}
	return res, nil
}

// refOf names the resource a Ref or Fn::GetAtt points at.
func refOf(v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		return fmt.Sprint(v)
	}
	if r, ok := m["Ref"].(string); ok {
		return r
	}
	if ga, ok := m["Fn::GetAtt"].([]any); ok && len(ga) > 0 {
		return fmt.Sprint(ga[0])
	}
	return fmt.Sprint(v)
}

// templatePath is the template `make synth` writes.
func templatePath(root string) string {
	return filepath.Join(root, "cdk.out", "TriageStack.template.json")
}

func printIdleMonth(w io.Writer, x IdleMonth) {
	fmt.Fprintf(w, "\n15. an idle month, priced from %s\n", x.Template)
	for _, l := range x.Lines {
		if !l.Apart {
			fmt.Fprintf(w, "  $%9.4f  %s: %s\n", l.USD, l.What, l.Quantity)
		}
	}
	fmt.Fprintf(w, "  $%9.4f  total without alarms and dashboards   (target <= $%.2f)\n", x.Total, x.TargetUSD)
	for _, l := range x.Lines {
		if l.Apart {
			fmt.Fprintf(w, "  $%9.4f  %s: %s\n", l.USD, l.What, l.Quantity)
		}
	}
	fmt.Fprintf(w, "  $%9.4f  alarms and dashboards, apart\n", x.Observation)
	for _, a := range x.Assumptions {
		fmt.Fprintf(w, "    - %s\n", a)
	}
}

// idleMonth prices the synthesized template into r (group 15).
func idleMonth(root string, r *Results, probs *problems) error {
	m, err := priceIdleMonth(templatePath(root), publicPrices())
	if err != nil {
		return err
	}
	r.IdleMonth = &m
	if m.Total > m.TargetUSD {
		probs.note("idle month: $%.2f without alarms and dashboards, over the $%.2f target", m.Total, m.TargetUSD)
	}
	return nil
}
