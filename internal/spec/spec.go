// Package spec describes the AWS resources triage runs on: one DynamoDB table
// and, per priority, an SQS queue with its dead-letter queue.
//
// It is the single source of those shapes. The local bootstrap
// (emulators.Bootstrap) creates resources from it, and the CDK construct in
// infra/ declares them from it, so the two can never drift apart.
package spec

import (
	"fmt"
	"time"

	"github.com/triagehq/triage/triagetype"
)

// Table attribute names. Every item has pk. Task items also carry the
// index attributes below, which the store derives from the task's state on
// every write (store.item), so an index can never disagree with its task.
const (
	AttrPK = "pk"
	// TaskKeyPrefix starts every task item's pk ("TASK#<id>"); other items
	// (counters, controls, workers, idempotency keys) have other prefixes.
	TaskKeyPrefix = "TASK#"
	// BatchKeyPrefix starts every item of a batch or workflow: its head,
	// counter shards and member adds (internal/store/batch.go).
	BatchKeyPrefix = "BATCH#"

	// by-created: every task, newest first. Written once, when the task is
	// created, and never changed: its key and projected attributes are
	// immutable, so later transitions write nothing to it.
	// Worker registry items (internal/workers) use it too, under
	// partition values "w#<shard>" that no task has.
	AttrCreatedPK = "cpk" // "c#<shard>"
	AttrCreatedSK = "csk" // "<created_at, fixed-width UTC>#<id>"; by-type sorts by it too

	// by-type: every task of one type, newest first, when the deployment
	// indexes types (TRIAGE_TYPE_INDEX; store.WithTypeIndex): without it a
	// task has no tpk and writes no entry here. Also written once.
	// Schedules (internal/schedule) list themselves here under "SCHED".
	AttrTypePK = "tpk" // "<type>#<shard>"

	// by-due: sparse. Only tasks in a state a timer or an operator acts on
	// have these attributes: scheduled (by run_at), retrying (by retry_at),
	// dead_letter and cancelled (by completed_at), and queued low or medium
	// tasks whose wait did not start at creation (by when it started);
	// waiting tasks, a child under its first parent's shard, sorted by that
	// parent (kept once released, until its claim). A task's ordinary path
	// (created queued, claimed, completed) never enters it.
	AttrDuePK = "dpk" // "<class>#<shard>", see DueClass
	AttrDueSK = "dsk" // "<due time, fixed-width UTC>#<id>"

	AttrTTL = "expires_at"
)

// Index names.
const (
	IndexByCreated = "by-created"
	IndexByType    = "by-type"
	IndexByDue     = "by-due"
)

// DefaultShards is how many partitions each index key is spread over. A
// partition takes at most 1,000 write units a second; every task writes one
// entry to by-created (and one to by-type with the type index), so with S
// shards the hottest key takes 1/S write units per task (16: 0.0625), and
// one task type at one priority can reach 16,000 tasks/s before any key is
// at its limit.
// Readers query every shard and merge. A deployment may raise it, never
// lower it (entries in shards past a lower count would no longer be read).
const DefaultShards = 16

// MaxShards bounds the shard count: readers issue one query per shard.
const MaxShards = 256

// Projection says which attributes an index copies.
type Projection string

// Index projections. KEYS_ONLY and INCLUDE keep index entries small and,
// as long as no projected attribute changes, untouched by transitions.
const (
	ProjectKeysOnly Projection = "KEYS_ONLY"
	ProjectInclude  Projection = "INCLUDE"
)

// Index is a global secondary index with string keys.
type Index struct {
	Name         string
	PartitionKey string
	SortKey      string
	Projection   Projection
	// NonKeyAttributes are the attributes an INCLUDE index copies. They must
	// never change after a task is created.
	NonKeyAttributes []string
}

// Table describes the single DynamoDB table.
type Table struct {
	Name         string
	PartitionKey string // string hash key, no sort key
	Indexes      []Index
	TTLAttribute string
	// Stream is the table's DynamoDB stream view: the counters behind
	// /stats are kept from it (old and new images of every change).
	Stream string
}

