package main

import (
	"fmt"
	"math"
	"strings"

	"github.com/triagehq/triage/internal/spec"
)

// Requests is scenario 5: AWS requests and capacity per task, per phase.
type Requests struct {
	CapacityMethod string   `json:"capacity_method"`
	Phases         []Phase  `json:"phases"`
	Targets        []Target `json:"targets"`
}

// Phase is the calls one task needs in one part of its life.
type Phase struct {
	Name  string      `json:"name"`
	Tasks int         `json:"tasks"`
	Ops   []OpPerTask `json:"operations"`
	// Totals per task.
	DDBCalls        float64 `json:"ddb_calls"`
	DDBWriteTable   float64 `json:"ddb_write_units_table"`
	DDBWriteWithGSI float64 `json:"ddb_write_units_with_gsi"`
	DDBRead         float64 `json:"ddb_read_units"`
	SQSRequests     float64 `json:"sqs_requests"`
	// S3 requests by price class (payloads and results kept off the item).
	S3Put float64 `json:"s3_put_class_requests"`
	S3Get float64 `json:"s3_get_class_requests"`
	// DynamoDB Streams requests (the counters' stream reads; free when a
	// Lambda trigger makes them).
	StreamsRequests float64 `json:"streams_requests"`
	// What DynamoDB reported (ReturnConsumedCapacity), per task, and the
	// computed units of the same calls; Reported is the share of DynamoDB
	// calls that came back with a report (refused writes do not).
	Reported Reported `json:"reported_capacity"`

	counts counts
}

// Reported is DynamoDB's own capacity figures for a phase, per task.
type Reported struct {
	CallsShare      float64 `json:"share_of_calls_reported"`
	WriteUnits      float64 `json:"write_units"`
	WriteUnitsIndex float64 `json:"write_units_indexes"`
	ReadUnits       float64 `json:"read_units"`
	ComputedWrite   float64 `json:"computed_write_units_same_calls"`
	ComputedRead    float64 `json:"computed_read_units_same_calls"`
}

// OpPerTask is one operation's calls per task.
type OpPerTask struct {
	Op         string  `json:"op"`
	PerTask    float64 `json:"calls_per_task"`
	Attempts   float64 `json:"attempts_per_task"`
	Errors     int64   `json:"errors"`
	Canceled   int64   `json:"errors_canceled"`
	Refused    int64   `json:"errors_condition_refused"`
	AvgEntries float64 `json:"avg_entries,omitempty"`    // messages per batch call / per receive
	Empty      float64 `json:"empty_per_task,omitempty"` // receives that brought no message, per task
	AvgMillis  float64 `json:"avg_ms"`                   // mean latency of a call, retries included
}

// Target is one of the issues' targets, measured. Reported is DynamoDB's
// own figure (ReturnConsumedCapacity) where the target is in capacity units.
type Target struct {
	Metric   string   `json:"metric"`
	Measured float64  `json:"measured"`
	Reported *float64 `json:"reported_by_dynamodb,omitempty"`
	Cmp      string   `json:"comparison"`
	Target   float64  `json:"target"`
	Met      bool     `json:"met"`
	// Unit and Basis, for a target set against a floor measured in the same
	// run: what the figure is in, and where the target comes from.
	Unit  string `json:"unit,omitempty"`
	Basis string `json:"basis,omitempty"`
}

const capacityMethod = "units are computed from the items each call sends " +
	"or gets back: writes ceil(size/1KB) (UpdateItem sized from its ALL_NEW item), 1 for a write refused by its condition, " +
	"2x in transactions; each GSI (keys-only or include, entries sized as keys + projected attributes + 100 bytes) adds " +
	"ceil(entry/1KB) when an item enters or leaves it or a projected attribute changes and twice that when its key changes, " +
	"nothing otherwise; every write and read is also charged to its partition key (3b); consistent GetItem ceil(size/4KB), " +
	"eventually consistent reads and GSI Queries half, Query on the total size returned, BatchGetItem per key. " +
	"The bench also asks DynamoDB for ReturnConsumedCapacity=INDEXES on every call that leaves it unset (the store does not) " +
	"and shows DynamoDB's figure next to the computed one (group 10; refused writes come back with no report). SQS and S3 requests " +
	"are HTTP attempts (retries included); every SQS message here is far below the 64 KB billing chunk"

