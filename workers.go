package triage

import (
	"context"

	"github.com/triagehq/triage/triagetype"
)

// The worker registry's vocabulary (see triagetype).
type (
	// Worker is one consumer instance: its kind, state, heartbeat and slots.
	Worker = triagetype.Worker
	// WorkerList is every registered consumer instance.
	WorkerList = triagetype.WorkerList
	// WorkerState is active, draining or dead.
	WorkerState = triagetype.WorkerState
	// WorkerStats sums the workers: the workers section of Stats.
	WorkerStats = triagetype.WorkerStats
)

// The worker states.
const (
	WorkerActive   = triagetype.WorkerActive
	WorkerDraining = triagetype.WorkerDraining
	WorkerDead     = triagetype.WorkerDead
)

// DeadAfterBeats is how many heartbeat intervals without a heartbeat make
// a worker dead.
const DeadAfterBeats = triagetype.DeadAfterBeats

// SummarizeWorkers sums ws as the workers section of Stats does.
func SummarizeWorkers(ws []Worker) WorkerStats { return triagetype.SummarizeWorkers(ws) }

// Workers lists the consumer instances in the worker registry, oldest
// first: every one alive, and those that died in the last few minutes
// (state dead: DeadAfterBeats heartbeat intervals with no heartbeat).
func (c *Client) Workers(ctx context.Context) (*WorkerList, error) { return c.t.Workers(ctx) }
