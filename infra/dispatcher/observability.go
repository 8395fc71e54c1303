package dispatcher

import (
	"fmt"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
	"github.com/triagehq/triage/internal/metrics"
	"github.com/triagehq/triage/triageconfig"
)

// Defaults of the metric alarms (see AlarmProps).
const (
	defaultHighWaitP99     = time.Minute
	defaultFailureRate     = 10 // percent
	defaultMetricNamespace = metrics.Namespace
)

// MetricsProps tunes the dashboard and the alarms on triage's own metrics
// (the functions' EMF, namespace Namespace).
type MetricsProps struct {
	// Namespace is the CloudWatch namespace the functions write their
	// metrics to (TRIAGE_METRICS_NAMESPACE). Default "Triage"; give each
	// deployment in one account and region its own, or their metrics add up.
	Namespace string
	// HighWaitP99: an alarm fires when the p99 of high tasks' wait from
	// enqueue to start is above it. Default 1m.
	HighWaitP99 time.Duration
	// FailureRatePercent: an alarm fires when failed attempts are more than
	// this share of the attempts started. Default 10.
	FailureRatePercent float64
	// Dashboard opts in to the CloudWatch dashboard of the key metrics
	// ($3 a month at list price, whether or not anything runs). Default
	// false.
	Dashboard bool
	// DashboardName names the dashboard; default "<prefix>-triage" with
	// PhysicalNames, else generated.
	DashboardName string
}

// metric is one of triage's metrics with dimensions, over the alarm period.
func (d *Dispatcher) metric(ns string, id metrics.ID, stat string, period awscdk.Duration, dims map[string]string, label string) awscloudwatch.Metric {
	m := map[string]*string{}
	for k, v := range dims {
		m[k] = jsii.String(v)
	}
	props := &awscloudwatch.MetricProps{
		Namespace: jsii.String(ns), MetricName: jsii.String(metrics.Name(id)),
		DimensionsMap: &m, Statistic: jsii.String(stat), Period: period,
	}
	if label != "" {
		props.Label = jsii.String(label)
	}
	return awscloudwatch.NewMetric(props)
}

// observability sets the functions' metrics namespace, and declares the
// dashboard of the key metrics and the alarms on them: high-priority wait
// p99, oldest queued age beyond the starvation bound (per priority), and
// failure rate, and no consumer heartbeat.
func (d *Dispatcher) observability(p Props) {
	mp := p.Metrics
	ns := mp.Namespace
	for _, fn := range []awslambda.Function{d.API, d.Consumer, d.Promoter} {
		fn.AddEnvironment(jsii.String(triageconfig.EnvMetricsNamespace), jsii.String(ns), nil)
	}
	d.consumerEnv[triageconfig.EnvMetricsNamespace] = ns // a user's own consumer (ConsumerEnvironment) reports alike
	period := awscdk.Duration_Minutes(jsii.Number(p.Alarms.Period.Minutes()))
	low, medium := p.PromoteLowAfter, p.PromoteMediumAfter
	if low == 0 {
		low = triageconfig.DefaultLowAfter
	}
	if medium == 0 {
		medium = triageconfig.DefaultMediumAfter
	}
	bound := low + medium + 2*p.PromoteInterval
	prios := []string{"high", "medium", "low"}

	alarm := func(id, desc string, m awscloudwatch.IMetric, threshold float64) {
		d.addAlarm(p, id, desc, m, threshold, awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD, awscloudwatch.TreatMissingData_NOT_BREACHING)
	}
	alarm("HighWaitP99", fmt.Sprintf("triage %s: p99 wait of high tasks from enqueue to start above %s", p.Prefix, mp.HighWaitP99),
		d.metric(ns, metrics.TaskWait, "p99", period, map[string]string{"priority": "high"}, ""), mp.HighWaitP99.Seconds())
	for _, prio := range prios {
		alarm("Starvation"+title(prio), fmt.Sprintf("triage %s: a %s task has waited longer than the starvation bound %s (LOW_AFTER + MEDIUM_AFTER + 2 × PROMOTE_INTERVAL)", p.Prefix, prio, bound),
			d.metric(ns, metrics.QueueOldestAge, "Maximum", period, map[string]string{"priority": prio}, ""), bound.Seconds())
	}
	failed := d.metric(ns, metrics.TaskFailures, "Sum", period, nil, "")
	started := d.metric(ns, metrics.TasksStarted, "Sum", period, nil, "")
	rate := awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		Expression:   jsii.String("100 * failed / started"),
		UsingMetrics: &map[string]awscloudwatch.IMetric{"failed": failed, "started": started},
		Label:        jsii.String("failed attempts, % of started"),
		Period:       period,
	})
	alarm("FailureRate", fmt.Sprintf("triage %s: more than %v%% of attempts failed", p.Prefix, mp.FailureRatePercent), rate, mp.FailureRatePercent)
	// Every consumer reports its slot capacity with each metrics flush
	// (every minute while it runs, and as each invocation ends); the
	// scheduled consumer runs every minute. No report in a whole period,
	// missing data included, means no consumer is alive to run tasks.
	// Started by the queues, no consumer runs while nothing is queued, so
	// there the starvation alarms (oldest queued age) say it instead.
	if p.Scheduled {
		d.noConsumerAlarm(p, ns, period)
	}
	if !mp.Dashboard {
		return
	}
	d.dashboard(p, ns, period)
}

