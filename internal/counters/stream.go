package counters

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/triagehq/triage/internal/spec"
)

// Streams is the part of the DynamoDB Streams client the Poller uses.
type Streams interface {
	DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error)
	GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error)
}

// TableDescriber finds a table's stream.
type TableDescriber interface {
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

// Poller reads the table's stream itself and applies it: what a Lambda
// trigger does in AWS, for `triage dev`, tests and the bench. Each shard
// is checkpointed in the counters' own transactions, so a restarted
// Poller resumes after the last record it applied. A batch that fails
// (the counters' write, or publishing its events: see Keeper.Publish) is
// read again from the same iterator on the next pass.
type Poller struct {
	Keeper  *Keeper
	Tables  TableDescriber
	Streams Streams
	// Every is the pause after a pass that found no records (250 ms).
	Every time.Duration
	// Window, if set, gathers each shard's records for up to Window (or
	// until spec.StreamBatchSize of them) before applying them, as the
	// Lambda trigger's batching window does (spec.StreamBatchWindow):
	// bigger runs, fewer counter writes, and counters and events that lag
	// by up to Window. Zero applies every read at once.
	Window time.Duration
	Logger *slog.Logger
}

// gathered is a shard's records read and not applied yet (Window).
type gathered struct {
	from  *string // the iterator the first of them was read from
	recs  []streamtypes.Record
	since time.Time
}

// Run polls until ctx ends.
func (p *Poller) Run(ctx context.Context) error {
	if p.Every <= 0 {
		p.Every = 250 * time.Millisecond
	}
	log := p.logger()
	// Finding the stream is retried like any read of it: a poller that
	// gave up on one failed DescribeTable (DynamoDB Local under load)
	// would leave the counters and the events still for good.
	var dt *dynamodb.DescribeTableOutput
	for {
		var err error
		dt, err = p.Tables.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &p.Keeper.table})
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("find the stream of table %s: %w", p.Keeper.table, err)
		}
		log.Warn("counters: finding the table's stream failed; trying again", "table", p.Keeper.table, "error", err)
		sleepCtx(ctx, 10*p.Every)
	}
	arn := aws.ToString(dt.Table.LatestStreamArn)
	if arn == "" {
		return fmt.Errorf("table %s has no stream: /stats counters need one (NEW_AND_OLD_IMAGES)", p.Keeper.table)
	}
	iters := map[string]*string{} // open shard -> next iterator
	done := map[string]bool{}     // closed shards read to their end
	held := map[string]*gathered{}
	for ctx.Err() == nil {
		if err := p.discover(ctx, arn, iters, done); err != nil && ctx.Err() == nil {
			log.Warn("counters: stream discovery failed", "error", err)
			sleepCtx(ctx, 10*p.Every)
		}
		got := 0
		for shard, it := range iters {
			if held[shard] == nil {
				held[shard] = &gathered{}
			}
			n, next, err := p.pass(ctx, shard, it, held[shard])
			if err != nil {
				if ctx.Err() == nil {
					log.Warn("counters: stream shard read failed", "shard", shard, "error", err)
				}
				iters[shard] = next // to read again what failed
				if lostIterator(err) {
					// The iterator is past use (expired, or its position
					// trimmed: DynamoDB Local answers a TRIM_HORIZON
					// iterator so after a while under load). The next
					// discover makes a new one from the shard's
					// checkpoint: what was applied is skipped by its
					// guard, so a record is never counted twice.
					delete(iters, shard)
					delete(held, shard)
				}
				continue
			}
			got += n
			if next == nil {
				delete(iters, shard)
				delete(held, shard)
				done[shard] = true
			} else {
				iters[shard] = next
			}
		}
		if got == 0 {
			sleepCtx(ctx, p.Every)
		}
	}
	return nil
}

func (p *Poller) discover(ctx context.Context, arn string, iters map[string]*string, done map[string]bool) error {
	in := &dynamodbstreams.DescribeStreamInput{StreamArn: &arn}
	listed := map[string]bool{} // parents are listed before their children
	for {
		out, err := p.Streams.DescribeStream(ctx, in)
		if err != nil {
			return fmt.Errorf("describe stream: %w", err)
		}
		for _, sh := range out.StreamDescription.Shards {
			listed[aws.ToString(sh.ShardId)] = true
		}
		for _, sh := range out.StreamDescription.Shards {
			id := aws.ToString(sh.ShardId)
			if _, open := iters[id]; open || done[id] {
				continue
			}
			// A child shard holds an item's later records: it is read once
			// its parent is read to its end, so each task's changes (and
			// their events) are applied in the order they happened.
			if parent := aws.ToString(sh.ParentShardId); parent != "" && listed[parent] && !done[parent] {
				continue
			}
			gi := &dynamodbstreams.GetShardIteratorInput{StreamArn: &arn, ShardId: &id, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon}
			if seq, err := p.Keeper.checkpoint(ctx, shardGuard(id)); err != nil {
				return err
			} else if seq != "" {
				gi.ShardIteratorType, gi.SequenceNumber = streamtypes.ShardIteratorTypeAfterSequenceNumber, aws.String(seq)
			}
			it, err := p.Streams.GetShardIterator(ctx, gi)
			var trimmed *streamtypes.TrimmedDataAccessException
			if errors.As(err, &trimmed) && gi.SequenceNumber != nil {
				// The checkpoint's record is past the stream's retention
				// (24 hours in AWS): what followed it up to the oldest
				// record kept is lost to the counters and events. Read from
				// the oldest record kept.
				p.logger().Error("counters: the stream no longer holds the records after this shard's checkpoint; reading from its oldest record", "shard", id, "checkpoint", aws.ToString(gi.SequenceNumber))
				gi.ShardIteratorType, gi.SequenceNumber = streamtypes.ShardIteratorTypeTrimHorizon, nil
				it, err = p.Streams.GetShardIterator(ctx, gi)
			}
			if err != nil {
				return fmt.Errorf("iterator of shard %s (%s %s): %w", id, gi.ShardIteratorType, aws.ToString(gi.SequenceNumber), err)
			}
			iters[id] = it.ShardIterator
		}
		if out.StreamDescription.LastEvaluatedShardId == nil {
			return nil
		}
		in.ExclusiveStartShardId = out.StreamDescription.LastEvaluatedShardId
	}
}

