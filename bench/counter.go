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

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"

	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
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
	default:
		return ""
	}
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
	Nanos    int64 // time spent in the calls, retries included
	// Capacity estimates (see capacity): DynamoDB write and read units.
	WriteTable float64 // write units on the base table
	WriteIndex float64 // write units on global secondary indexes
	Read       float64 // read units
}

func (s *opStats) add(o opStats) {
	s.Calls += o.Calls
	s.Attempts += o.Attempts
	s.Errors += o.Errors
	s.Canceled += o.Canceled
	s.Refused += o.Refused
	s.Entries += o.Entries
	s.Nanos += o.Nanos
	s.WriteTable += o.WriteTable
	s.WriteIndex += o.WriteIndex
	s.Read += o.Read
}

func (s *opStats) sub(o opStats) {
	s.Calls -= o.Calls
	s.Attempts -= o.Attempts
	s.Errors -= o.Errors
	s.Canceled -= o.Canceled
	s.Refused -= o.Refused
	s.Entries -= o.Entries
	s.Nanos -= o.Nanos
	s.WriteTable -= o.WriteTable
	s.WriteIndex -= o.WriteIndex
	s.Read -= o.Read
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

// Service IDs as the SDK names them.
const (
	svcDynamoDB = "DynamoDB"
	svcSQS      = "SQS"
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
	// keyUnits adds up the write units each partition key took: "table
	// <pk>" for the table, "<index> <partition>" for an index.
	keyUnits map[string]float64

	mu        sync.Mutex
	ops       counts
	observers map[string]*tracker
}

func newCounter(indexes []spec.Index) *counter {
	return &counter{indexes: indexes, ops: counts{}, observers: map[string]*tracker{}, entries: map[string]map[string]string{}, keyUnits: map[string]float64{}}
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
	if t == nil || attrString(out.Attributes, "status") != string(task.Completed) {
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
		Priority:  task.Priority(attrString(out.Attributes, "priority")),
		Created:   attrTime(out.Attributes, "created_at"),
		Started:   attrTime(out.Attributes, "started_at"),
		Completed: attrTime(out.Attributes, "completed_at"),
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
			tgt := target(in.Parameters)
			ctx = context.WithValue(ctx, targetKey{}, tgt)
			t0 := time.Now()
			out, md, err := next.HandleInitialize(ctx, in)
			st := c.capacity(in.Parameters, out.Result, err)
			st.Calls, st.Nanos = 1, int64(time.Since(t0))
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

// Capacity estimate. The store cannot ask for ReturnConsumedCapacity without
// changes outside bench/, so units are computed from the items the calls
// carry, with DynamoDB's published rules:
//   - item size: attribute name lengths plus value sizes (strings and binary
//     by length, numbers ~1 byte per 2 digits + 1, maps/lists 3 bytes + 1
//     per element);
//   - a write costs ceil(size / 1 KB) units on the table, using the item as
//     written (PutItem) or as returned with ReturnValues=ALL_NEW (UpdateItem;
//     1 unit when no item comes back, as for DeleteItem); a write refused by
//     its condition still costs 1 unit; transactional writes cost 2x;
//   - a GSI costs one write of the index entry (its keys, the table key,
//     the projected attributes and 100 bytes of overhead, per 1 KB) when an
//     item enters it or leaves it or a projected non-key attribute changes,
//     and two (a delete and a put) when its key changes; nothing otherwise
//     (the counter remembers each item's index entries to tell which);
//   - a strongly consistent GetItem costs ceil(size / 4 KB) read units
//     (at least 1); an eventually consistent read (every GSI Query) half;
//     a Query is charged on the total size of the items it returns.
const (
	writeUnitBytes = 1024
	readUnitBytes  = 4096
)

func (c *counter) capacity(params, result any, err error) opStats {
	var st opStats
	var ccf *ddbtypes.ConditionalCheckFailedException
	refused := errors.As(err, &ccf)
	switch in := params.(type) {
	case *dynamodb.PutItemInput:
		if err != nil {
			if refused {
				st.WriteTable = 1
			}
			return st
		}
		size := itemSize(in.Item)
		st.WriteTable = units(size, writeUnitBytes)
		st.WriteIndex = c.indexWritesPut(in.TableName, in.Item, size)
		c.keyWrite("table "+attrString(in.Item, spec.AttrPK), st.WriteTable)
	case *dynamodb.UpdateItemInput:
		if err != nil {
			if refused {
				st.WriteTable = 1
			}
			return st
		}
		var after map[string]ddbtypes.AttributeValue
		if out, ok := result.(*dynamodb.UpdateItemOutput); ok && out != nil {
			after = out.Attributes
		}
		size := itemSize(after)
		st.WriteTable = units(size, writeUnitBytes)
		st.WriteIndex = c.indexWritesUpdate(in, after, size)
		c.keyWrite("table "+attrString(in.Key, spec.AttrPK), st.WriteTable)
	case *dynamodb.DeleteItemInput:
		if err == nil || refused {
			st.WriteTable = 1
		}
		if err == nil {
			st.WriteIndex = c.deleteEntries(in.TableName, in.Key[spec.AttrPK])
		}
	case *dynamodb.TransactWriteItemsInput:
		if err != nil {
			return st
		}
		for _, it := range in.TransactItems {
			switch {
			case it.Put != nil:
				size := itemSize(it.Put.Item)
				st.WriteTable += 2 * units(size, writeUnitBytes)
				c.keyWrite("table "+attrString(it.Put.Item, spec.AttrPK), 2*units(size, writeUnitBytes))
				st.WriteIndex += 2 * c.indexWritesPut(it.Put.TableName, it.Put.Item, size)
			case it.Update != nil:
				st.WriteTable += 2
				c.keyWrite("table "+attrString(it.Update.Key, spec.AttrPK), 2)
				upd := &dynamodb.UpdateItemInput{TableName: it.Update.TableName, Key: it.Update.Key, UpdateExpression: it.Update.UpdateExpression, ExpressionAttributeNames: it.Update.ExpressionAttributeNames}
				st.WriteIndex += 2 * c.indexWritesUpdate(upd, nil, 0)
			case it.Delete != nil, it.ConditionCheck != nil:
				st.WriteTable += 2
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
		st.Read = units(size, readUnitBytes)
		if in.ConsistentRead == nil || !*in.ConsistentRead {
			st.Read /= 2
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
		st.Read = units(size, readUnitBytes)
		if in.IndexName != nil || in.ConsistentRead == nil || !*in.ConsistentRead {
			st.Read /= 2
		}
	case *sqs.SendMessageBatchInput:
		st.Entries = int64(len(in.Entries))
	case *sqs.DeleteMessageBatchInput:
		st.Entries = int64(len(in.Entries))
	case *sqs.ReceiveMessageInput:
		if out, ok := result.(*sqs.ReceiveMessageOutput); ok && out != nil {
			st.Entries = int64(len(out.Messages))
		}
	}
	return st
}

// units is ceil(size/unit), at least 1.
func units(size, unit int) float64 {
	return math.Max(1, math.Ceil(float64(size)/float64(unit)))
}

// indexWritesPut: the item's entries replace whatever entries it had.
func (c *counter) indexWritesPut(table *string, item map[string]ddbtypes.AttributeValue, _ int) float64 {
	return c.moveEntries(table, item[spec.AttrPK], item, nil)
}

var placeholder = regexp.MustCompile(`#[A-Za-z0-9_]+`)

// isTask reports whether a key is a task item's ("TASK#<id>").
func isTask(key map[string]ddbtypes.AttributeValue) bool {
	return strings.HasPrefix(attrString(key, spec.AttrPK), "TASK#")
}

// indexWritesUpdate compares the item's index entries after the update
// (from the item returned with ALL_NEW) with those it had. An update that
// returns no item (control and counter items) changes entries only by the
// index keys it names.
func (c *counter) indexWritesUpdate(in *dynamodb.UpdateItemInput, after map[string]ddbtypes.AttributeValue, _ int) float64 {
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
		// first such write adds the entry, later ones change nothing.
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
		return float64(len(added))
	}
	return c.moveEntries(in.TableName, in.Key[spec.AttrPK], after, changed)
}

// moveEntries records item's index entries and returns the index writes
// that took it from its previous entries to these: 1 to add or remove an
// entry, 2 to move one, 1 to rewrite one whose projected attributes
// changed (names in changed), per index-entry write unit.
func (c *counter) moveEntries(table *string, pk ddbtypes.AttributeValue, after map[string]ddbtypes.AttributeValue, changed map[string]bool) float64 {
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
		u := units(sizes[ix.Name], writeUnitBytes)
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
	c.keyUnits[k] += u
	c.entriesMu.Unlock()
}

// keySnapshot copies the write units per partition key so far.
func (c *counter) keySnapshot() map[string]float64 {
	c.entriesMu.Lock()
	defer c.entriesMu.Unlock()
	out := make(map[string]float64, len(c.keyUnits))
	for k, v := range c.keyUnits {
		out[k] = v
	}
	return out
}

// deleteEntries forgets a deleted item's entries and returns their removal writes.
func (c *counter) deleteEntries(table *string, pk ddbtypes.AttributeValue) float64 {
	key := entryItem(table, pk)
	c.entriesMu.Lock()
	defer c.entriesMu.Unlock()
	n := len(c.entries[key])
	delete(c.entries, key)
	return float64(n)
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
