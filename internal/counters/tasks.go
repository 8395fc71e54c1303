package counters

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/triagehq/triage/triagetype"
)

// Tasks counts retained tasks by status and effective priority, as
// Snapshot.Tasks does, from one eventually consistent read of the global
// item alone (half a read unit): what the promoter asks before its sweeps.
// No item (no task was ever counted) reads as no tasks.
func (k *Keeper) Tasks(ctx context.Context) (map[triagetype.Status]map[triagetype.Priority]int64, error) {
	g, err := k.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &k.table, Key: pkKey(globalPK)})
	if err != nil {
		return nil, fmt.Errorf("read task counters: %w", err)
	}
	out := map[triagetype.Status]map[triagetype.Priority]int64{}
	for a, v := range g.Item {
		n := number(v)
		if parts := strings.Split(a, "#"); len(parts) == 3 && parts[0] == "s" && n != 0 {
			st, p := triagetype.Status(parts[1]), triagetype.Priority(parts[2])
			if out[st] == nil {
				out[st] = map[triagetype.Priority]int64{}
			}
			out[st][p] += n
		}
	}
	return out, nil
}
