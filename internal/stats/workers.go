package stats

import (
	"context"

	"github.com/triagehq/triage/triagetype"
)

// Workers lists the registered consumer instances (workers.Registry).
type Workers interface {
	List(ctx context.Context) ([]triagetype.WorkerInfo, error)
}

// WorkerStats is the workers section of GET /stats (the public type).
type WorkerStats = triagetype.WorkerStats

// CollectWorkers sums the registered consumer instances: the workers
// section of /stats, the same figures GET /workers lists one by one. Its
// cost is the registry's listing, O(workers): one keys-only query per
// shard and half a read unit per instance, never a read of the tasks.
func CollectWorkers(ctx context.Context, w Workers) (*WorkerStats, error) {
	ws, _, err := CollectFleet(ctx, w, nil)
	return ws, err
}
