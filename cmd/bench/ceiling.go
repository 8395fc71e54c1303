package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Ceiling is the raw rate of the emulated primitives the design is built
// from, measured at a fixed concurrency before anything else runs.
type Ceiling struct {
	Concurrency int           `json:"concurrency"`
	Items       int           `json:"ddb_items"`
	Ops         []CeilingRate `json:"operations"`
}

// CeilingRate is one primitive's measured rate.
type CeilingRate struct {
	Name       string  `json:"name"`
	Calls      int     `json:"calls"`
	Seconds    float64 `json:"seconds"`
	PerSecond  float64 `json:"calls_per_second"`
	Entries    int     `json:"entries,omitempty"` // messages sent/received/deleted by batch calls
	EntriesSec float64 `json:"entries_per_second,omitempty"`
	Note       string  `json:"note"`
}

// Names of the ceiling primitives (also the keys the bound uses).
const (
	ceilCondWrite      = "DynamoDB UpdateItem (conditional)"
	ceilCondWritePlain = "DynamoDB UpdateItem (conditional, no GSI)"
	ceilGetItem        = "DynamoDB GetItem (consistent)"
	ceilSend           = "SQS SendMessage"
	ceilSendBatch      = "SQS SendMessageBatch (10)"
	ceilReceive        = "SQS ReceiveMessage (max 10)"
	ceilDeleteBatch    = "SQS DeleteMessageBatch (10)"
)

func (c Ceiling) rate(name string) float64 {
	for _, o := range c.Ops {
		if o.Name == name {
			return o.PerSecond
		}
	}
	return 0
}

// hammer runs op from workers goroutines until n calls were made, d passed,
// an op reports it has nothing left, or an op fails. It returns the number
// of calls made and the time they took.
func hammer(ctx context.Context, workers, n int, d time.Duration, op func(ctx context.Context, worker int) (more bool, err error)) (int, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, d+30*time.Second)
	defer cancel()
	var issued, made atomic.Int64
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && time.Now().Before(deadline) && issued.Add(1) <= int64(n) {
				more, err := op(ctx, w)
				if err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					return
				}
				made.Add(1)
				if !more {
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return int(made.Load()), elapsed, firstErr
	}
	return int(made.Load()), elapsed, ctx.Err()
}

func ceilingRate(name string, calls int, d time.Duration, entries int, note string) CeilingRate {
	r := CeilingRate{Name: name, Calls: calls, Seconds: round(d.Seconds(), 3), PerSecond: round(rate(calls, d), 1), Note: note}
	if entries > 0 {
		r.Entries, r.EntriesSec = entries, round(rate(entries, d), 1)
	}
	return r
}

// measureCeiling measures the emulators' raw rates on a fresh deployment.
func measureCeiling(ctx context.Context, cl clients, o options) (Ceiling, error) {
	d, err := deploy(ctx, cl, "bench-ceiling")
	if err != nil {
		return Ceiling{}, err
	}
	defer func() { _ = d.teardown(context.WithoutCancel(ctx), cl) }()
	c := Ceiling{Concurrency: o.Concurrency, Items: o.CeilingItems}

	// Task-shaped items (the store's attributes and both GSIs' keys).
	if err := ceilingWrites(ctx, cl, o, &c, d.table(), ceilCondWrite, ceilingItem(d.app.Store),
		fmt.Sprintf("task-shaped items in the task table (2 GSIs); SET status, version IF version matches (no index key changes); %d items", o.CeilingItems),
		o.Concurrency, 4*o.Concurrency); err != nil {
		return c, err
	}
	cursor := make([]int, o.Concurrency)
	calls, el, err := hammer(ctx, o.Concurrency, o.CeilingN, o.CeilingDur, func(ctx context.Context, w int) (bool, error) {
		i := (w + o.Concurrency*cursor[w]) % o.CeilingItems
		cursor[w]++
		_, err := cl.ddb.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: aws.String(d.table()), ConsistentRead: aws.Bool(true),
			Key: map[string]ddbtypes.AttributeValue{spec.AttrPK: str(ceilingPK(i))},
		})
		if err != nil {
			return false, fmt.Errorf("read ceiling item %d: %w", i, err)
		}
		return true, nil
	})
	if err != nil {
		return c, err
	}
	c.Ops = append(c.Ops, ceilingRate(ceilGetItem, calls, el, 0, "the same items, strongly consistent"))

	// The same writes on a bare table (key only, no GSI), for comparison.
	plain := d.table() + "-plain"
	if err := createPlainTable(ctx, cl, plain); err != nil {
		return c, err
	}
	defer func() {
		_, _ = cl.ddb.DeleteTable(context.WithoutCancel(ctx), &dynamodb.DeleteTableInput{TableName: aws.String(plain)})
	}()
	bare := func(i int) (map[string]ddbtypes.AttributeValue, error) {
		return map[string]ddbtypes.AttributeValue{spec.AttrPK: str(ceilingPK(i)), "status": str(string(triagetype.Queued)), "version": num(1)}, nil
	}
	if err := ceilingWrites(ctx, cl, o, &c, plain, ceilCondWritePlain, bare,
		"bare items (key, status, version) in a table with no GSI; not used for the bound", o.Concurrency); err != nil {
		return c, err
	}

	if err := ceilingSQS(ctx, cl, o, &c, d); err != nil {
		return c, err
	}
	return c, nil
}

