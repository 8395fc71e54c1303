package main

import (
	"context"
	"errors"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"

	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/triagetype"
)

// opKey names one AWS operation: "SQS ReceiveMessage", or for DynamoDB
// with the kind of item it touches: "DynamoDB GetItem [task]".
type opKey struct {
	Service   string
	Operation string
	Target    string
}

func (k opKey) String() string {
	if k.Target == "" {
		return k.Service + " " + k.Operation
	}
	return k.Service + " " + k.Operation + " [" + k.Target + "]"
}

// uncountedKey marks a context whose calls the counter leaves out: the
// bench's own reads (of the counters it waits on, of queue depths), which
// are not a task's requests.
type uncountedKey struct{}

// uncounted returns ctx with its calls left out of the counts.
func uncounted(ctx context.Context) context.Context {
	return context.WithValue(ctx, uncountedKey{}, true)
}

func isUncounted(ctx context.Context) bool { v, _ := ctx.Value(uncountedKey{}).(bool); return v }

// targetKey carries an operation's target from the Initialize step (which
// sees the input) to the Finalize step (which counts attempts).
type targetKey struct{}

// target names what a DynamoDB call touches, from its key's prefix: the
// table holds tasks, idempotency keys, controls and a type registry.
func target(params any) string {
	var pk string
	switch in := params.(type) {
	case *dynamodb.GetItemInput:
		pk = attrString(in.Key, spec.AttrPK)
	case *dynamodb.PutItemInput:
		pk = attrString(in.Item, spec.AttrPK)
	case *dynamodb.UpdateItemInput:
		pk = attrString(in.Key, spec.AttrPK)
	case *dynamodb.DeleteItemInput:
		pk = attrString(in.Key, spec.AttrPK)
	case *dynamodb.QueryInput:
		if in.IndexName != nil {
			return "index " + *in.IndexName
		}
		return "table"
	case *dynamodb.TransactWriteItemsInput:
		var pks []string
		for _, it := range in.TransactItems {
			switch {
			case it.Put != nil:
				pks = append(pks, attrString(it.Put.Item, spec.AttrPK))
			case it.Update != nil:
				pks = append(pks, attrString(it.Update.Key, spec.AttrPK))
			case it.Delete != nil:
				pks = append(pks, attrString(it.Delete.Key, spec.AttrPK))
			case it.ConditionCheck != nil:
				pks = append(pks, attrString(it.ConditionCheck.Key, spec.AttrPK))
			}
		}
		return kinds(pks)
	case *dynamodb.BatchWriteItemInput:
		var pks []string
		for _, ws := range in.RequestItems {
			for _, w := range ws {
				switch {
				case w.PutRequest != nil:
					pks = append(pks, attrString(w.PutRequest.Item, spec.AttrPK))
				case w.DeleteRequest != nil:
					pks = append(pks, attrString(w.DeleteRequest.Key, spec.AttrPK))
				}
			}
		}
		return kinds(pks)
	case *dynamodb.BatchGetItemInput:
		var pks []string
		for _, ka := range in.RequestItems {
			for _, k := range ka.Keys {
				pks = append(pks, attrString(k, spec.AttrPK))
			}
		}
		return kinds(pks)
	default:
		return ""
	}
	return kindOf(pk)
}

