package counters

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/spec"
)

// Publisher receives the changes of every stream batch the consumer
// applied, in stream order (internal/events derives lifecycle events from
// them). An error asks for the batch to be delivered again.
type Publisher interface {
	PublishChanges(ctx context.Context, changes []Change) error
}

// DefaultPublishAttempts is how many deliveries of one batch may fail to
// publish before its events are given up (Publish).
const DefaultPublishAttempts = 5

type publishing struct {
	to       Publisher
	attempts int
	log      *slog.Logger
}

// Publish makes Apply hand every batch to p once the batch's counters are
// applied, so the events of a deployment ride on the stream reader it
// already has (the Lambda trigger in AWS, the Poller locally).
//
// The order is the guarantee. Counters first: a publisher that fails never
// costs a count, and a redelivered batch's counters are skipped by their
// guard while its changes are published again (at least once). A failed
// publish fails the batch, so the stream delivers it again, whole (the
// Lambda trigger retries it; the Poller re-reads it); after attempts
// (DefaultPublishAttempts if zero or less) failed deliveries of the same
// batch, counted in the table so a retry in another Lambda instance counts
// too, its publishing is given up and logged with its sequence numbers: a
// receiver that is down for good delays the counters by a few retries,
// never blocks them.
func (k *Keeper) Publish(p Publisher, attempts int, log *slog.Logger) {
	if attempts <= 0 {
		attempts = DefaultPublishAttempts
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	k.pub = publishing{to: p, attempts: attempts, log: log}
}

func (k *Keeper) publish(ctx context.Context, changes []Change) error {
	if k.pub.to == nil || len(changes) == 0 {
		return nil
	}
	err := k.pub.to.PublishChanges(ctx, changes)
	if err == nil {
		return nil
	}
	first, last := changes[0].Seq, changes[len(changes)-1].Seq
	n, cerr := k.publishFailed(ctx, first)
	if cerr != nil {
		return errors.Join(fmt.Errorf("publish events: %w", err), cerr)
	}
	if n >= k.pub.attempts {
		k.pub.log.Error("events of a stream batch given up: publishing failed on every delivery",
			"first_seq", first, "last_seq", last, "deliveries", n, "error", err)
		return nil
	}
	k.pub.log.Warn("publishing events failed; the batch will be delivered again",
		"first_seq", first, "last_seq", last, "delivery", n, "of", k.pub.attempts, "error", err)
	return fmt.Errorf("publish events (delivery %d of %d): %w", n, k.pub.attempts, err)
}

// publishFailed counts a failed publish of the batch starting at first
// and returns the count so far. The count is a guard item of its own,
// expiring with the other guards.
func (k *Keeper) publishFailed(ctx context.Context, first string) (int, error) {
	out, err := k.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                &k.table,
		Key:                      pkKey(guardPrefix + "publish:" + PadSeq(first)),
		UpdateExpression:         aws.String("ADD #n :one SET #ttl = :ttl"),
		ExpressionAttributeNames: map[string]string{"#n": "failures", "#ttl": spec.AttrTTL},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":one": &types.AttributeValueMemberN{Value: "1"},
			":ttl": &types.AttributeValueMemberN{Value: strconv.FormatInt(k.now().Add(guardTTL).Unix(), 10)},
		},
		ReturnValues: types.ReturnValueUpdatedNew,
	})
	if err != nil {
		return 0, fmt.Errorf("count failed publish of batch %s: %w", first, err)
	}
	var n int
	if v, ok := out.Attributes["failures"].(*types.AttributeValueMemberN); ok {
		n, _ = strconv.Atoi(v.Value)
	}
	return n, nil
}