// noConsumerAlarm fires when no consumer reported in a whole period.
func (d *Dispatcher) noConsumerAlarm(p Props, ns string, period awscdk.Duration) {
	d.addAlarm(p, "NoConsumer", fmt.Sprintf("triage %s: no consumer reported in %s (no heartbeat: tasks are not being run)", p.Prefix, p.Alarms.Period),
		d.metric(ns, metrics.SlotsCapacity, "SampleCount", period, nil, ""), 1,
		awscloudwatch.ComparisonOperator_LESS_THAN_THRESHOLD, awscloudwatch.TreatMissingData_BREACHING)
}

// dashboard declares the dashboard of the key metrics (Metrics.Dashboard).
func (d *Dispatcher) dashboard(p Props, ns string, period awscdk.Duration) {
	mp := p.Metrics
	prios := []string{"high", "medium", "low"}

	byPrio := func(id metrics.ID, stat string) *[]awscloudwatch.IMetric {
		var ms []awscloudwatch.IMetric
		for _, prio := range prios {
			ms = append(ms, d.metric(ns, id, stat, period, map[string]string{"priority": prio}, prio))
		}
		return &ms
	}
	byLabel := func(id metrics.ID, key string, values []string) *[]awscloudwatch.IMetric {
		var ms []awscloudwatch.IMetric
		for _, v := range values {
			ms = append(ms, d.metric(ns, id, "Sum", period, map[string]string{key: v}, v))
		}
		return &ms
	}
	totals := func(stat string, ids ...metrics.ID) *[]awscloudwatch.IMetric {
		var ms []awscloudwatch.IMetric
		for _, id := range ids {
			ms = append(ms, d.metric(ns, id, stat, period, nil, metrics.Name(id)))
		}
		return &ms
	}
	graph := func(title string, left *[]awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{Title: jsii.String(title), Left: left, Width: jsii.Number(8)})
	}
	var name *string
	if mp.DashboardName != "" {
		name = jsii.String(mp.DashboardName)
	} else if d.physicalNames {
		name = jsii.String(p.Prefix + "-triage")
	}
	d.Dashboard = awscloudwatch.NewDashboard(d.Construct, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{DashboardName: name})
	d.Dashboard.AddWidgets(
		graph("Wait from enqueue to start, p99 (s)", byPrio(metrics.TaskWait, "p99")),
		graph("Oldest queued task (s)", byPrio(metrics.QueueOldestAge, "Maximum")),
		graph("Queue depth", byPrio(metrics.QueueDepth, "Maximum")),
	)
	d.Dashboard.AddWidgets(
		graph("Tasks", totals("Sum", metrics.TasksSubmitted, metrics.TasksStarted, metrics.TasksCompleted, metrics.TasksRetried, metrics.TasksDeadLettered)),
		graph("Failures by reason", byLabel(metrics.TaskFailures, "reason", metrics.FailureReasons())),
		graph("Promotions", &[]awscloudwatch.IMetric{
			d.metric(ns, metrics.Promotions, "Sum", period, map[string]string{"from": "low", "to": "medium"}, "low → medium"),
			d.metric(ns, metrics.Promotions, "Sum", period, map[string]string{"from": "medium", "to": "high"}, "medium → high"),
		}),
	)
	d.Dashboard.AddWidgets(
		graph("Consumer slots (per consumer)", totals("Maximum", metrics.SlotsCapacity, metrics.SlotsBusy, metrics.SlotsReservedBusy)),
		graph("Recoveries and dropped messages", &[]awscloudwatch.IMetric{
			d.metric(ns, metrics.Recoveries, "Sum", period, map[string]string{"kind": "lease_expired"}, "lease expired"),
			d.metric(ns, metrics.Recoveries, "Sum", period, map[string]string{"kind": "message_lost"}, "message lost"),
			d.metric(ns, metrics.MessagesDropped, "Sum", period, map[string]string{"reason": "stale"}, "stale"),
			d.metric(ns, metrics.MessagesDropped, "Sum", period, map[string]string{"reason": "no_task"}, "poison: no task"),
			d.metric(ns, metrics.MessagesDropped, "Sum", period, map[string]string{"reason": "version_ahead"}, "poison: version ahead"),
			d.metric(ns, metrics.MessagesDropped, "Sum", period, map[string]string{"reason": "invalid"}, "poison: invalid"),
		}),
		graph("Put-offs", byLabel(metrics.PutOffs, "reason", metrics.PutOffReasons())),
	)
}

// addAlarm declares an alarm on m, evaluated over one period, that
// notifies Alarms.Topic (when set) as it fires and as it clears.
func (d *Dispatcher) addAlarm(p Props, id, desc string, m awscloudwatch.IMetric, threshold float64, cmp awscloudwatch.ComparisonOperator, missing awscloudwatch.TreatMissingData) {
	a := awscloudwatch.NewAlarm(d.Construct, jsii.String(id), &awscloudwatch.AlarmProps{
		Metric:             m,
		AlarmDescription:   jsii.String(desc),
		Threshold:          jsii.Number(threshold),
		EvaluationPeriods:  jsii.Number(1),
		ComparisonOperator: cmp,
		TreatMissingData:   missing,
	})
	if p.Alarms.Topic != nil {
		action := awscloudwatchactions.NewSnsAction(p.Alarms.Topic)
		a.AddAlarmAction(action)
		a.AddOkAction(action)
	}
	d.Alarms = append(d.Alarms, a)
}
