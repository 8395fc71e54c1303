package counters

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/triagetype"
)

// Queue depth over the last hour, for the dashboard's chart: the depth of
// each priority's queue, sampled by the promoter (promoterapp.SampleQueues,
// which reads the depths for its metrics already) and kept one item per
// minute.
//
// The promoter writes them, not the stream consumer, because a depth is a
// reading of SQS, not a sum of the table's changes: a delayed message
// turning visible changes the depth without a stream record, and an idle
// deployment writes no records at all but must still show its flat line.
// The promoter runs on a schedule (every minute in AWS, every few seconds
// under `triage dev`), whatever the load.
//
// Item COUNTS#DEPTH#<unix minute>: "d#<priority>" (visible messages) and
// "f#<priority>" (in flight) for each priority, and the sample's time; the
// last sample of a minute wins. One UpdateItem of under 100 bytes (one
// write unit) per promoter run, whatever the number of tasks: at 10,000
// tasks/s it is still one write a minute in AWS. The item expires an hour
// after its minute, with the throughput buckets.
const depthPrefix = "COUNTS#DEPTH#"

// Depth is one priority's sampled queue depth.
type Depth struct {
	Visible  int `json:"depth"`
	InFlight int `json:"in_flight"`
}

// RecordDepth stores the depths sampled at at in at's minute item.
func (k *Keeper) RecordDepth(ctx context.Context, at time.Time, depths map[triagetype.Priority]Depth) error {
	if len(depths) == 0 {
		return nil
	}
	minute := at.Unix() / 60
	names := map[string]string{"#at": "sampled_at", "#ttl": spec.AttrTTL}
	values := map[string]types.AttributeValue{
		":at":  &types.AttributeValueMemberS{Value: at.UTC().Format(time.RFC3339Nano)},
		":ttl": &types.AttributeValueMemberN{Value: strconv.FormatInt(time.Unix((minute+1)*60, 0).Add(bucketTTL).Unix(), 10)},
	}
	sets := []string{"#at = :at", "#ttl = :ttl"}
	for i, p := range slices.Sorted(maps.Keys(depths)) {
		d := depths[p]
		for j, v := range []struct {
			attr string
			n    int
		}{{"d#" + string(p), d.Visible}, {"f#" + string(p), d.InFlight}} {
			n, val := fmt.Sprintf("#d%d_%d", i, j), fmt.Sprintf(":d%d_%d", i, j)
			names[n], values[val] = v.attr, &types.AttributeValueMemberN{Value: strconv.Itoa(v.n)}
			sets = append(sets, n+" = "+val)
		}
	}
	_, err := k.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &k.table, Key: pkKey(depthPrefix + strconv.FormatInt(minute, 10)),
		UpdateExpression:         aws.String("SET " + strings.Join(sets, ", ")),
		ExpressionAttributeNames: names, ExpressionAttributeValues: values,
	})
	if err != nil {
		return fmt.Errorf("record queue depths: %w", err)
	}
	return nil
}

// depthOf reads the depths of a minute item (nil if it holds none).
func depthOf(it map[string]types.AttributeValue) map[triagetype.Priority]Depth {
	var out map[triagetype.Priority]Depth
	for a, v := range it {
		kind, p, ok := strings.Cut(a, "#")
		if !ok || (kind != "d" && kind != "f") {
			continue
		}
		if out == nil {
			out = map[triagetype.Priority]Depth{}
		}
		d := out[triagetype.Priority(p)]
		if kind == "d" {
			d.Visible = int(number(v))
		} else {
			d.InFlight = int(number(v))
		}
		out[triagetype.Priority(p)] = d
	}
	return out
}