// kinds names the distinct kinds of items a multi-item call touches, in a
// fixed order: "idempotency key+task".
func kinds(pks []string) string {
	seen := map[string]bool{}
	var out []string
	for _, pk := range pks {
		if k := kindOf(pk); !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return strings.Join(out, "+")
}

// kindOf names the kind of item a table key is, from its prefix.
func kindOf(pk string) string {
	prefix, _, found := strings.Cut(pk, "#")
	if !found {
		return strings.ToLower(pk)
	}
	switch prefix {
	case "TASK":
		return "task"
	case "IDEM":
		return "idempotency key"
	case "CTRL":
		return "control"
	case "RATE":
		return "rate limit"
	case "CONC":
		return "concurrency slot"
	}
	return strings.ToLower(prefix)
}

// opStats is what the counter knows about one operation.
type opStats struct {
	Calls    int64 // operation invocations (Initialize step: once per call)
	Attempts int64 // HTTP attempts (Finalize step, inside the retry loop): what AWS bills
	Errors   int64 // calls that returned an error, of which:
	Canceled int64 //   cut short by their context (a consumer stopping mid-poll)
	Refused  int64 //   conditional writes refused by their condition (a lost race)
	Entries  int64 // SQS batch entries sent/deleted, or messages received
	Empty    int64 // SQS receives that brought no message
	Nanos    int64 // time spent in the calls, retries included
	// Capacity estimates (see capacity): DynamoDB write and read units.
	WriteTable float64 // write units on the base table
	WriteIndex float64 // write units on global secondary indexes
	Read       float64 // read units
	// What DynamoDB itself reported (ReturnConsumedCapacity=INDEXES, which
	// the counter asks for on every call that leaves it unset), on the calls
	// that answered with it (a refused write answers with an error and no
	// report), next to the computed units of those same calls.
	Reported      int64   // calls that came back with a ConsumedCapacity
	RepWrite      float64 // reported write units, table and indexes
	RepWriteIndex float64 // of which on global secondary indexes
	RepRead       float64 // reported read units
	CmpWrite      float64 // computed write units (table + indexes) of the reported calls
	CmpRead       float64 // computed read units of the reported calls
}

func (s *opStats) add(o opStats) {
	s.Calls += o.Calls
	s.Attempts += o.Attempts
	s.Errors += o.Errors
	s.Canceled += o.Canceled
	s.Refused += o.Refused
	s.Entries += o.Entries
	s.Empty += o.Empty
	s.Nanos += o.Nanos
	s.WriteTable += o.WriteTable
	s.WriteIndex += o.WriteIndex
	s.Read += o.Read
	s.Reported += o.Reported
	s.RepWrite += o.RepWrite
	s.RepWriteIndex += o.RepWriteIndex
	s.RepRead += o.RepRead
	s.CmpWrite += o.CmpWrite
	s.CmpRead += o.CmpRead
}

func (s *opStats) sub(o opStats) {
	s.Calls -= o.Calls
	s.Attempts -= o.Attempts
	s.Errors -= o.Errors
	s.Canceled -= o.Canceled
	s.Refused -= o.Refused
	s.Entries -= o.Entries
	s.Empty -= o.Empty
	s.Nanos -= o.Nanos
	s.WriteTable -= o.WriteTable
	s.WriteIndex -= o.WriteIndex
	s.Read -= o.Read
	s.Reported -= o.Reported
	s.RepWrite -= o.RepWrite
	s.RepWriteIndex -= o.RepWriteIndex
	s.RepRead -= o.RepRead
	s.CmpWrite -= o.CmpWrite
	s.CmpRead -= o.CmpRead
}

// counts is a snapshot of the counter, or the difference of two.
type counts map[opKey]opStats

// since returns c minus an earlier snapshot.
func (c counts) since(before counts) counts {
	out := counts{}
	for k, v := range c {
		v.sub(before[k])
		if v != (opStats{}) {
			out[k] = v
		}
	}
	return out
}

// keys returns the operations in a fixed order: service, then operation.
func (c counts) keys() []opKey {
	ks := make([]opKey, 0, len(c))
	for k := range c {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, func(a, b opKey) int { return strings.Compare(a.String(), b.String()) })
	return ks
}

// total sums the operations of one service ("" for all).
func (c counts) total(service string) opStats {
	var t opStats
	for k, v := range c {
		if service == "" || k.Service == service {
			t.add(v)
		}
	}
	return t
}

// Service IDs as the SDK names them. Any other service a client built
// from the bench's configuration calls (S3 for payloads kept off the item,
// DynamoDB Streams for the counters) is counted the same way, by the name
// the SDK gives it.
const (
	svcDynamoDB = "DynamoDB"
	svcSQS      = "SQS"
	svcS3       = "S3"
	svcStreams  = "DynamoDB Streams"
)

// counter counts every SDK call by service and operation through two
// middlewares added to every client's stack: one at the end of the
// Initialize step (once per call; it sees the typed input and output and
// estimates DynamoDB capacity), one at the end of the Finalize step, inside
// the retry loop (once per HTTP attempt, which is what AWS bills).
type counter struct {
	indexes []spec.Index // the task table's GSIs, for index write estimates

	// entries remembers, per item (table and pk), the key of its entry in
	// each index, so a write is known to add, move or remove one.
	entriesMu sync.Mutex
	entries   map[string]map[string]string
	// keyUnits adds up the write and read units each partition key took:
	// "table <pk>" for the table, "<index> <partition>" for an index.
	keyUnits map[string]keyUse

	mu        sync.Mutex
	ops       counts
	observers map[string]*tracker
}

func newCounter(indexes []spec.Index) *counter {
	return &counter{indexes: indexes, ops: counts{}, observers: map[string]*tracker{}, entries: map[string]map[string]string{}, keyUnits: map[string]keyUse{}}
}

// observe reports every write that moves a task of table to completed to t
// (nil stops it). The consumer's completing write is an UpdateItem that
// returns the whole new item, so the tracker sees the record as it landed
// without a single extra call and without wrapping the app's store.
func (c *counter) observe(table string, t *tracker) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t == nil {
		delete(c.observers, table)
		return
	}
	c.observers[table] = t
}

