package resourcespec

import (
	"github.com/triagehq/triage/internal/metrics"
	"github.com/triagehq/triage/triageconfig"
)

// The metrics the functions emit (internal/metrics owns them), for the
// CDK construct's dashboard and alarms.

// MetricID names one metric.
type MetricID = metrics.ID

// The metrics the dashboard and alarms read.
const (
	MetricTasksSubmitted    = metrics.TasksSubmitted
	MetricTasksStarted      = metrics.TasksStarted
	MetricTasksCompleted    = metrics.TasksCompleted
	MetricTasksRetried      = metrics.TasksRetried
	MetricTasksDeadLettered = metrics.TasksDeadLettered
	MetricTaskFailures      = metrics.TaskFailures
	MetricTaskWait          = metrics.TaskWait
	MetricTaskRun           = metrics.TaskRun
	MetricPromotions        = metrics.Promotions
	MetricRecoveries        = metrics.Recoveries
	MetricMessagesDropped   = metrics.MessagesDropped
	MetricPutOffs           = metrics.PutOffs
	MetricSlotsCapacity     = metrics.SlotsCapacity
	MetricSlotsBusy         = metrics.SlotsBusy
	MetricSlotsReservedBusy = metrics.SlotsReservedBusy
	MetricQueueDepth        = metrics.QueueDepth
	MetricQueueOldestAge    = metrics.QueueOldestAge
	MetricDLQDepth          = metrics.DLQDepth
)

// MetricName is a metric's name, the same in CloudWatch and Prometheus.
func MetricName(id MetricID) string { return metrics.Definitions()[id].Name }

// MetricsNamespace is the functions' default CloudWatch namespace, and
// EnvMetricsNamespace the variable that changes it.
const (
	MetricsNamespace    = metrics.Namespace
	EnvMetricsNamespace = triageconfig.EnvMetricsNamespace
)

// Failure reasons and put-off reasons, the label values a dashboard lists.
func FailureReasons() []string {
	return []string{string(metrics.FailError), string(metrics.FailPermanent), string(metrics.FailTimeout), string(metrics.FailPanic),
		string(metrics.FailNoHandler), string(metrics.FailPayloadMissing), string(metrics.FailBadResult), string(metrics.FailLeaseExpired), string(metrics.FailMaxReceives)}
}

// PutOffReasons are the reasons a message is put off.
func PutOffReasons() []string {
	return []string{string(metrics.PutOffPaused), string(metrics.PutOffRate), string(metrics.PutOffConcurrency), string(metrics.PutOffLeased), string(metrics.PutOffControlError), string(metrics.PutOffContention)}
}

// DefaultLowAfter, DefaultMediumAfter are the aging thresholds' defaults,
// from which the construct computes the starvation bound it alarms on.
const (
	DefaultLowAfter    = triageconfig.DefaultLowAfter
	DefaultMediumAfter = triageconfig.DefaultMediumAfter
)