func newPhase(name string, c counts, tasks int) Phase {
	p := Phase{Name: name, Tasks: tasks, counts: c}
	for _, k := range c.keys() {
		v := c[k]
		op := OpPerTask{
			Op:       k.String(),
			PerTask:  round(per(float64(v.Calls), tasks), 4),
			Attempts: round(per(float64(v.Attempts), tasks), 4),
			Errors:   v.Errors,
			Canceled: v.Canceled,
			Refused:  v.Refused,
		}
		if v.Entries > 0 && v.Calls > 0 {
			op.AvgEntries = round(float64(v.Entries)/float64(v.Calls), 2)
		}
		op.Empty = round(per(float64(v.Empty), tasks), 4)
		if v.Calls > 0 {
			op.AvgMillis = round(float64(v.Nanos)/float64(v.Calls)/1e6, 2)
		}
		p.Ops = append(p.Ops, op)
	}
	d, s := c.total(svcDynamoDB), c.total(svcSQS)
	p.DDBCalls = round(per(float64(d.Attempts), tasks), 4)
	p.DDBWriteTable = round(per(d.WriteTable, tasks), 4)
	p.DDBWriteWithGSI = round(per(d.WriteTable+d.WriteIndex, tasks), 4)
	p.DDBRead = round(per(d.Read, tasks), 4)
	p.SQSRequests = round(per(float64(s.Attempts), tasks), 4)
	put, get := c.s3Requests()
	p.S3Put, p.S3Get = round(per(put, tasks), 4), round(per(get, tasks), 4)
	p.StreamsRequests = round(per(float64(c.total(svcStreams).Attempts), tasks), 4)
	p.Reported = Reported{
		CallsShare:      round(per(float64(d.Reported), int(d.Calls)), 4),
		WriteUnits:      round(per(d.RepWrite, tasks), 4),
		WriteUnitsIndex: round(per(d.RepWriteIndex, tasks), 4),
		ReadUnits:       round(per(d.RepRead, tasks), 4),
		ComputedWrite:   round(per(d.CmpWrite, tasks), 4),
		ComputedRead:    round(per(d.CmpRead, tasks), 4),
	}
	return p
}

// s3Requests counts c's S3 requests (HTTP attempts, as billed) by price class.
func (c counts) s3Requests() (put, get float64) {
	for k, v := range c {
		if k.Service != svcS3 {
			continue
		}
		switch s3Class(k.Operation) {
		case s3PutClass:
			put += float64(v.Attempts)
		case s3GetClass:
			get += float64(v.Attempts)
		}
	}
	return put, get
}

// S3 request price classes (S3 Standard): PUT, COPY, POST and LIST
// requests are the dear class; DELETE and CANCEL are free; GET, SELECT,
// HEAD and every other request are the cheap class.
const (
	s3PutClass  = "put"
	s3GetClass  = "get"
	s3FreeClass = "free"
)

// s3Class is the price class of an S3 operation, by its name.
func s3Class(op string) string {
	for _, p := range []string{"Put", "Copy", "Create", "Upload", "Complete", "List", "Post", "Restore"} {
		if strings.HasPrefix(op, p) {
			return s3PutClass
		}
	}
	if strings.HasPrefix(op, "Delete") || strings.HasPrefix(op, "Abort") {
		return s3FreeClass
	}
	return s3GetClass
}