// notify passes a completing write to its table's tracker.
func (c *counter) notify(in *dynamodb.UpdateItemInput, result any) {
	out, ok := result.(*dynamodb.UpdateItemOutput)
	if !ok || out == nil || in.TableName == nil || in.UpdateExpression == nil {
		return
	}
	c.mu.Lock()
	t := c.observers[*in.TableName]
	c.mu.Unlock()
	if t == nil || attrString(out.Attributes, "status") != string(triagetype.Completed) {
		return
	}
	statusSet := false
	for _, ph := range placeholder.FindAllString(*in.UpdateExpression, -1) {
		statusSet = statusSet || in.ExpressionAttributeNames[ph] == "status"
	}
	if !statusSet {
		return // a write to an already completed task, not the completion
	}
	t.completed(attrString(out.Attributes, "id"), finished{
		Priority:  triagetype.Priority(attrString(out.Attributes, "priority")),
		Created:   attrTime(out.Attributes, "created_at"),
		Started:   attrTime(out.Attributes, "started_at"),
		Completed: attrTime(out.Attributes, "completed_at"),
		Key:       attrString(out.Attributes, "idempotency_key"),
	})
}

func attrString(item map[string]ddbtypes.AttributeValue, name string) string {
	if v, ok := item[name].(*ddbtypes.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// attrTime reads a time the SDK's attributevalue package wrote (RFC 3339).
func attrTime(item map[string]ddbtypes.AttributeValue, name string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, attrString(item, name))
	return t
}

// register is an aws.Config APIOptions function.
func (c *counter) register(stack *middleware.Stack) error {
	err := stack.Initialize.Add(middleware.InitializeMiddlewareFunc("BenchCountCalls",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			in.Parameters = askCapacity(in.Parameters)
			if isUncounted(ctx) {
				return next.HandleInitialize(ctx, in)
			}
			tgt := target(in.Parameters)
			ctx = context.WithValue(ctx, targetKey{}, tgt)
			t0 := time.Now()
			out, md, err := next.HandleInitialize(ctx, in)
			st := c.capacity(in.Parameters, out.Result, err)
			st.Calls, st.Nanos = 1, int64(time.Since(t0))
			if rep, ok := consumed(out.Result); ok && err == nil {
				st.Reported = 1
				st.RepWrite, st.RepWriteIndex, st.RepRead = rep.Write, rep.WriteIndex, rep.Read
				st.CmpWrite, st.CmpRead = st.WriteTable+st.WriteIndex, st.Read
			}
			k := opKey{awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx), tgt}
			if err != nil {
				st.Errors = 1
				var ccf *ddbtypes.ConditionalCheckFailedException
				var tce *ddbtypes.TransactionCanceledException
				switch {
				case errors.Is(err, context.Canceled):
					st.Canceled = 1
				case errors.As(err, &ccf), errors.As(err, &tce):
					st.Refused = 1
				}
			} else if up, ok := in.Parameters.(*dynamodb.UpdateItemInput); ok {
				c.notify(up, out.Result)
			}
			c.record(k, st)
			return out, md, err
		}), middleware.After)
	if err != nil {
		return err
	}
	return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("BenchCountAttempts",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			if isUncounted(ctx) {
				return next.HandleFinalize(ctx, in)
			}
			tgt, _ := ctx.Value(targetKey{}).(string)
			c.record(opKey{awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx), tgt}, opStats{Attempts: 1})
			return next.HandleFinalize(ctx, in)
		}), middleware.After)
}

func (c *counter) record(k opKey, st opStats) {
	c.mu.Lock()
	v := c.ops[k]
	v.add(st)
	c.ops[k] = v
	c.mu.Unlock()
}