// StreamNewAndOldImages is the only stream view triage uses.
const StreamNewAndOldImages = "NEW_AND_OLD_IMAGES"

// The stream consumer's batches (the counters function's trigger in AWS):
// up to StreamBatchSize records gathered over up to StreamBatchWindow, so
// the counters' writes per task shrink as the rate grows.
const (
	StreamBatchSize   = 1000
	StreamBatchWindow = 2 * time.Second
)

// Queue describes one priority's SQS standard queue and its dead-letter queue.
type Queue struct {
	Priority          triagetype.Priority
	Name              string
	DLQName           string
	MaxReceiveCount   int
	VisibilityTimeout time.Duration
	RetentionPeriod   time.Duration
	DLQRetention      time.Duration
}

// Bucket describes the S3 bucket that keeps the payloads and results too
// large for a task's item (see internal/blob). Its objects are deleted
// with their tasks; it needs no lifecycle expiry, which could not know how
// long a task lives.
type Bucket struct {
	// Name is the local bucket's name. S3 names are global, so in AWS the
	// CDK construct lets CloudFormation name the bucket and hands the name
	// to the functions in TRIAGE_BUCKET.
	Name string
}

// Spec is the whole resource set of one triage deployment.
type Spec struct {
	Table  Table
	Queues []Queue
	Bucket Bucket
}

// Default values used when a deployment names nothing else.
const (
	DefaultPrefix          = "triage"
	DefaultMaxReceiveCount = 5
)

// Of is a deployment's resources: named by prefix, with table and bucket
// when they are not "" (a deployment's TRIAGE_TABLE and TRIAGE_BUCKET).
func Of(prefix, table, bucket string) Spec {
	s := New(prefix)
	if table != "" {
		s.Table.Name = table
	}
	if bucket != "" {
		s.Bucket.Name = bucket
	}
	return s
}

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
				// The promoter's aging sweep filters it by the original priority.
				{Name: IndexByCreated, PartitionKey: AttrCreatedPK, SortKey: AttrCreatedSK, Projection: ProjectInclude, NonKeyAttributes: []string{"priority"}},
				{Name: IndexByType, PartitionKey: AttrTypePK, SortKey: AttrCreatedSK, Projection: ProjectKeysOnly},
				{Name: IndexByDue, PartitionKey: AttrDuePK, SortKey: AttrDueSK, Projection: ProjectKeysOnly},
			},
			TTLAttribute: AttrTTL,
			Stream:       StreamNewAndOldImages,
		},
		Bucket: Bucket{Name: prefix + "-blobs"},
	}
	for _, p := range triagetype.Priorities() {
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
func (s Spec) Queue(p triagetype.Priority) (Queue, bool) {
	for _, q := range s.Queues {
		if q.Priority == p {
			return q, true
		}
	}
	return Queue{}, false
}

// Mapping is how each priority queue starts the consumer function: a Lambda
// SQS event source mapping in AWS (infra/dispatcher), the local event
// source under `triage dev` (internal/eventsource).
type Mapping struct {
	// BatchSize is the most records one event carries (SQS: 1 to 10
	// without a batching window). It stays within the consumer's general
	// slots at the default configuration (8 slots, 1 reserved for high),
	// so every handed message gets a slot at once.
	BatchSize int
	// Window is how long the poller gathers records before it invokes
	// (MaximumBatchingWindowInSeconds). Zero invokes as soon as a receive
	// brings anything: the first task after idle starts soonest.
	Window time.Duration
	// MaxConcurrency is the most invocations one mapping keeps running
	// (ScalingConfig.MaximumConcurrency, 2 to 1000 in AWS). Each invocation
	// polls all three queues by weight once started, so the three mappings
	// together run at most 3 × MaxConcurrency consumers.
	MaxConcurrency int
}

// DefaultMapping is the event source mappings' settings unless a
// deployment says otherwise.
func DefaultMapping() Mapping {
	return Mapping{BatchSize: 5, Window: 0, MaxConcurrency: 5}
}
