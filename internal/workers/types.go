package workers

import (
	"context"
	"slices"
	"time"

	"github.com/triagehq/triage/triagetype"
)

// TypeSeen is what the registry knows of the instances that advertise one
// task type (Instance.Types).
type TypeSeen struct {
	// Live: an active instance (alive, not draining) advertises it now.
	Live bool
	// LastHeartbeat is the latest heartbeat of any listed instance that
	// advertises it, live, draining or dead within DeadRetention: the last
	// time the registry knows the type had a worker.
	LastHeartbeat time.Time
}

// HandledTypes reads every listed instance (as List does: O(workers), a
// shard query each plus a batch read) and returns, for each task type some
// instance advertises, whether a live one does and when one last
// heartbeated. A type no listed instance advertises is absent: either none
// ever did, or its last worker died more than DeadRetention ago.
func (r *Registry) HandledTypes(ctx context.Context) (map[string]TypeSeen, error) {
	pks, err := r.keys(ctx)
	if err != nil {
		return nil, err
	}
	now := r.now()
	out := map[string]TypeSeen{}
	for chunk := range slices.Chunk(pks, batchGetMax) {
		recs, err := r.batchGet(ctx, chunk)
		if err != nil {
			return nil, err
		}
		for _, rec := range recs {
			if rec.ExpiresAt <= now.Unix() {
				continue
			}
			live := rec.worker(now).State == triagetype.WorkerActive
			for _, typ := range rec.Types {
				seen := out[typ]
				seen.Live = seen.Live || live
				if rec.HeartbeatAt.After(seen.LastHeartbeat) {
					seen.LastHeartbeat = rec.HeartbeatAt
				}
				out[typ] = seen
			}
		}
	}
	return out, nil
}