// snapshot copies the counts so far.
func (c *counter) snapshot() counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(counts, len(c.ops))
	for k, v := range c.ops {
		out[k] = v
	}
	return out
}

// Capacity estimate. The store does not ask for ReturnConsumedCapacity (and
// bench/ leaves the store alone), so units are computed from the items the
// calls carry, with DynamoDB's published rules; the counter also asks
// DynamoDB for its own figure on every call (askCapacity) and keeps both,
// so the two can be compared (group 10). The rules:
//   - item size: attribute name lengths plus value sizes (strings and binary
//     by length, numbers ~1 byte per 2 digits + 1, maps/lists 3 bytes + 1
//     per element);
//   - a write costs ceil(size / 1 KB) units on the table, using the item as
//     written (PutItem, BatchWriteItem) or as returned with
//     ReturnValues=ALL_NEW (UpdateItem; 1 unit when no item comes back, as
//     for DeleteItem); a write refused by its condition still costs 1 unit;
//     transactional writes cost 2x, their index writes too;
//   - a GSI costs one write of the index entry (its keys, the table key,
//     the projected attributes and 100 bytes of overhead, per 1 KB) when an
//     item enters it or leaves it or a projected non-key attribute changes,
//     and two (a delete and a put) when its key changes; nothing otherwise
//     (the counter remembers each item's index entries to tell which);
//   - a strongly consistent GetItem costs ceil(size / 4 KB) read units
//     (at least 1); an eventually consistent read (every GSI Query) half;
//     a Query is charged on the total size of the items it returns;
//     BatchGetItem is a GetItem per key asked for.
//
// Every unit is also charged to the partition key it lands on (keyUnits):
// a table write or read to "table <pk>", an index write to "<index>
// <partition>", a Query to the partition its key condition names.
const (
	writeUnitBytes = 1024
	readUnitBytes  = 4096
)

// keyUse is what one partition key took: write and read units.
type keyUse struct{ W, R float64 }