// combine adds per-task phases measured on different task counts.
func combine(name string, ps ...Phase) Phase {
	out := Phase{Name: name}
	var calls, reported float64
	byOp := map[string]*OpPerTask{}
	var order []string
	for _, p := range ps {
		out.Tasks = max(out.Tasks, p.Tasks)
		out.DDBCalls += p.DDBCalls
		out.DDBWriteTable += p.DDBWriteTable
		out.DDBWriteWithGSI += p.DDBWriteWithGSI
		out.DDBRead += p.DDBRead
		out.SQSRequests += p.SQSRequests
		out.S3Put += p.S3Put
		out.S3Get += p.S3Get
		out.StreamsRequests += p.StreamsRequests
		out.Reported.WriteUnits += p.Reported.WriteUnits
		out.Reported.WriteUnitsIndex += p.Reported.WriteUnitsIndex
		out.Reported.ReadUnits += p.Reported.ReadUnits
		out.Reported.ComputedWrite += p.Reported.ComputedWrite
		out.Reported.ComputedRead += p.Reported.ComputedRead
		// The share of calls reported, weighted by the phases' calls per task.
		calls += p.DDBCalls
		reported += p.Reported.CallsShare * p.DDBCalls
		for _, o := range p.Ops {
			if byOp[o.Op] == nil {
				byOp[o.Op] = &OpPerTask{Op: o.Op}
				order = append(order, o.Op)
			}
			b := byOp[o.Op]
			// Weighted averages of entries and latency per call across the phases.
			calls := b.PerTask + o.PerTask
			if calls > 0 {
				b.AvgEntries = round((b.AvgEntries*b.PerTask+o.AvgEntries*o.PerTask)/calls, 2)
				b.AvgMillis = round((b.AvgMillis*b.PerTask+o.AvgMillis*o.PerTask)/calls, 2)
			}
			b.PerTask = round(calls, 4)
			b.Empty = round(b.Empty+o.Empty, 4)
			b.Attempts = round(b.Attempts+o.Attempts, 4)
			b.Errors += o.Errors
			b.Canceled += o.Canceled
			b.Refused += o.Refused
		}
	}
	for _, k := range sortedStrings(order) {
		out.Ops = append(out.Ops, *byOp[k])
	}
	out.DDBCalls, out.DDBWriteTable, out.DDBWriteWithGSI = round(out.DDBCalls, 4), round(out.DDBWriteTable, 4), round(out.DDBWriteWithGSI, 4)
	out.DDBRead, out.SQSRequests = round(out.DDBRead, 4), round(out.SQSRequests, 4)
	out.S3Put, out.S3Get, out.StreamsRequests = round(out.S3Put, 4), round(out.S3Get, 4), round(out.StreamsRequests, 4)
	r := &out.Reported
	r.CallsShare = 0
	if calls > 0 {
		r.CallsShare = round(reported/calls, 4)
	}
	r.WriteUnits, r.WriteUnitsIndex, r.ReadUnits = round(r.WriteUnits, 4), round(r.WriteUnitsIndex, 4), round(r.ReadUnits, 4)
	r.ComputedWrite, r.ComputedRead = round(r.ComputedWrite, 4), round(r.ComputedRead, 4)
	return out
}

// The targets. Write units and SQS requests per task are for the
// steady state with batching (submit + consume); the hottest key and the
// projected ceiling are over scenario 3's whole run; the payload targets
// are group 7's, the cost target group 8's direct send, the /stats ones
// group 9's.
const (
	targetTableWriteUnits  = 3.5
	targetBilledWriteUnits = 5.0
	targetSQSRequests      = 0.5
	targetHotKeyUnits      = 0.1 // write units per task on the busiest partition key
	targetCeiling          = 10000.0
)

// targetInputs are the measurements the targets are checked against.
type targetInputs struct {
	Steady   Phase
	Counters Phase
	Hot      []HotKey
	Ceiling  KeyCeiling
	Payloads []PayloadRun
	Direct   []DirectRun
	Cost     Cost
	Stats    StatsScaling
	Verdicts []verdict
}

// atMost and atLeast build a target row. A row with a DynamoDB-reported
// figure is met only when both the computed and the reported figure are.
func atMost(metric string, measured, target float64, reported *float64) Target {
	t := Target{Metric: metric, Measured: measured, Target: target, Cmp: "<=", Reported: reported}
	t.Met = measured <= target && (reported == nil || *reported <= target)
	return t
}

func atLeast(metric string, measured, target float64) Target {
	return Target{Metric: metric, Measured: measured, Target: target, Cmp: ">=", Met: measured >= target}
}

// reportedOf is a phase's reported write units, or nil when DynamoDB
// reported nothing for it.
func reportedOf(p Phase) *float64 {
	if p.Reported.CallsShare == 0 {
		return nil
	}
	v := p.Reported.WriteUnits
	return &v
}

