package triagetype

import "time"

// WorkerState is where a consumer instance is in its life, as GET /workers
// reports it.
type WorkerState string

// The worker states. Active and Draining are what the instance itself last
// wrote; Dead is derived when it is read: the instance missed
// DeadAfterBeats heartbeats in a row (it crashed, was killed, or its
// Lambda invocation was cut off before it could say goodbye). An instance
// that stops cleanly removes itself and is not listed at all.
const (
	WorkerActive   WorkerState = "active"
	WorkerDraining WorkerState = "draining"
	WorkerDead     WorkerState = "dead"
)

// DeadAfterBeats is how many heartbeat intervals may pass without a
// heartbeat before a worker counts as dead. Three tolerates one slow or
// failed write (heartbeats that fail are logged and retried at the next
// tick) without flapping.
const DeadAfterBeats = 3

// Worker kinds: what runs the consumer.
const (
	WorkerKindLambda = "lambda" // one invocation of the consumer function
	WorkerKindWorker = "worker" // a long-running consumer (worker.Run, a container)
	WorkerKindDev    = "dev"    // the consumer inside `triage dev`
)

// WorkerInfo is one consumer instance, as GET /workers lists it: a row of
// the worker registry, describing a running worker.Worker, `triage dev`'s
// consumer or one invocation of the consumer function (Kind).
type WorkerInfo struct {
	ID    string      `json:"id"`
	Kind  string      `json:"kind"`
	State WorkerState `json:"state"`
	// StartedAt is when this instance (or this Lambda invocation) registered.
	StartedAt time.Time `json:"started_at"`
	// LastHeartbeatAt is the instance's own clock at its last heartbeat.
	LastHeartbeatAt time.Time `json:"last_heartbeat_at"`
	// HeartbeatSeconds is the instance's heartbeat interval: it is dead
	// once DeadAfterBeats of them pass with no heartbeat.
	HeartbeatSeconds float64 `json:"heartbeat_seconds"`
	// Capacity is how many tasks it runs at once; Busy how many slots were
	// taken at its last heartbeat.
	Capacity int `json:"capacity"`
	Busy     int `json:"busy"`
	// Types are the task types it has handlers for, as it advertised them
	// when it registered (empty when it could not list them): a consumer
	// without a type's handler hands that type's tasks back while a live
	// worker lists it.
	Types []string `json:"types,omitempty"`
	// Keys are its running tasks per fairness key at its last heartbeat:
	// the StatsKeys keys it runs most; KeysOther sums the rest.
	Keys      map[string]int `json:"keys,omitempty"`
	KeysOther int            `json:"keys_other,omitempty"`
	// TypeKeys are its running tasks per (type, key), named "type#key"
	// (neither may hold '#'): the StatsKeys pairs it runs most.
	TypeKeys map[string]int `json:"type_keys,omitempty"`
	// KeyStarts and KeyFinishes count the attempts of each key that began
	// and ended in its last heartbeat interval (HeartbeatSeconds): the
	// StatsKeys keys with the most.
	KeyStarts   map[string]int `json:"key_starts,omitempty"`
	KeyFinishes map[string]int `json:"key_finishes,omitempty"`
}

// WorkerList is the answer of GET /workers: every registered instance that
// is alive or died within the last few minutes, oldest first.
type WorkerList struct {
	Workers     []WorkerInfo `json:"workers"`
	GeneratedAt time.Time    `json:"generated_at"`
}

// WorkerStats sums the workers of a WorkerList: the workers section of
// GET /stats. Capacity and Used count live (active and draining) workers
// only: a dead worker runs nothing.
type WorkerStats struct {
	Active   int `json:"active"`
	Draining int `json:"draining"`
	Dead     int `json:"dead"`
	Capacity int `json:"capacity"`
	Used     int `json:"used"`
}

// SummarizeWorkers sums ws into the /stats workers section.
func SummarizeWorkers(ws []WorkerInfo) WorkerStats {
	var s WorkerStats
	for _, w := range ws {
		switch w.State {
		case WorkerActive:
			s.Active++
		case WorkerDraining:
			s.Draining++
		case WorkerDead:
			s.Dead++
			continue
		}
		s.Capacity += w.Capacity
		s.Used += w.Busy
	}
	return s
}