func (c *counter) capacity(params, result any, err error) opStats {
	var st opStats
	var ccf *ddbtypes.ConditionalCheckFailedException
	refused := errors.As(err, &ccf)
	switch in := params.(type) {
	case *dynamodb.PutItemInput:
		if err != nil {
			if refused {
				st.WriteTable = 1
				c.keyWrite("table "+attrString(in.Item, spec.AttrPK), 1)
			}
			return st
		}
		st.WriteTable, st.WriteIndex = c.putWrite(in.TableName, in.Item, 1)
	case *dynamodb.UpdateItemInput:
		if err != nil {
			if refused {
				st.WriteTable = 1
				c.keyWrite("table "+attrString(in.Key, spec.AttrPK), 1)
			}
			return st
		}
		var after map[string]ddbtypes.AttributeValue
		if out, ok := result.(*dynamodb.UpdateItemOutput); ok && out != nil {
			after = out.Attributes
		}
		size := itemSize(after)
		st.WriteTable = units(size, writeUnitBytes)
		st.WriteIndex = c.indexWritesUpdate(in, after, 1)
		c.keyWrite("table "+attrString(in.Key, spec.AttrPK), st.WriteTable)
	case *dynamodb.DeleteItemInput:
		if err == nil || refused {
			st.WriteTable = 1
			c.keyWrite("table "+attrString(in.Key, spec.AttrPK), 1)
		}
		if err == nil {
			st.WriteIndex = c.deleteEntries(in.TableName, in.Key[spec.AttrPK], 1)
		}
	case *dynamodb.BatchWriteItemInput:
		if err != nil {
			return st
		}
		var left map[string][]ddbtypes.WriteRequest
		if out, ok := result.(*dynamodb.BatchWriteItemOutput); ok && out != nil {
			left = out.UnprocessedItems
		}
		for table, reqs := range in.RequestItems {
			skip := map[string]bool{}
			for _, w := range left[table] {
				switch {
				case w.PutRequest != nil:
					skip[attrString(w.PutRequest.Item, spec.AttrPK)] = true
				case w.DeleteRequest != nil:
					skip[attrString(w.DeleteRequest.Key, spec.AttrPK)] = true
				}
			}
			for _, w := range reqs {
				switch {
				case w.PutRequest != nil && !skip[attrString(w.PutRequest.Item, spec.AttrPK)]:
					t, ix := c.putWrite(aws.String(table), w.PutRequest.Item, 1)
					st.WriteTable += t
					st.WriteIndex += ix
				case w.DeleteRequest != nil && !skip[attrString(w.DeleteRequest.Key, spec.AttrPK)]:
					st.WriteTable++
					c.keyWrite("table "+attrString(w.DeleteRequest.Key, spec.AttrPK), 1)
					st.WriteIndex += c.deleteEntries(aws.String(table), w.DeleteRequest.Key[spec.AttrPK], 1)
				}
			}
		}
	case *dynamodb.TransactWriteItemsInput:
		if err != nil {
			return st
		}
		for _, it := range in.TransactItems {
			switch {
			case it.Put != nil:
				t, ix := c.putWrite(it.Put.TableName, it.Put.Item, 2)
				st.WriteTable += t
				st.WriteIndex += ix
			case it.Update != nil:
				st.WriteTable += 2
				c.keyWrite("table "+attrString(it.Update.Key, spec.AttrPK), 2)
				upd := &dynamodb.UpdateItemInput{TableName: it.Update.TableName, Key: it.Update.Key, UpdateExpression: it.Update.UpdateExpression, ExpressionAttributeNames: it.Update.ExpressionAttributeNames}
				st.WriteIndex += c.indexWritesUpdate(upd, nil, 2)
			case it.Delete != nil:
				st.WriteTable += 2
				c.keyWrite("table "+attrString(it.Delete.Key, spec.AttrPK), 2)
				st.WriteIndex += c.deleteEntries(it.Delete.TableName, it.Delete.Key[spec.AttrPK], 2)
			case it.ConditionCheck != nil:
				st.WriteTable += 2
				c.keyWrite("table "+attrString(it.ConditionCheck.Key, spec.AttrPK), 2)
			}
		}
	case *dynamodb.GetItemInput:
		if err != nil {
			return st
		}
		size := 0
		if out, ok := result.(*dynamodb.GetItemOutput); ok && out != nil {
			size = itemSize(out.Item)
		}
		st.Read = readUnits(size, aws.ToBool(in.ConsistentRead))
		c.keyRead("table "+attrString(in.Key, spec.AttrPK), st.Read)
	case *dynamodb.BatchGetItemInput:
		if err != nil {
			return st
		}
		var out *dynamodb.BatchGetItemOutput
		if o, ok := result.(*dynamodb.BatchGetItemOutput); ok {
			out = o
		}
		for table, ka := range in.RequestItems {
			sizes := map[string]int{}
			left := map[string]bool{}
			if out != nil {
				for _, it := range out.Responses[table] {
					sizes[attrString(it, spec.AttrPK)] = itemSize(it)
				}
				for _, k := range out.UnprocessedKeys[table].Keys {
					left[attrString(k, spec.AttrPK)] = true
				}
			}
			for _, k := range ka.Keys {
				pk := attrString(k, spec.AttrPK)
				if left[pk] {
					continue
				}
				u := readUnits(sizes[pk], aws.ToBool(ka.ConsistentRead))
				st.Read += u
				c.keyRead("table "+pk, u)
			}
		}
	case *dynamodb.QueryInput:
		if err != nil {
			return st
		}
		size := 0
		if out, ok := result.(*dynamodb.QueryOutput); ok && out != nil {
			for _, it := range out.Items {
				size += itemSize(it)
			}
			if len(out.Items) == 0 && out.ScannedCount > 0 {
				// Select=COUNT returns no items; charge 1 KB per item read.
				size = int(out.ScannedCount) * writeUnitBytes
			}
		}
		st.Read = readUnits(size, in.IndexName == nil && aws.ToBool(in.ConsistentRead))
		c.keyRead(c.queryPartition(in), st.Read)
	case *sqs.SendMessageBatchInput:
		st.Entries = int64(len(in.Entries))
	case *sqs.DeleteMessageBatchInput:
		st.Entries = int64(len(in.Entries))
	case *sqs.ReceiveMessageInput:
		if out, ok := result.(*sqs.ReceiveMessageOutput); ok && out != nil {
			st.Entries = int64(len(out.Messages))
			if len(out.Messages) == 0 {
				st.Empty = 1
			}
		}
	}
	return st
}