// ceilingWrites creates CeilingItems items in table, then measures
// conditional writes to them at each concurrency in concs (the first named
// name, the others name plus their concurrency).
func ceilingWrites(ctx context.Context, cl clients, o options, c *Ceiling, table, name string, mk func(int) (map[string]ddbtypes.AttributeValue, error), note string, concs ...int) error {
	versions := make([]int64, o.CeilingItems)
	var next atomic.Int64
	_, _, err := hammer(ctx, o.Concurrency, o.CeilingItems, time.Hour, func(ctx context.Context, _ int) (bool, error) {
		i := int(next.Add(1) - 1)
		if i >= o.CeilingItems {
			return false, nil
		}
		item, err := mk(i)
		if err != nil {
			return false, err
		}
		if _, err := cl.ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
			return false, fmt.Errorf("create item %d in %s: %w", i, table, err)
		}
		versions[i] = 1
		return true, nil
	})
	if err != nil {
		return err
	}
	statuses := []triagetype.Status{triagetype.Queued, triagetype.Executing} // version 1 is queued
	for k, conc := range concs {
		conc = min(conc, o.CeilingItems)
		// Worker w owns the items i with i % conc == w, so its conditions hold.
		cursor := make([]int, conc)
		calls, el, err := hammer(ctx, conc, o.CeilingN, o.CeilingDur, func(ctx context.Context, w int) (bool, error) {
			owned := (o.CeilingItems - w + conc - 1) / conc
			i := w + conc*(cursor[w]%owned)
			cursor[w]++
			v := versions[i]
			st := statuses[v%2]
			_, err := cl.ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName:                 aws.String(table),
				Key:                       map[string]ddbtypes.AttributeValue{spec.AttrPK: str(ceilingPK(i))},
				UpdateExpression:          aws.String("SET #s = :s, #v = :nv"),
				ConditionExpression:       aws.String("#v = :v"),
				ExpressionAttributeNames:  map[string]string{"#s": "status", "#v": "version"},
				ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":s": str(string(st)), ":v": num(v), ":nv": num(v + 1)},
			})
			if err != nil {
				return false, fmt.Errorf("conditional write of item %d in %s: %w", i, table, err)
			}
			versions[i] = v + 1
			return true, nil
		})
		if err != nil {
			return err
		}
		n, how := name, note
		if k > 0 {
			n, how = fmt.Sprintf("%s at concurrency %d", name, conc), "the same items and writes; not used for the bound (shows how the emulator scales with calls in flight)"
		}
		c.Ops = append(c.Ops, ceilingRate(n, calls, el, 0, how))
	}
	return nil
}

func createPlainTable(ctx context.Context, cl clients, name string) error {
	_, err := cl.ddb.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String(spec.AttrPK), KeyType: ddbtypes.KeyTypeHash}},
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String(spec.AttrPK), AttributeType: ddbtypes.ScalarAttributeTypeS}},
	})
	if err != nil {
		return fmt.Errorf("create table %s: %w", name, err)
	}
	if err := dynamodb.NewTableExistsWaiter(cl.ddb).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, time.Minute); err != nil {
		return fmt.Errorf("wait for table %s: %w", name, err)
	}
	return nil
}

