package counters

import (
	"context"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// HandleEvent applies a DynamoDB stream event delivered to a Lambda
// trigger. Lambda retries a failed batch whole, from its first record, so
// each run of changes is guarded by a marker named after its first
// sequence number: a retry of an applied run is skipped. (The trigger must
// not bisect failed batches, which would give a retried run a new first
// record; the CDK construct leaves bisection off.) With a publisher set
// (Publish), a batch whose events could not be published returns an error
// after its counters are applied, so the trigger delivers it again: events
// are at least once, the counters still exactly once.
func (k *Keeper) HandleEvent(ctx context.Context, ev events.DynamoDBEvent) error {
	changes := make([]Change, 0, len(ev.Records))
	for _, r := range ev.Records {
		c, ok, err := changeOf(r.Change.SequenceNumber, fromEventMap(r.Change.OldImage), fromEventMap(r.Change.NewImage))
		if err != nil {
			return err
		}
		if ok {
			changes = append(changes, c)
		}
	}
	return k.Apply(ctx, changes, func(first, _ string) Guard { return Guard{Key: "batch:" + PadSeq(first)} })
}

// fromEventMap converts a Lambda event image to SDK attribute values.
func fromEventMap(m map[string]events.DynamoDBAttributeValue) map[string]types.AttributeValue {
	out := make(map[string]types.AttributeValue, len(m))
	for k, v := range m {
		out[k] = fromEvent(v)
	}
	return out
}

func fromEvent(v events.DynamoDBAttributeValue) types.AttributeValue {
	switch v.DataType() {
	case events.DataTypeString:
		return &types.AttributeValueMemberS{Value: v.String()}
	case events.DataTypeNumber:
		return &types.AttributeValueMemberN{Value: v.Number()}
	case events.DataTypeBinary:
		return &types.AttributeValueMemberB{Value: v.Binary()}
	case events.DataTypeBoolean:
		return &types.AttributeValueMemberBOOL{Value: v.Boolean()}
	case events.DataTypeStringSet:
		return &types.AttributeValueMemberSS{Value: v.StringSet()}
	case events.DataTypeNumberSet:
		return &types.AttributeValueMemberNS{Value: v.NumberSet()}
	case events.DataTypeBinarySet:
		return &types.AttributeValueMemberBS{Value: v.BinarySet()}
	case events.DataTypeList:
		l := make([]types.AttributeValue, 0, len(v.List()))
		for _, e := range v.List() {
			l = append(l, fromEvent(e))
		}
		return &types.AttributeValueMemberL{Value: l}
	case events.DataTypeMap:
		return &types.AttributeValueMemberM{Value: fromEventMap(v.Map())}
	}
	return &types.AttributeValueMemberNULL{Value: true}
}