// putWrite charges a put of item (mult 2 in a transaction): its table
// units to its key, and its index entries replacing whatever it had.
func (c *counter) putWrite(table *string, item map[string]ddbtypes.AttributeValue, mult float64) (tableUnits, indexUnits float64) {
	tableUnits = mult * units(itemSize(item), writeUnitBytes)
	c.keyWrite("table "+attrString(item, spec.AttrPK), tableUnits)
	return tableUnits, c.moveEntries(table, item[spec.AttrPK], item, nil, mult)
}

// units is ceil(size/unit), at least 1.
func units(size, unit int) float64 {
	return math.Max(1, math.Ceil(float64(size)/float64(unit)))
}

// readUnits is the read units of reading size bytes: ceil(size/4 KB), at
// least 1, halved for an eventually consistent read.
func readUnits(size int, consistent bool) float64 {
	u := units(size, readUnitBytes)
	if !consistent {
		u /= 2
	}
	return u
}

// keyCondition finds "name = :value" terms in a key condition expression.
var keyCondition = regexp.MustCompile(`(#?[A-Za-z0-9_]+)\s*=\s*(:[A-Za-z0-9_]+)`)

// queryPartition names the partition a Query reads: "<index> <value>" or
// "table <value>", from the equality on the partition key in its key
// condition ("<index> ?" when the condition cannot be read).
func (c *counter) queryPartition(in *dynamodb.QueryInput) string {
	where, pkName := "table", spec.AttrPK
	if in.IndexName != nil {
		where = *in.IndexName
		for _, ix := range c.indexes {
			if ix.Name == where {
				pkName = ix.PartitionKey
			}
		}
	}
	return where + " " + partitionValue(aws.ToString(in.KeyConditionExpression), in.ExpressionAttributeNames, in.ExpressionAttributeValues, pkName)
}

// partitionValue is the string value a key condition gives attribute pk.
func partitionValue(cond string, names map[string]string, values map[string]ddbtypes.AttributeValue, pk string) string {
	for _, m := range keyCondition.FindAllStringSubmatch(cond, -1) {
		name := m[1]
		if strings.HasPrefix(name, "#") {
			name = names[name]
		}
		if name != pk {
			continue
		}
		if v, ok := values[m[2]].(*ddbtypes.AttributeValueMemberS); ok {
			return v.Value
		}
	}
	return "?"
}

var placeholder = regexp.MustCompile(`#[A-Za-z0-9_]+`)

// indexWritesUpdate compares the item's index entries after the update
// (from the item returned with ALL_NEW) with those it had. An update that
// returns no item (control and counter items) changes entries only by the
// index keys it names. mult is 2 in a transaction.
func (c *counter) indexWritesUpdate(in *dynamodb.UpdateItemInput, after map[string]ddbtypes.AttributeValue, mult float64) float64 {
	if in.UpdateExpression == nil {
		return 0
	}
	changed := map[string]bool{}
	for _, ph := range placeholder.FindAllString(*in.UpdateExpression, -1) {
		if name, ok := in.ExpressionAttributeNames[ph]; ok {
			changed[name] = true
		}
	}
	if after == nil {
		// Counter items set their index keys with if_not_exists: the
		// first such write adds the entry, later ones change nothing. The
		// partition the entry lands on is not in the update's names.
		added := map[string]string{}
		for _, ix := range c.indexes {
			if changed[ix.PartitionKey] && changed[ix.SortKey] {
				added[ix.Name] = "set"
			}
		}
		if len(added) == 0 {
			return 0
		}
		key := entryItem(in.TableName, in.Key[spec.AttrPK])
		c.entriesMu.Lock()
		defer c.entriesMu.Unlock()
		if c.entries[key] != nil {
			return 0
		}
		c.entries[key] = added
		return mult * float64(len(added))
	}
	return c.moveEntries(in.TableName, in.Key[spec.AttrPK], after, changed, mult)
}

