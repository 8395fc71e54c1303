// Package spec describes the AWS resources triage runs on: one DynamoDB table
// and, per priority, an SQS queue with its dead-letter queue.
//
// It is the single source of those shapes. The local bootstrap
// (localstack.Bootstrap) creates resources from it, and the CDK construct in
// infra/ declares them from it, so the two can never drift apart.
package spec

import (
	"fmt"
	"time"

	"github.com/triagehq/triage/internal/task"
)

// Table attribute names. Every item has pk; task items also carry the GSI
// attributes below, which the store keeps in step with the task's state.
const (
	AttrPK     = "pk"
	AttrGSI1PK = "gsi1pk" // "<status>#<effective_priority>"
	AttrGSI1SK = "gsi1sk" // "<due time, fixed-width UTC>#<id>": see task.Task.DueAt
	AttrGSI2PK = "gsi2pk" // "<type>"
	AttrGSI2SK = "gsi2sk" // "<created_at RFC3339Nano>#<id>"
	AttrTTL    = "expires_at"
)

// Index names.
const (
	IndexByStatus = "by-status-priority"
	IndexByType   = "by-type"
)

// Index is a global secondary index with string keys and all attributes projected.
//
// Both partition keys have low cardinality (a status#priority pair, a task
// type). At high volume they would be write-sharded by appending a suffix
// "#0".."#N-1" chosen from a hash of the task id, and readers would query the
// N shards and merge by sort key. The store keeps one shard until a
// deployment needs more.
type Index struct {
	Name         string
	PartitionKey string
	SortKey      string
}

// Table describes the single DynamoDB table.
type Table struct {
	Name         string
	PartitionKey string // string hash key, no sort key
	Indexes      []Index
	TTLAttribute string
}

// Queue describes one priority's SQS standard queue and its dead-letter queue.
type Queue struct {
	Priority          task.Priority
	Name              string
	DLQName           string
	MaxReceiveCount   int
	VisibilityTimeout time.Duration
	RetentionPeriod   time.Duration
	DLQRetention      time.Duration
}

// Spec is the whole resource set of one triage deployment.
type Spec struct {
	Table  Table
	Queues []Queue
}

// Default values used when a deployment names nothing else.
const (
	DefaultPrefix          = "triage"
	DefaultMaxReceiveCount = 5
)

// New returns the spec for a deployment whose resource names start with prefix.
func New(prefix string) Spec {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	s := Spec{
		Table: Table{
			Name:         prefix + "-tasks",
			PartitionKey: AttrPK,
			Indexes: []Index{
				{Name: IndexByStatus, PartitionKey: AttrGSI1PK, SortKey: AttrGSI1SK},
				{Name: IndexByType, PartitionKey: AttrGSI2PK, SortKey: AttrGSI2SK},
			},
			TTLAttribute: AttrTTL,
		},
	}
	for _, p := range task.Priorities() {
		s.Queues = append(s.Queues, Queue{
			Priority:          p,
			Name:              fmt.Sprintf("%s-%s", prefix, p),
			DLQName:           fmt.Sprintf("%s-%s-dlq", prefix, p),
			MaxReceiveCount:   DefaultMaxReceiveCount,
			VisibilityTimeout: 60 * time.Second,
			RetentionPeriod:   4 * 24 * time.Hour,
			DLQRetention:      14 * 24 * time.Hour,
		})
	}
	return s
}

// Queue returns the queue of priority p.
func (s Spec) Queue(p task.Priority) (Queue, bool) {
	for _, q := range s.Queues {
		if q.Priority == p {
			return q, true
		}
	}
	return Queue{}, false
}