func targets(in targetInputs) []Target {
	steady := in.Steady
	ts := []Target{
		atMost("DynamoDB write units/task (table only)", steady.DDBWriteTable, targetTableWriteUnits, nil),
		atMost("DynamoDB write units/task (with GSI writes, as billed)", steady.DDBWriteWithGSI, targetBilledWriteUnits, reportedOf(steady)),
		atMost("SQS requests/task", steady.SQSRequests, targetSQSRequests, nil),
	}
	if len(in.Hot) > 0 {
		ts = append(ts, atMost("hottest partition key, write units/task ("+in.Hot[0].Key+")", in.Hot[0].WriteUnitsPerTask, targetHotKeyUnits, nil))
	}
	if in.Ceiling.TasksPerSec > 0 {
		ts = append(ts, atLeast(fmt.Sprintf("projected AWS ceiling, tasks/s of one type at one priority (1,000 WCU/s ÷ %s, 3,000 RCU/s ÷ %s)",
			in.Ceiling.HottestWriteKey, orNone(in.Ceiling.HottestReadKey)), in.Ceiling.TasksPerSec, targetCeiling))
	}
	for _, p := range in.Payloads {
		if p.Target > 0 {
			ts = append(ts, atMost(fmt.Sprintf("billed write units/task, %s payload, indexes included (group 7)", bytesText(p.PayloadBytes)),
				p.Total.DDBWriteWithGSI, p.Target, reportedOf(p.Total)))
		}
	}
	for _, x := range in.Direct {
		if x.Path != directSQS {
			continue
		}
		if len(x.HotKeys) > 0 {
			ts = append(ts, atMost("hottest partition key, write units/task, direct send ("+x.HotKeys[0].Key+", group 8)", x.HotKeys[0].WriteUnitsPerTask, targetHotKeyUnits, nil))
		}
		ts = append(ts,
			atMost("DynamoDB write units/task, direct send (indexes included, as billed; group 8)", x.Total.DDBWriteWithGSI, targetDirectWriteUnits, reportedOf(x.Total)),
			atMost("SQS requests/task, direct send under load (group 8; its split is printed there)", x.Total.SQSRequests, targetDirectSQSRequests, nil))
	}
	for _, c := range in.Cost.Paths {
		if c.Name == directSQS {
			ts = append(ts,
				atMost("all-in USD per million no-op tasks, on-demand DynamoDB, "+c.Name, c.Total, targetDirectCostOnDemand, nil),
				atMost(fmt.Sprintf("all-in USD per million no-op tasks, provisioned DynamoDB at %.0f%% utilisation, %s", provisionedTargetUtil*100, c.Name), c.TotalProvisioned, targetDirectCostProvisioned, nil))
		}
	}
	if n := len(in.Stats.Runs); n > 1 {
		a, b := in.Stats.Runs[0], in.Stats.Runs[n-1]
		ts = append(ts,
			atMost(fmt.Sprintf("/stats p50 latency, %d retained ÷ %d retained (group 9)", b.Retained, a.Retained), in.Stats.LatencyRatio, targetStatsRatio, nil),
			atMost(fmt.Sprintf("/stats read units/request, %d retained ÷ %d retained (group 9)", b.Retained, a.Retained), in.Stats.ReadRatio, targetStatsRatio, ptrIf(in.Stats.ReportedRatio, a.ReportedRead > 0)))
	} else if len(in.Stats.Sizes) > 1 {
		// Fewer than two sizes were reached: the target was not measured,
		// which is not a pass.
		for _, m := range []string{"p50 latency", "read units/request"} {
			t := atMost(fmt.Sprintf("/stats %s, largest ÷ smallest retained: NOT MEASURED (%d of %d sizes filled in time, group 9)", m, n, len(in.Stats.Sizes)), 0, targetStatsRatio, nil)
			t.Met = false
			ts = append(ts, t)
		}
	}
	bad := 0
	for _, v := range in.Verdicts {
		bad += v.Lost + v.Duplicates + v.Concurrent + v.Unknown
	}
	ts = append(ts, atMost("tasks lost, run twice or unknown, every run with a ledger", float64(bad), 0, nil))
	return ts
}

func orNone(s string) string {
	if s == "" {
		return "(no reads)"
	}
	return s
}

func ptrIf(v float64, ok bool) *float64 {
	if !ok {
		return nil
	}
	return &v
}

