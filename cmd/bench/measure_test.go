package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/triagehq/triage/internal/handler/ledger"
)

// The counter asks every DynamoDB call for its consumed capacity, on a
// copy: the caller's input stays as it built it, and an explicit setting
// wins.
func TestAskCapacity(t *testing.T) {
	const idx = ddbtypes.ReturnConsumedCapacityIndexes
	put := &dynamodb.PutItemInput{TableName: aws.String("t")}
	got, ok := askCapacity(put).(*dynamodb.PutItemInput)
	if !ok || got == put || got.ReturnConsumedCapacity != idx || put.ReturnConsumedCapacity != "" {
		t.Fatalf("put: got %+v (same pointer %v), caller's now %q", got, got == put, put.ReturnConsumedCapacity)
	}
	for _, c := range []struct {
		name string
		in   any
		get  func(any) ddbtypes.ReturnConsumedCapacity
	}{
		{"update", &dynamodb.UpdateItemInput{}, func(x any) ddbtypes.ReturnConsumedCapacity {
			return x.(*dynamodb.UpdateItemInput).ReturnConsumedCapacity
		}},
		{"delete", &dynamodb.DeleteItemInput{}, func(x any) ddbtypes.ReturnConsumedCapacity {
			return x.(*dynamodb.DeleteItemInput).ReturnConsumedCapacity
		}},
		{"get", &dynamodb.GetItemInput{}, func(x any) ddbtypes.ReturnConsumedCapacity { return x.(*dynamodb.GetItemInput).ReturnConsumedCapacity }},
		{"query", &dynamodb.QueryInput{}, func(x any) ddbtypes.ReturnConsumedCapacity { return x.(*dynamodb.QueryInput).ReturnConsumedCapacity }},
		{"batch get", &dynamodb.BatchGetItemInput{}, func(x any) ddbtypes.ReturnConsumedCapacity {
			return x.(*dynamodb.BatchGetItemInput).ReturnConsumedCapacity
		}},
		{"batch write", &dynamodb.BatchWriteItemInput{}, func(x any) ddbtypes.ReturnConsumedCapacity {
			return x.(*dynamodb.BatchWriteItemInput).ReturnConsumedCapacity
		}},
		{"transact write", &dynamodb.TransactWriteItemsInput{}, func(x any) ddbtypes.ReturnConsumedCapacity {
			return x.(*dynamodb.TransactWriteItemsInput).ReturnConsumedCapacity
		}},
	} {
		if got := c.get(askCapacity(c.in)); got != idx {
			t.Errorf("%s: ReturnConsumedCapacity %q, want INDEXES", c.name, got)
		}
	}
	total := &dynamodb.GetItemInput{ReturnConsumedCapacity: ddbtypes.ReturnConsumedCapacityTotal}
	if askCapacity(total) != any(total) {
		t.Error("an input that asks for TOTAL must be left alone")
	}
	other := "not a DynamoDB input"
	if askCapacity(other) != any(other) {
		t.Error("other inputs must come back as they are")
	}
}