// lostIterator reports whether err means a shard iterator can no longer
// be read (expired, or its position trimmed), so a new one must be made.
func lostIterator(err error) bool {
	var trimmed *streamtypes.TrimmedDataAccessException
	var expired *streamtypes.ExpiredIteratorException
	return errors.As(err, &trimmed) || errors.As(err, &expired)
}

func (p *Poller) logger() *slog.Logger {
	if p.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return p.Logger
}

// pass reads one batch of a shard and, unless it is gathering them
// (Window), applies it with the records gathered before. It returns the
// records read, the shard's next iterator (nil at a closed shard's end)
// and, on an error, the iterator to read again from: what failed to apply
// is read again whole.
func (p *Poller) pass(ctx context.Context, shard string, it *string, g *gathered) (int, *string, error) {
	out, err := p.Streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it, Limit: aws.Int32(spec.StreamBatchSize)})
	if err != nil {
		if len(g.recs) > 0 {
			it = g.from
		}
		*g = gathered{}
		return 0, it, err
	}
	if len(g.recs) == 0 {
		g.from, g.since = it, time.Now()
	}
	g.recs = append(g.recs, out.Records...)
	if len(g.recs) == 0 || p.Window > 0 && len(g.recs) < spec.StreamBatchSize && out.NextShardIterator != nil && time.Since(g.since) < p.Window {
		return len(out.Records), out.NextShardIterator, nil
	}
	from, recs := g.from, g.recs
	*g = gathered{}
	if err := p.apply(ctx, shard, recs); err != nil {
		return 0, from, err
	}
	return len(out.Records), out.NextShardIterator, nil
}

// apply applies records of shard.
func (p *Poller) apply(ctx context.Context, shard string, recs []streamtypes.Record) error {
	var changes []Change
	for _, r := range recs {
		c, ok, err := changeFromStream(r)
		if err != nil {
			return err
		}
		if ok {
			changes = append(changes, c)
		}
	}
	guard := func(first, last string) Guard { return Guard{Key: shardGuard(shard), AfterSeq: true} }
	return p.Keeper.Apply(ctx, changes, guard)
}

func shardGuard(shard string) string { return "shard:" + shard }

// checkpoint is the sequence number of the last record applied under guard
// key, exactly as the stream gave it ("" if none), so that it can be given
// back to GetShardIterator.
func (k *Keeper) checkpoint(ctx context.Context, key string) (string, error) {
	out, err := k.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &k.table, Key: pkKey(guardPrefix + key), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return "", fmt.Errorf("read counters checkpoint %s: %w", key, err)
	}
	if raw := attrS(out.Item[guardRawSeq]); raw != "" {
		return raw, nil
	}
	return unpadSeq(attrS(out.Item[guardSeq])), nil
}

// minSeqLen is the shortest sequence number DynamoDB Streams has (and
// takes): 21 digits.
const minSeqLen = 21

// unpadSeq recovers the sequence number of a checkpoint written before
// guards kept it as given (guardRawSeq): only the padded form is there.
// Streams' numbers are 21 to 40 digits; AWS's have no leading zeros and
// DynamoDB Local's are zero-padded to 21, so both come back from the
// padded form with its zeros trimmed to at least 21 digits.
func unpadSeq(padded string) string {
	if padded == "" {
		return ""
	}
	seq := strings.TrimLeft(padded, "0")
	if len(seq) < minSeqLen {
		seq = strings.Repeat("0", minSeqLen-len(seq)) + seq
	}
	return seq
}

func changeFromStream(r streamtypes.Record) (Change, bool, error) {
	if r.Dynamodb == nil {
		return Change{}, false, nil
	}
	seq := aws.ToString(r.Dynamodb.SequenceNumber)
	var imgs [2]map[string]types.AttributeValue
	for i, from := range []map[string]streamtypes.AttributeValue{r.Dynamodb.OldImage, r.Dynamodb.NewImage} {
		if len(from) == 0 {
			continue
		}
		av, err := attributevalue.FromDynamoDBStreamsMap(from)
		if err != nil {
			return Change{}, false, fmt.Errorf("stream record %s: %w", seq, err)
		}
		imgs[i] = av
	}
	return changeOf(seq, imgs[0], imgs[1])
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