// Public on-demand prices (USD, us-east-1) used for the cost figures. This
// is the one place that owns them; the tables print them as they are.
type Prices struct {
	SQSPerMillionRequests        float64 `json:"sqs_per_million_requests"`
	DDBPerMillionWriteUnits      float64 `json:"dynamodb_per_million_write_units"`
	DDBPerMillionReadUnits       float64 `json:"dynamodb_per_million_read_units"`
	S3PerThousandPut             float64 `json:"s3_per_thousand_put_copy_post_list"`
	S3PerThousandGet             float64 `json:"s3_per_thousand_get_and_other"`
	APIGatewayPerMillionRequests float64 `json:"api_gateway_http_api_per_million_requests"`
	LambdaPerMillionRequests     float64 `json:"lambda_per_million_requests"`
	LambdaPerGBSecondARM         float64 `json:"lambda_per_gb_second_arm64"`
	ConsumerLambdaMB             int     `json:"consumer_lambda_mb"`
	APILambdaMB                  int     `json:"api_lambda_mb"`
	CountersLambdaMB             int     `json:"counters_lambda_mb"`
	ConsumerTasksPerInvocation   float64 `json:"consumer_tasks_per_invocation"`
	ProvisionedWCUHour           float64 `json:"dynamodb_provisioned_wcu_hour"`
	ProvisionedRCUHour           float64 `json:"dynamodb_provisioned_rcu_hour"`
	ProvisionedUtilization       float64 `json:"dynamodb_provisioned_utilization"`
	AlarmPerMetricMonth          float64 `json:"cloudwatch_alarm_per_metric_month"`
	DashboardMonth               float64 `json:"cloudwatch_dashboard_month"`
	SecretMonth                  float64 `json:"secrets_manager_secret_month"`
}

// publicPrices are the prices the cost figures use (us-east-1, on demand;
// S3 Standard; API Gateway HTTP API, first 300 million requests a month).
// The Lambda sizes are the CDK construct's defaults (infra/dispatcher).
func publicPrices() Prices {
	return Prices{
		SQSPerMillionRequests:        0.40,
		DDBPerMillionWriteUnits:      0.625,
		DDBPerMillionReadUnits:       0.125,
		S3PerThousandPut:             0.005,
		S3PerThousandGet:             0.0004,
		APIGatewayPerMillionRequests: 1.00,
		LambdaPerMillionRequests:     0.20,
		LambdaPerGBSecondARM:         0.0000133334,
		ConsumerLambdaMB:             512,
		APILambdaMB:                  256,
		CountersLambdaMB:             256,
		ConsumerTasksPerInvocation:   float64(spec.DefaultMapping().BatchSize),
		ProvisionedWCUHour:           provisionedWCUHour,
		ProvisionedRCUHour:           provisionedRCUHour,
		ProvisionedUtilization:       provisionedTargetUtil,
		AlarmPerMetricMonth:          0.10,
		DashboardMonth:               3.00,
		SecretMonth:                  0.40,
	}
}

// Cost is the cost per million tasks on each submit path.
type Cost struct {
	Prices      Prices        `json:"prices"`
	Assumptions []string      `json:"assumptions"`
	Latencies   []CallLatency `json:"aws_call_latencies_ms"`
	Paths       []CostPath    `json:"paths"`
}

// CostPath is the cost of a million tasks submitted one way and consumed.
type CostPath struct {
	Name              string  `json:"name"`
	SQS               float64 `json:"sqs"`
	DDBWrites         float64 `json:"dynamodb_writes"`
	DDBWritesTable    float64 `json:"dynamodb_writes_table_only"`
	DDBReads          float64 `json:"dynamodb_reads"`
	S3                float64 `json:"s3_requests"`
	APIGateway        float64 `json:"api_gateway"`
	APILambda         float64 `json:"api_lambda"`
	ConsumerLambda    float64 `json:"consumer_lambda"`
	Counters          float64 `json:"counters"` // their DynamoDB units and their λ
	Total             float64 `json:"total"`
	APISecondsPerTask float64 `json:"api_seconds_per_task"`
	ConsumerGBSecTask float64 `json:"consumer_gb_seconds_per_task"`
	// By service, the same total split by what AWS bills: every function's
	// requests and GB-seconds (Lambda), every DynamoDB unit, the counters'
	// included (DynamoDB), SQS, API Gateway and S3 requests.
	ByService ServiceCost `json:"by_service"`
	// With provisioned capacity (Props.Provisioned) at the auto-scaling
	// target utilisation: DynamoDB's share and the total.
	DynamoDBProvisioned float64 `json:"dynamodb_provisioned"`
	TotalProvisioned    float64 `json:"total_provisioned"`
}

// ServiceCost is a path's cost per million tasks by AWS service.
type ServiceCost struct {
	Lambda     float64 `json:"lambda"`
	DynamoDB   float64 `json:"dynamodb"`
	SQS        float64 `json:"sqs"`
	APIGateway float64 `json:"api_gateway"`
	S3         float64 `json:"s3"`
}