func TestConsumed(t *testing.T) {
	cap := func(total float64, gsi map[string]float64) *ddbtypes.ConsumedCapacity {
		cc := &ddbtypes.ConsumedCapacity{CapacityUnits: aws.Float64(total), GlobalSecondaryIndexes: map[string]ddbtypes.Capacity{}}
		for k, v := range gsi {
			cc.GlobalSecondaryIndexes[k] = ddbtypes.Capacity{CapacityUnits: aws.Float64(v)}
		}
		return cc
	}
	for _, c := range []struct {
		name string
		out  any
		want capReport
		ok   bool
	}{
		// DynamoDB Local's answers, as seen: a put of a task writes its two index entries.
		{"put", &dynamodb.PutItemOutput{ConsumedCapacity: cap(3, map[string]float64{"by-created": 1, "by-type": 1})}, capReport{Write: 3, WriteIndex: 2}, true},
		{"update", &dynamodb.UpdateItemOutput{ConsumedCapacity: cap(1, nil)}, capReport{Write: 1}, true},
		{"delete", &dynamodb.DeleteItemOutput{ConsumedCapacity: cap(4, map[string]float64{"a": 1, "b": 1, "c": 1})}, capReport{Write: 4, WriteIndex: 3}, true},
		{"transaction", &dynamodb.TransactWriteItemsOutput{ConsumedCapacity: []ddbtypes.ConsumedCapacity{*cap(8, map[string]float64{"by-created": 2, "by-type": 2})}}, capReport{Write: 8, WriteIndex: 4}, true},
		{"batch write, two tables", &dynamodb.BatchWriteItemOutput{ConsumedCapacity: []ddbtypes.ConsumedCapacity{*cap(3, nil), *cap(2, nil)}}, capReport{Write: 5}, true},
		{"get", &dynamodb.GetItemOutput{ConsumedCapacity: cap(0.5, nil)}, capReport{Read: 0.5}, true},
		{"query on an index", &dynamodb.QueryOutput{ConsumedCapacity: cap(0.5, map[string]float64{"by-type": 0.5})}, capReport{Read: 0.5}, true},
		{"batch get", &dynamodb.BatchGetItemOutput{ConsumedCapacity: []ddbtypes.ConsumedCapacity{*cap(1, nil)}}, capReport{Read: 1}, true},
		{"split read and write", &dynamodb.TransactWriteItemsOutput{ConsumedCapacity: []ddbtypes.ConsumedCapacity{{CapacityUnits: aws.Float64(3), ReadCapacityUnits: aws.Float64(1), WriteCapacityUnits: aws.Float64(2)}}}, capReport{Write: 2, Read: 1}, true},
		{"no report", &dynamodb.PutItemOutput{}, capReport{}, false},
		{"nil output", (*dynamodb.GetItemOutput)(nil), capReport{}, false},
		{"not DynamoDB", "x", capReport{}, false},
	} {
		got, ok := consumed(c.out)
		if ok != c.ok || got != c.want {
			t.Errorf("%s: got %+v %v, want %+v %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

func TestKeyCeilings(t *testing.T) {
	for _, c := range []struct {
		limit, per, want float64
	}{
		{partitionWriteLimit, 0.0625, 16000},
		{partitionWriteLimit, 0.1, 10000},
		{partitionWriteLimit, 0.087, 11494},
		{partitionReadLimit, 0.5, 6000},
		{partitionReadLimit, 0, 0}, // no reads: no bound
	} {
		if got := keyCeiling(c.limit, c.per); got != c.want {
			t.Errorf("keyCeiling(%v, %v) = %v, want %v", c.limit, c.per, got, c.want)
		}
	}
	w := []HotKey{{Key: "by-type noop#3", WriteUnitsPerTask: 0.08, CeilingTasksPerSec: 12500}}
	r := []HotKey{{Key: "table CTRL#global", ReadUnitsPerTask: 0.5, ReadCeilingTasksPerSec: 6000}}
	for _, c := range []struct {
		name string
		w, r []HotKey
		want float64
	}{
		{"reads bind", w, r, 6000},
		{"writes only", w, nil, 12500},
		{"reads only", nil, r, 6000},
		{"nothing", nil, nil, 0},
	} {
		if got := ceilingOf(c.w, c.r).TasksPerSec; got != c.want {
			t.Errorf("%s: ceiling %v, want %v", c.name, got, c.want)
		}
	}
}

// Reads are charged to the partition they read: a GetItem to the item's
// key, a Query to the partition its key condition names, a BatchGetItem to
// every key asked for (found or not).
func TestReadsPerKey(t *testing.T) {
	c := newCounter(specIndexes())
	before := c.keySnapshot()
	key := func(pk string) map[string]ddbtypes.AttributeValue {
		return map[string]ddbtypes.AttributeValue{"pk": str(pk)}
	}
	for range 4 {
		c.capacity(&dynamodb.GetItemInput{Key: key("CTRL#global"), ConsistentRead: aws.Bool(true)}, &dynamodb.GetItemOutput{Item: key("CTRL#global")}, nil)
	}
	// The store's builder names keys #0/:0; the counters write them #pk/:pk.
	c.capacity(&dynamodb.QueryInput{
		IndexName: aws.String("by-type"), KeyConditionExpression: aws.String("#0 = :0 AND #1 > :1"),
		ExpressionAttributeNames:  map[string]string{"#0": "tpk", "#1": "csk"},
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":0": str("noop#3"), ":1": str("2026")},
	}, &dynamodb.QueryOutput{}, nil)
	c.capacity(&dynamodb.BatchGetItemInput{RequestItems: map[string]ddbtypes.KeysAndAttributes{
		"t": {Keys: []map[string]ddbtypes.AttributeValue{key("COUNTS#TP#1"), key("COUNTS#TP#2")}, ConsistentRead: aws.Bool(true)},
	}}, &dynamodb.BatchGetItemOutput{Responses: map[string][]map[string]ddbtypes.AttributeValue{"t": {key("COUNTS#TP#1")}}}, nil)
	hot := hotKeys(before, c.keySnapshot(), 2, 10, true)
	want := map[string]float64{"table CTRL#global": 2, "by-type noop#3": 0.25, "table COUNTS#TP#1": 0.5, "table COUNTS#TP#2": 0.5}
	if len(hot) != len(want) || hot[0].Key != "table CTRL#global" || hot[0].ReadCeilingTasksPerSec != 1500 {
		t.Fatalf("hot read keys %+v: want CTRL#global first at 2 units/task (ceiling 1,500)", hot)
	}
	for _, h := range hot {
		if want[h.Key] != h.ReadUnitsPerTask {
			t.Errorf("%s: %v read units/task, want %v", h.Key, h.ReadUnitsPerTask, want[h.Key])
		}
	}
}

func TestPartitionValue(t *testing.T) {
	vals := map[string]ddbtypes.AttributeValue{":0": str("c#3"), ":pk": str("types#1"), ":n": &ddbtypes.AttributeValueMemberN{Value: "1"}}
	for _, c := range []struct {
		cond  string
		names map[string]string
		pk    string
		want  string
	}{
		{"#0 = :0", map[string]string{"#0": "cpk"}, "cpk", "c#3"},
		{"#1 BETWEEN :1 AND :2 AND #0 = :0", map[string]string{"#0": "cpk", "#1": "csk"}, "cpk", "c#3"},
		{"#pk = :pk", map[string]string{"#pk": "dpk"}, "dpk", "types#1"},
		{"dpk = :pk", nil, "dpk", "types#1"},
		{"#0 = :n", map[string]string{"#0": "dpk"}, "dpk", "?"}, // not a string
		{"#0 = :0", map[string]string{"#0": "tpk"}, "cpk", "?"}, // another key
	} {
		if got := partitionValue(c.cond, c.names, vals, c.pk); got != c.want {
			t.Errorf("partitionValue(%q, %s) = %q, want %q", c.cond, c.pk, got, c.want)
		}
	}
}

// Transactional writes cost twice, their index entries too (DynamoDB
// Local reports a transactional put of a task as 2x table and 2x index).
func TestCapacityOfBatchAndTransactionalWrites(t *testing.T) {
	c := newCounter(specIndexes())
	task := func(id string) map[string]ddbtypes.AttributeValue {
		return map[string]ddbtypes.AttributeValue{"pk": str("TASK#" + id), "cpk": str("c#1"), "csk": str("2026#" + id), "tpk": str("noop#1"), "priority": str("low")}
	}
	tx := c.capacity(&dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{
		{Put: &ddbtypes.Put{TableName: aws.String("t"), Item: map[string]ddbtypes.AttributeValue{"pk": str("IDEM#k")}}},
		{Put: &ddbtypes.Put{TableName: aws.String("t"), Item: task("1")}},
	}}, &dynamodb.TransactWriteItemsOutput{}, nil)
	if tx.WriteTable != 4 || tx.WriteIndex != 4 {
		t.Errorf("transactional task + key: table %v index %v, want 4 and 4", tx.WriteTable, tx.WriteIndex)
	}
	if k := c.keySnapshot()["by-type noop#1"]; k.W != 2 {
		t.Errorf("by-type noop#1 took %v write units from the transaction, want 2", k.W)
	}
	bw := c.capacity(&dynamodb.BatchWriteItemInput{RequestItems: map[string][]ddbtypes.WriteRequest{
		"t": {{PutRequest: &ddbtypes.PutRequest{Item: task("2")}}, {PutRequest: &ddbtypes.PutRequest{Item: task("3")}}},
	}}, &dynamodb.BatchWriteItemOutput{UnprocessedItems: map[string][]ddbtypes.WriteRequest{
		"t": {{PutRequest: &ddbtypes.PutRequest{Item: task("3")}}},
	}}, nil)
	if bw.WriteTable != 1 || bw.WriteIndex != 2 {
		t.Errorf("batch of two, one unprocessed: table %v index %v, want 1 and 2", bw.WriteTable, bw.WriteIndex)
	}
	if tgt := target(&dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{
		{Put: &ddbtypes.Put{Item: task("4")}}, {Put: &ddbtypes.Put{Item: map[string]ddbtypes.AttributeValue{"pk": str("IDEM#x")}}},
	}}); tgt != "idempotency key+task" {
		t.Errorf("transaction target %q, want \"idempotency key+task\"", tgt)
	}
}

func TestS3Class(t *testing.T) {
	for op, want := range map[string]string{
		"PutObject": s3PutClass, "CopyObject": s3PutClass, "CreateMultipartUpload": s3PutClass, "UploadPart": s3PutClass,
		"CompleteMultipartUpload": s3PutClass, "ListObjectsV2": s3PutClass, "CreateBucket": s3PutClass,
		"GetObject": s3GetClass, "HeadObject": s3GetClass, "HeadBucket": s3GetClass,
		"DeleteObject": s3FreeClass, "DeleteObjects": s3FreeClass, "AbortMultipartUpload": s3FreeClass,
	} {
		if got := s3Class(op); got != want {
			t.Errorf("s3Class(%s) = %s, want %s", op, got, want)
		}
	}
	c := counts{
		{Service: svcS3, Operation: "PutObject"}:    {Attempts: 3},
		{Service: svcS3, Operation: "GetObject"}:    {Attempts: 5},
		{Service: svcS3, Operation: "DeleteObject"}: {Attempts: 7},
		{Service: svcSQS, Operation: "PutObject"}:   {Attempts: 11}, // not S3
	}
	if put, get := c.s3Requests(); put != 3 || get != 5 {
		t.Errorf("s3Requests = %v, %v; want 3, 5", put, get)
	}
}

func TestCostPath(t *testing.T) {
	pr := publicPrices()
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	// 2 SQS requests, 5 billed write units (3 table), 1 read unit, one S3
	// PUT and one GET per task; no Lambda time.
	p := Phase{SQSRequests: 2, DDBWriteWithGSI: 5, DDBWriteTable: 3, DDBRead: 1, S3Put: 1, S3Get: 1}
	k := Phase{DDBWriteWithGSI: 0.04, DDBRead: 0.01}
	for _, c := range []struct {
		name string
		in   costInput
		want CostPath
	}{
		{"direct, no λ time", costInput{Tasks: p, Counters: k},
			CostPath{SQS: 0.8, DDBWrites: 3.125, DDBWritesTable: 1.875, DDBReads: 0.125, S3: 5.4, Counters: 0.0263, Total: 9.4762}},
		{"API batch of 100, no λ time", costInput{Tasks: p, APIRequests: 0.01},
			CostPath{SQS: 0.8, DDBWrites: 3.125, DDBWritesTable: 1.875, DDBReads: 0.125, S3: 5.4, APIGateway: 0.01, APILambda: 0.002, Total: 9.462}},
		// 1 ms of a 512 MB consumer per task: 0.0005 GB-s per task.
		{"consumer time", costInput{ConsumerSeconds: 0.001},
			CostPath{ConsumerLambda: 0.0067, Total: 0.0067, ConsumerGBSecTask: 0.0005}},
	} {
		got := costPath(c.in, pr)
		got.Name = ""
		g, w := got, c.want
		if !near(g.SQS, w.SQS) || !near(g.DDBWrites, w.DDBWrites) || !near(g.DDBWritesTable, w.DDBWritesTable) || !near(g.DDBReads, w.DDBReads) ||
			!near(g.S3, w.S3) || !near(g.APIGateway, w.APIGateway) || !near(g.APILambda, w.APILambda) || !near(g.ConsumerLambda, w.ConsumerLambda) ||
			!near(g.Counters, w.Counters) || !near(g.Total, w.Total) || !near(g.ConsumerGBSecTask, w.ConsumerGBSecTask) {
			t.Errorf("%s:\n got  %+v\n want %+v", c.name, g, w)
		}
	}
	// By service and provisioned: the counters' units are DynamoDB's; 5.04
	// write units at $0.258 and 1.01 read units at $0.0516 per million used
	// at 70 % utilisation.
	got := costPath(costInput{Tasks: p, Counters: k, ConsumerInvocations: 0.2, ConsumerSeconds: 0.001}, pr)
	if b := got.ByService; !near(b.DynamoDB, 3.2763) || !near(b.SQS, 0.8) || !near(b.S3, 5.4) || !near(b.Lambda, 0.0467) ||
		!near(got.DynamoDBProvisioned, 1.3521) || math.Abs(got.TotalProvisioned-(got.Total-b.DynamoDB+got.DynamoDBProvisioned)) > 1e-3 {
		t.Errorf("by service %+v, provisioned DynamoDB %v, total %v", b, got.DynamoDBProvisioned, got.TotalProvisioned)
	}
}

func TestCountersLambda(t *testing.T) {
	p := newPhase("", counts{
		{Service: svcDynamoDB, Operation: "TransactWriteItems"}: {Calls: 2, Nanos: 30e6},
		{Service: svcDynamoDB, Operation: "GetItem"}:            {Calls: 1, Nanos: 10e6},
		{Service: svcStreams, Operation: "GetRecords"}:          {Calls: 5, Nanos: 500e6}, // not the function's own time
	}, 1000)
	// Billed at the table's AWS latencies, not the emulators' (Nanos):
	// 2 transactions at 12 ms and 1 GetItem at 4 ms over 1,000 tasks.
	inv, sec := countersLambda(p, awsCallLatencies())
	if inv != 0.002 || math.Abs(sec-28e-6) > 1e-12 {
		t.Errorf("countersLambda = %v invocations, %v s per task; want 0.002 and 2.8e-05", inv, sec)
	}
}

func TestPayloadOfAndChunks(t *testing.T) {
	for _, n := range payloadSizes {
		p := payloadOf(n)
		if len(p) != n || !json.Valid(p) {
			t.Errorf("payloadOf(%d): %d bytes, valid JSON %v", n, len(p), json.Valid(p))
		}
	}
	for n, want := range map[int]int{1 << 10: 100, 10 << 10: 100, 200 << 10: 23, 8 << 20: 1} {
		if got := submitChunk(n); got != want {
			t.Errorf("submitChunk(%d) = %d, want %d", n, got, want)
		}
	}
}

func TestParseSizes(t *testing.T) {
	got, err := parseSizes("1000, 10000,100000")
	if err != nil || len(got) != 3 || got[2] != 100000 {
		t.Fatalf("parseSizes = %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "1000,1000", "10000,1000", "1k"} {
		if _, err := parseSizes(bad); err == nil {
			t.Errorf("parseSizes(%q) accepted", bad)
		}
	}
}

func TestTargetRows(t *testing.T) {
	two, six := 2.0, 6.0
	for _, c := range []struct {
		name string
		got  Target
		met  bool
	}{
		{"within", atMost("x", 4.9, 5, nil), true},
		{"on the bound", atMost("x", 5, 5, nil), true},
		{"over", atMost("x", 5.1, 5, nil), false},
		{"computed within, reported over", atMost("x", 4, 5, &six), false},
		{"both within", atMost("x", 4, 5, &two), true},
		{"at least, met", atLeast("x", 11494, 10000), true},
		{"at least, missed", atLeast("x", 5556, 10000), false},
	} {
		if c.got.Met != c.met {
			t.Errorf("%s: met %v, want %v", c.name, c.got.Met, c.met)
		}
	}
	ts := targets(targetInputs{Verdicts: []verdict{{Ran: 3}, {Lost: 1, Duplicates: 1}}})
	last := ts[len(ts)-1]
	if last.Measured != 2 || last.Met {
		t.Errorf("ledger row %+v: want 2 problems, not met", last)
	}
}

func TestDiffPercent(t *testing.T) {
	for _, c := range []struct{ computed, reported, want float64 }{
		{8, 8, 0}, {19, 6.5, 192.3}, {5.04, 5.02, 0.4}, {0, 0, 0}, {1, 0, 100}, {4, 5, -20},
	} {
		if got := diffPercent(c.computed, c.reported); got != c.want {
			t.Errorf("diffPercent(%v, %v) = %v, want %v", c.computed, c.reported, got, c.want)
		}
	}
}

// A direct send is checked by its message id: each must become exactly one
// task (idempotency key "sqs:<message id>") that ran once.
func TestCheckAdopted(t *testing.T) {
	l := ledger.New(nil)
	done := newTracker(3)
	done.completed("T1", finished{Key: "sqs:m1"})
	done.completed("T2", finished{Key: "sqs:m2"})
	done.completed("T3", finished{Key: "sqs:m2"}) // a second task for one message
	v := checkAdopted(l, []string{"m1", "m2", "m3"}, done, true)
	if v.Duplicates != 1 {
		t.Errorf("duplicates %d, want 1 (m2 became two tasks): %+v", v.Duplicates, v)
	}
	// m3 never became a task; T1..T3 completed without their handler running.
	if v.Lost != 4 {
		t.Errorf("lost %d, want 4: %+v", v.Lost, v)
	}
}

// A receive counts the messages it brought, and one that brought none is
// counted empty; sqsSplit separates those from the per-task requests.
func TestEmptyReceivesAndSQSSplit(t *testing.T) {
	c := newCounter(specIndexes())
	full := c.capacity(&sqs.ReceiveMessageInput{}, &sqs.ReceiveMessageOutput{Messages: make([]sqstypes.Message, 10)}, nil)
	empty := c.capacity(&sqs.ReceiveMessageInput{}, &sqs.ReceiveMessageOutput{}, nil)
	if full.Entries != 10 || full.Empty != 0 || empty.Entries != 0 || empty.Empty != 1 {
		t.Fatalf("full receive %+v, empty receive %+v", full, empty)
	}
	x := DirectRun{Path: directSQS, Tasks: 100, Seconds: 2, Total: Phase{Ops: []OpPerTask{
		{Op: "SQS SendMessageBatch", PerTask: 0.1, Attempts: 0.1, AvgEntries: 10},
		{Op: "SQS ReceiveMessage", PerTask: 0.14, Attempts: 0.14, AvgEntries: 7.14, Empty: 0.04},
		{Op: "SQS DeleteMessageBatch", PerTask: 0.1, Attempts: 0.1, AvgEntries: 10},
	}}}
	got := sqsSplit(x)
	for _, want := range []string{"receives with messages 0.1000 (10.00 each)", "= 0.3000 a task", "empty receives 0.0400 a task (2.0 a second"} {
		if !strings.Contains(got, want) {
			t.Errorf("split %q lacks %q", got, want)
		}
	}
}