// moveEntries records item's index entries and returns the index writes
// that took it from its previous entries to these: 1 to add or remove an
// entry, 2 to move one, 1 to rewrite one whose projected attributes
// changed (names in changed), per index-entry write unit, times mult.
func (c *counter) moveEntries(table *string, pk ddbtypes.AttributeValue, after map[string]ddbtypes.AttributeValue, changed map[string]bool, mult float64) float64 {
	key := entryItem(table, pk)
	now := map[string]string{}
	sizes := map[string]int{}
	for _, ix := range c.indexes {
		p, sk := attrString(after, ix.PartitionKey), attrString(after, ix.SortKey)
		if p == "" || sk == "" {
			continue
		}
		now[ix.Name] = p + "\x00" + sk
		sizes[ix.Name] = entrySize(ix, after)
	}
	c.entriesMu.Lock()
	before := c.entries[key]
	if len(now) == 0 {
		delete(c.entries, key)
	} else {
		c.entries[key] = now
	}
	c.entriesMu.Unlock()
	w := 0.0
	part := func(entry string) string { p, _, _ := strings.Cut(entry, "\x00"); return p }
	for _, ix := range c.indexes {
		b, had := before[ix.Name]
		a, has := now[ix.Name]
		u := mult * units(sizes[ix.Name], writeUnitBytes)
		switch {
		case had && has && a != b:
			w += 2 * u
			c.keyWrite(ix.Name+" "+part(b), u)
			c.keyWrite(ix.Name+" "+part(a), u)
		case had:
			if !has {
				w += u
				c.keyWrite(ix.Name+" "+part(b), u)
			} else if projectedChange(ix, changed) {
				w += u
				c.keyWrite(ix.Name+" "+part(a), u)
			}
		case has:
			w += u
			c.keyWrite(ix.Name+" "+part(a), u)
		}
	}
	return w
}

// keyWrite adds u write units to partition key k.
func (c *counter) keyWrite(k string, u float64) {
	c.entriesMu.Lock()
	ku := c.keyUnits[k]
	ku.W += u
	c.keyUnits[k] = ku
	c.entriesMu.Unlock()
}

// keyRead adds u read units to partition key k.
func (c *counter) keyRead(k string, u float64) {
	c.entriesMu.Lock()
	ku := c.keyUnits[k]
	ku.R += u
	c.keyUnits[k] = ku
	c.entriesMu.Unlock()
}

// keySnapshot copies the units per partition key so far.
func (c *counter) keySnapshot() map[string]keyUse {
	c.entriesMu.Lock()
	defer c.entriesMu.Unlock()
	out := make(map[string]keyUse, len(c.keyUnits))
	for k, v := range c.keyUnits {
		out[k] = v
	}
	return out
}

// forget drops what the counter remembers of table's items (their index
// entries) once the table is gone, so a long run's memory stays bounded.
func (c *counter) forget(table string) {
	prefix := table + "\x00"
	c.entriesMu.Lock()
	defer c.entriesMu.Unlock()
	for k := range c.entries {
		if strings.HasPrefix(k, prefix) {
			delete(c.entries, k)
		}
	}
}

// deleteEntries forgets a deleted item's entries and returns their removal
// writes (mult 2 in a transaction), each charged to its partition.
func (c *counter) deleteEntries(table *string, pk ddbtypes.AttributeValue, mult float64) float64 {
	key := entryItem(table, pk)
	c.entriesMu.Lock()
	had := c.entries[key]
	delete(c.entries, key)
	c.entriesMu.Unlock()
	for name, entry := range had {
		p, _, _ := strings.Cut(entry, "\x00")
		c.keyWrite(name+" "+p, mult)
	}
	return mult * float64(len(had))
}

func entryItem(table *string, pk ddbtypes.AttributeValue) string {
	s, _ := pk.(*ddbtypes.AttributeValueMemberS)
	if s == nil || table == nil {
		return ""
	}
	return *table + "\x00" + s.Value
}

// entrySize is the size of an index entry: the table key, the index keys,
// the projected attributes, and DynamoDB's 100 bytes of overhead.
func entrySize(ix spec.Index, item map[string]ddbtypes.AttributeValue) int {
	if ix.Projection == "" || ix.Projection == "ALL" {
		return itemSize(item) + 100
	}
	keep := map[string]ddbtypes.AttributeValue{}
	for _, a := range append([]string{spec.AttrPK, ix.PartitionKey, ix.SortKey}, ix.NonKeyAttributes...) {
		if v, ok := item[a]; ok {
			keep[a] = v
		}
	}
	return itemSize(keep) + 100
}

func projectedChange(ix spec.Index, changed map[string]bool) bool {
	if ix.Projection == "" || ix.Projection == "ALL" {
		return len(changed) > 0
	}
	for _, a := range ix.NonKeyAttributes {
		if changed[a] {
			return true
		}
	}
	return false
}

// itemSize estimates an item's size the way DynamoDB counts it.
func itemSize(item map[string]ddbtypes.AttributeValue) int { return store.ItemSize(item) }