// costInput is what one path's cost is computed from, all per task.
type costInput struct {
	Name                string
	Tasks               Phase   // submit + consume
	Counters            Phase   // the stream-kept counters' calls
	APIRequests         float64 // API invocations (and API Gateway requests); 0 on direct paths
	APISeconds          float64 // API λ billed seconds
	ConsumerInvocations float64 // consumer λ invocations
	ConsumerSeconds     float64 // consumer λ billed seconds
	CountersInvocations float64 // counters λ invocations
	CountersSeconds     float64 // counters λ billed seconds
}

// costPath prices a million tasks of one path.
func costPath(in costInput, pr Prices) CostPath {
	const million = 1e6
	p := in.Tasks
	c := CostPath{Name: in.Name}
	gbs := func(sec float64, mb int) float64 { return million * sec * float64(mb) / 1024 * pr.LambdaPerGBSecondARM }
	c.SQS = p.SQSRequests * pr.SQSPerMillionRequests
	c.DDBWrites = p.DDBWriteWithGSI * pr.DDBPerMillionWriteUnits
	c.DDBWritesTable = p.DDBWriteTable * pr.DDBPerMillionWriteUnits
	c.DDBReads = p.DDBRead * pr.DDBPerMillionReadUnits
	c.S3 = (p.S3Put*pr.S3PerThousandPut + p.S3Get*pr.S3PerThousandGet) * million / 1000
	c.APIGateway = in.APIRequests * pr.APIGatewayPerMillionRequests
	c.APILambda = in.APIRequests*pr.LambdaPerMillionRequests + gbs(in.APISeconds, pr.APILambdaMB)
	c.ConsumerLambda = in.ConsumerInvocations*pr.LambdaPerMillionRequests + gbs(in.ConsumerSeconds, pr.ConsumerLambdaMB)
	k := in.Counters
	countersDDB := k.DDBWriteWithGSI*pr.DDBPerMillionWriteUnits + k.DDBRead*pr.DDBPerMillionReadUnits
	countersOther := k.SQSRequests*pr.SQSPerMillionRequests + (k.S3Put*pr.S3PerThousandPut+k.S3Get*pr.S3PerThousandGet)*million/1000
	countersLambda := in.CountersInvocations*pr.LambdaPerMillionRequests + gbs(in.CountersSeconds, pr.CountersLambdaMB)
	c.Counters = countersDDB + countersOther + countersLambda
	c.Total = c.SQS + c.DDBWrites + c.DDBReads + c.S3 + c.APIGateway + c.APILambda + c.ConsumerLambda + c.Counters
	c.ByService = ServiceCost{
		Lambda:     c.APILambda + c.ConsumerLambda + countersLambda,
		DynamoDB:   c.DDBWrites + c.DDBReads + countersDDB,
		SQS:        c.SQS + k.SQSRequests*pr.SQSPerMillionRequests,
		APIGateway: c.APIGateway,
		S3:         c.S3 + (k.S3Put*pr.S3PerThousandPut+k.S3Get*pr.S3PerThousandGet)*million/1000,
	}
	c.DynamoDBProvisioned = (p.DDBWriteWithGSI+k.DDBWriteWithGSI)*provisionedPerMillion(provisionedWCUHour) +
		(p.DDBRead+k.DDBRead)*provisionedPerMillion(provisionedRCUHour)
	c.TotalProvisioned = c.Total - c.ByService.DynamoDB + c.DynamoDBProvisioned
	c.APISecondsPerTask = sig(in.APISeconds, 4)
	c.ConsumerGBSecTask = sig(in.ConsumerSeconds*float64(pr.ConsumerLambdaMB)/1024, 4)
	for _, f := range []*float64{&c.SQS, &c.DDBWrites, &c.DDBWritesTable, &c.DDBReads, &c.S3, &c.APIGateway, &c.APILambda, &c.ConsumerLambda, &c.Counters, &c.Total,
		&c.ByService.Lambda, &c.ByService.DynamoDB, &c.ByService.SQS, &c.ByService.APIGateway, &c.ByService.S3, &c.DynamoDBProvisioned, &c.TotalProvisioned} {
		*f = round(*f, 4)
	}
	return c
}