// ceilingSQS measures SendMessage on the high queue, then runs cycles on
// the medium queue: fill it with CeilingFill messages in batches of ten,
// receive them all in batches of ten, delete them all in batches of ten.
// Cycles keep the queue's depth near what the scenarios see: fauxqs looks
// at every in-flight message on each receive, so a queue holding all the
// receipts of a long test would understate the receive rate.
func ceilingSQS(ctx context.Context, cl clients, o options, c *Ceiling, d *deployment) error {
	body := aws.String(`{"id":"01KAR4Q8ZJ6D6B0R4R8G1R2N3M","v":1,"p":"medium"}`)
	high := aws.String(d.res.QueueURLs[triagetype.High])
	calls, el, err := hammer(ctx, o.Concurrency, o.CeilingN, o.CeilingDur, func(ctx context.Context, _ int) (bool, error) {
		if _, err := cl.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: high, MessageBody: body}); err != nil {
			return false, fmt.Errorf("send: %w", err)
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	c.Ops = append(c.Ops, ceilingRate(ceilSend, calls, el, 0, "one 50-byte message per call"))

	qurl := aws.String(d.res.QueueURLs[triagetype.Medium])
	entries := make([]sqstypes.SendMessageBatchRequestEntry, 10)
	for j := range entries {
		entries[j] = sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(j)), MessageBody: body}
	}
	var send, recv, del struct {
		calls, msgs int
		took        time.Duration
	}
	cycles := 0
	for start := time.Now(); time.Since(start) < 2*o.CeilingDur && send.calls < o.CeilingN && cycles < 100; cycles++ {
		calls, el, err := hammer(ctx, o.Concurrency, o.CeilingFill/10, time.Hour, func(ctx context.Context, _ int) (bool, error) {
			out, err := cl.sqs.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: qurl, Entries: entries})
			if err != nil {
				return false, fmt.Errorf("send batch: %w", err)
			}
			if len(out.Failed) > 0 {
				return false, fmt.Errorf("send batch: %d entries failed: %s", len(out.Failed), aws.ToString(out.Failed[0].Message))
			}
			return true, nil
		})
		if err != nil {
			return err
		}
		send.calls, send.msgs, send.took = send.calls+calls, send.msgs+10*calls, send.took+el

		var mu sync.Mutex
		var receipts []string
		calls, el, err = hammer(ctx, o.Concurrency, o.CeilingFill, time.Hour, func(ctx context.Context, _ int) (bool, error) {
			out, err := cl.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: qurl, MaxNumberOfMessages: 10, VisibilityTimeout: 600})
			if err != nil {
				return false, fmt.Errorf("receive: %w", err)
			}
			mu.Lock()
			for _, m := range out.Messages {
				receipts = append(receipts, aws.ToString(m.ReceiptHandle))
			}
			mu.Unlock()
			return len(out.Messages) > 0, nil
		})
		if err != nil {
			return err
		}
		recv.calls, recv.msgs, recv.took = recv.calls+calls, recv.msgs+len(receipts), recv.took+el

		var taken atomic.Int64
		_, el, err = hammer(ctx, o.Concurrency, o.CeilingFill, time.Hour, func(ctx context.Context, _ int) (bool, error) {
			end := int(taken.Add(10))
			if end-10 >= len(receipts) {
				return false, nil
			}
			chunk := receipts[end-10 : min(end, len(receipts))]
			es := make([]sqstypes.DeleteMessageBatchRequestEntry, len(chunk))
			for j, r := range chunk {
				es[j] = sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(j)), ReceiptHandle: aws.String(r)}
			}
			out, err := cl.sqs.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: qurl, Entries: es})
			if err != nil {
				return false, fmt.Errorf("delete batch: %w", err)
			}
			if len(out.Failed) > 0 {
				return false, fmt.Errorf("delete batch: %d entries failed: %s", len(out.Failed), aws.ToString(out.Failed[0].Message))
			}
			mu.Lock()
			del.calls++
			del.msgs += len(chunk)
			mu.Unlock()
			return true, nil
		})
		if err != nil {
			return err
		}
		// A worker's last turn finds nothing left and makes no call: count calls made.
		del.took += el
	}
	how := fmt.Sprintf("%d cycles of: fill %d, receive all, delete all", cycles, o.CeilingFill)
	c.Ops = append(c.Ops,
		ceilingRate(ceilSendBatch, send.calls, send.took, send.msgs, how),
		ceilingRate(ceilReceive, recv.calls, recv.took, recv.msgs, how+" (short poll, visibility 600 s)"),
		ceilingRate(ceilDeleteBatch, del.calls, del.took, del.msgs, how),
	)
	return nil
}

func ceilingPK(i int) string { return fmt.Sprintf("TASK#ceiling-%06d", i) }

// ceilingItem makes task items as the store writes them (the task's
// attributes, its key and its index attributes), keyed for the ceiling run.
func ceilingItem(st *store.Store) func(int) (map[string]ddbtypes.AttributeValue, error) {
	return func(i int) (map[string]ddbtypes.AttributeValue, error) {
		r := task.Request{Type: "noop", Priority: triagetype.Medium}
		av, err := st.Item(r.NewTask(time.Now().UTC(), 15*time.Minute))
		if err != nil {
			return nil, fmt.Errorf("ceiling item: %w", err)
		}
		av[spec.AttrPK] = str(ceilingPK(i))
		return av, nil
	}
}

func str(s string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: s} }
func num(n int64) ddbtypes.AttributeValue {
	return &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}
