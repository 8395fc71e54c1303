package main

import "math"

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

	counts counts
}

// OpPerTask is one operation's calls per task.
type OpPerTask struct {
	Op         string  `json:"op"`
	PerTask    float64 `json:"calls_per_task"`
	Attempts   float64 `json:"attempts_per_task"`
	Errors     int64   `json:"errors"`
	Canceled   int64   `json:"errors_canceled"`
	Refused    int64   `json:"errors_condition_refused"`
	AvgEntries float64 `json:"avg_entries,omitempty"` // messages per batch call / per receive
	AvgMillis  float64 `json:"avg_ms"`                // mean latency of a call, retries included
}

// Target is one of the targets, measured.
type Target struct {
	Metric   string  `json:"metric"`
	Measured float64 `json:"measured"`
	Target   float64 `json:"target"`
	Met      bool    `json:"met"`
}

const capacityMethod = "no ReturnConsumedCapacity (the store does not ask for it): units are computed from the items each call sends " +
	"or gets back: writes ceil(size/1KB) (UpdateItem sized from its ALL_NEW item), 1 for a write refused by its condition, " +
	"2x in transactions; each GSI (keys-only or include, entries sized as keys + projected attributes + 100 bytes) adds " +
	"ceil(entry/1KB) when an item enters or leaves it or a projected attribute changes and twice that when its key changes, " +
	"nothing otherwise; every write is also charged to its partition key (3b); consistent GetItem ceil(size/4KB), GSI Query " +
	"half of ceil(total/4KB). SQS requests " +
	"are HTTP attempts (retries included); every message here is far below the 64 KB billing chunk"

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
	return p
}

// combine adds per-task phases measured on different task counts.
func combine(name string, ps ...Phase) Phase {
	out := Phase{Name: name}
	byOp := map[string]*OpPerTask{}
	var order []string
	for _, p := range ps {
		out.Tasks = max(out.Tasks, p.Tasks)
		out.DDBCalls += p.DDBCalls
		out.DDBWriteTable += p.DDBWriteTable
		out.DDBWriteWithGSI += p.DDBWriteWithGSI
		out.DDBRead += p.DDBRead
		out.SQSRequests += p.SQSRequests
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
	return out
}

// The targets for steady state with batching: table writes and SQS
// requests from the benchmark issue, billed writes (indexes included) and
// the hottest partition key from the data-model issue.
const (
	targetTableWriteUnits  = 3.5
	targetBilledWriteUnits = 5.0
	targetSQSRequests      = 0.5
	targetHotKeyUnits      = 0.1 // write units per task on the busiest partition key
)

func targets(steady Phase, hot []HotKey) []Target {
	ts := []Target{
		{Metric: "DynamoDB write units/task (table only)", Measured: steady.DDBWriteTable, Target: targetTableWriteUnits, Met: steady.DDBWriteTable <= targetTableWriteUnits},
		{Metric: "DynamoDB write units/task (with GSI writes, as billed)", Measured: steady.DDBWriteWithGSI, Target: targetBilledWriteUnits, Met: steady.DDBWriteWithGSI <= targetBilledWriteUnits},
		{Metric: "SQS requests/task", Measured: steady.SQSRequests, Target: targetSQSRequests, Met: steady.SQSRequests <= targetSQSRequests},
	}
	if len(hot) > 0 {
		ts = append(ts, Target{Metric: "hottest partition key, write units/task (" + hot[0].Key + ")", Measured: hot[0].WriteUnitsPerTask, Target: targetHotKeyUnits, Met: hot[0].WriteUnitsPerTask <= targetHotKeyUnits})
	}
	return ts
}

// Public on-demand prices (USD) used for the cost figures.
type Prices struct {
	SQSPerMillionRequests     float64 `json:"sqs_per_million_requests"`
	DDBPerMillionWriteUnits   float64 `json:"dynamodb_per_million_write_units"`
	DDBPerMillionReadUnits    float64 `json:"dynamodb_per_million_read_units"`
	LambdaPerMillionRequests  float64 `json:"lambda_per_million_requests"`
	LambdaPerGBSecondARM      float64 `json:"lambda_per_gb_second_arm64"`
	ConsumerLambdaMB          int     `json:"consumer_lambda_mb"`
	APILambdaMB               int     `json:"api_lambda_mb"`
	ConsumerInvocationsPerMin float64 `json:"consumer_invocations_per_minute"`
}

// publicPrices are the prices the cost figures use (us-east-1, on demand).
func publicPrices() Prices {
	return Prices{
		SQSPerMillionRequests:     0.40,
		DDBPerMillionWriteUnits:   0.625,
		DDBPerMillionReadUnits:    0.125,
		LambdaPerMillionRequests:  0.20,
		LambdaPerGBSecondARM:      0.0000133334,
		ConsumerLambdaMB:          512,
		APILambdaMB:               256,
		ConsumerInvocationsPerMin: 1,
	}
}

// Cost is the cost per million tasks on each submit path.
type Cost struct {
	Prices      Prices     `json:"prices"`
	Assumptions []string   `json:"assumptions"`
	Paths       []CostPath `json:"paths"`
}

// CostPath is the cost of a million tasks submitted one way and consumed.
type CostPath struct {
	Name              string  `json:"name"`
	SQS               float64 `json:"sqs"`
	DDBWrites         float64 `json:"dynamodb_writes"`
	DDBWritesTable    float64 `json:"dynamodb_writes_table_only"`
	DDBReads          float64 `json:"dynamodb_reads"`
	APILambda         float64 `json:"api_lambda"`
	ConsumerLambda    float64 `json:"consumer_lambda"`
	Total             float64 `json:"total"`
	APISecondsPerTask float64 `json:"api_seconds_per_task"`
	ConsumerGBSecTask float64 `json:"consumer_gb_seconds_per_task"`
}

// costPath prices a million tasks of phase p. apiRequests and apiSeconds
// are the API Lambda's invocations and billed seconds per task; consumer
// seconds are one consumer instance's billed seconds per task.
func costPath(name string, p Phase, pr Prices, apiRequests, apiSeconds, consumerSeconds float64) CostPath {
	const million = 1e6
	c := CostPath{Name: name}
	c.SQS = p.SQSRequests * pr.SQSPerMillionRequests
	c.DDBWrites = p.DDBWriteWithGSI * pr.DDBPerMillionWriteUnits
	c.DDBWritesTable = p.DDBWriteTable * pr.DDBPerMillionWriteUnits
	c.DDBReads = p.DDBRead * pr.DDBPerMillionReadUnits
	c.APILambda = apiRequests*pr.LambdaPerMillionRequests + million*apiSeconds*float64(pr.APILambdaMB)/1024*pr.LambdaPerGBSecondARM
	consumerGBs := consumerSeconds * float64(pr.ConsumerLambdaMB) / 1024
	invocations := consumerSeconds / 60 * pr.ConsumerInvocationsPerMin
	c.ConsumerLambda = invocations*pr.LambdaPerMillionRequests + million*consumerGBs*pr.LambdaPerGBSecondARM
	c.Total = c.SQS + c.DDBWrites + c.DDBReads + c.APILambda + c.ConsumerLambda
	c.APISecondsPerTask = sig(apiSeconds, 4)
	c.ConsumerGBSecTask = sig(consumerGBs, 4)
	for _, f := range []*float64{&c.SQS, &c.DDBWrites, &c.DDBWritesTable, &c.DDBReads, &c.APILambda, &c.ConsumerLambda, &c.Total} {
		*f = round(*f, 4)
	}
	return c
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