// countersLambda estimates the counters function per task from its phase:
// one invocation per counters transaction (one per stream batch applied),
// billed for its DynamoDB calls at their AWS latency (awsSeconds).
func countersLambda(p Phase, table []CallLatency) (invocations, seconds float64) {
	if p.Tasks == 0 {
		return 0, 0
	}
	var tx float64
	for k, v := range p.counts {
		if k.Service == svcDynamoDB && k.Operation == "TransactWriteItems" {
			tx += float64(v.Calls)
		}
	}
	return tx / float64(p.Tasks), awsSeconds(p, table)
}

// Bound is the throughput the emulators allow this design, from the
// ceiling rates and the calls per task.
type Bound struct {
	Formula     string      `json:"formula"`
	Terms       []BoundTerm `json:"terms"`
	Consumer    float64     `json:"consumer_tasks_per_second"`
	Pipeline    float64     `json:"pipeline_tasks_per_second"`
	ConsumerMin float64     `json:"consumer_parallel_tasks_per_second"`
}

// BoundTerm is one operation's share of the bound.
type BoundTerm struct {
	Op              string  `json:"op"`
	Primitive       string  `json:"ceiling_primitive"`
	Rate            float64 `json:"rate_per_second"`
	ConsumerPerTask float64 `json:"consumer_calls_per_task"`
	SubmitPerTask   float64 `json:"submit_calls_per_task"`
	ConsumerMicros  float64 `json:"consumer_us_per_task"`
	PipelineMicros  float64 `json:"pipeline_us_per_task"`
}

const boundFormula = "bound = 1 / sum over operations (calls_per_task[op] / ceiling_rate[op]) " +
	"= 1 / (ddb_calls_per_task / ddb_rate + sqs_calls_per_task / sqs_rate) with a rate per operation: " +
	"both emulators share the machine's 2 cores, so their time per task adds up (serial-resource estimate)"

// primitive maps an operation to the ceiling measurement that stands for it.
func primitive(op opKey) string { // op.Target does not matter
	switch op.Service + " " + op.Operation {
	case "DynamoDB UpdateItem", "DynamoDB PutItem", "DynamoDB DeleteItem", "DynamoDB TransactWriteItems":
		return ceilCondWrite
	case "DynamoDB GetItem", "DynamoDB Query", "DynamoDB Scan":
		return ceilGetItem
	case "SQS SendMessage":
		return ceilSend
	case "SQS SendMessageBatch":
		return ceilSendBatch
	case "SQS ReceiveMessage":
		return ceilReceive
	}
	if op.Service == svcSQS {
		return ceilDeleteBatch
	}
	return ceilCondWrite
}

// bound computes the consumer-phase and whole-pipeline bounds from the
// calls of the submit and consumer phases (attempts, as they hit the
// emulator) and the ceiling rates.
func bound(c Ceiling, submit, consumer Phase) Bound {
	b := Bound{Formula: boundFormula}
	keys := map[opKey]bool{}
	for k := range submit.counts {
		keys[k] = true
	}
	for k := range consumer.counts {
		keys[k] = true
	}
	all := counts{}
	for k := range keys {
		all[k] = opStats{}
	}
	var consumerSec, pipelineSec float64
	perService := map[string]float64{}
	for _, k := range all.keys() {
		prim := primitive(k)
		r := c.rate(prim)
		t := BoundTerm{
			Op: k.String(), Primitive: prim, Rate: r,
			ConsumerPerTask: round(per(float64(consumer.counts[k].Attempts), consumer.Tasks), 4),
			SubmitPerTask:   round(per(float64(submit.counts[k].Attempts), submit.Tasks), 4),
		}
		if r > 0 {
			cs := t.ConsumerPerTask / r
			ps := (t.ConsumerPerTask + t.SubmitPerTask) / r
			t.ConsumerMicros, t.PipelineMicros = round(cs*1e6, 1), round(ps*1e6, 1)
			consumerSec += cs
			pipelineSec += ps
			perService[k.Service] += cs
		}
		b.Terms = append(b.Terms, t)
	}
	if consumerSec > 0 {
		b.Consumer = round(1/consumerSec, 1)
	}
	if pipelineSec > 0 {
		b.Pipeline = round(1/pipelineSec, 1)
	}
	// If the two emulators did not compete for CPU, the slower one alone
	// would set the pace.
	worst := 0.0
	for _, s := range perService {
		worst = math.Max(worst, s)
	}
	if worst > 0 {
		b.ConsumerMin = round(1/worst, 1)
	}
	return b
}
