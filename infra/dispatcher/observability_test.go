package dispatcher_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"

	"github.com/triagehq/triage/infra/dispatcher"
	"github.com/triagehq/triage/internal/metrics"
	"github.com/triagehq/triage/triageconfig"
)

// metricAlarms is how many alarms watch triage's own metrics: high wait
// p99, starvation per priority, failure rate (and, with the scheduled
// consumer only, no consumer heartbeat).
const metricAlarms = 1 + 3 + 1

// metricAlarm finds the alarm on metric with dims in namespace ns.
func (f *fixture) metricAlarm(t *testing.T, ns, metric string, dims map[string]any) map[string]any {
	t.Helper()
	var want []map[string]any
	for k, v := range dims {
		want = append(want, map[string]any{"Name": k, "Value": v})
	}
	for _, a := range f.ofType("AWS::CloudWatch::Alarm") {
		p := a.Properties
		if p["Namespace"] != ns || p["MetricName"] != metric {
			continue
		}
		got, _ := json.Marshal(p["Dimensions"])
		exp, _ := json.Marshal(want)
		if len(want) == 0 && p["Dimensions"] == nil || string(got) == string(exp) {
			return p
		}
	}
	t.Fatalf("no alarm on %s/%s %v", ns, metric, dims)
	return nil
}

// The alarms on triage's own metrics: their metrics, statistics and
// thresholds, from the defaults and from props.
func TestMetricAlarms(t *testing.T) {
	custom, err := synth(filepath.Join(env.outDir, "metrics"), false, &dispatcher.Props{
		PhysicalNames: true, Scheduled: true, PromoteLowAfter: 5 * time.Minute, PromoteMediumAfter: 5 * time.Minute, PromoteInterval: 2 * time.Minute,
		Metrics: dispatcher.MetricsProps{Namespace: "Acme", HighWaitP99: 5 * time.Second, FailureRatePercent: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name                    string
		f                       *fixture
		ns                      string
		highWait, bound, failed float64
	}{
		{"defaults", stackUnderTest(t), "Triage", 60, (10 + 20 + 2*1) * 60, 10},
		{"props", custom, "Acme", 5, (5 + 5 + 2*2) * 60, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := c.f.metricAlarm(t, c.ns, metrics.Name(metrics.TaskWait), map[string]any{"priority": "high"})
			equalJSON(t, "wait statistic", p["ExtendedStatistic"], "p99")
			equalJSON(t, "wait threshold", p["Threshold"], c.highWait)
			for _, prio := range []string{"high", "medium", "low"} {
				p := c.f.metricAlarm(t, c.ns, metrics.Name(metrics.QueueOldestAge), map[string]any{"priority": prio})
				equalJSON(t, prio+" oldest statistic", p["Statistic"], "Maximum")
				equalJSON(t, prio+" starvation threshold", p["Threshold"], c.bound)
			}
			var rate map[string]any
			for _, a := range c.f.ofType("AWS::CloudWatch::Alarm") {
				if strings.Contains(string(mustJSON(t, a.Properties["Metrics"])), "100 * failed / started") {
					rate = a.Properties
				}
			}
			if rate == nil {
				t.Fatal("no failure-rate alarm")
			}
			equalJSON(t, "failure threshold", rate["Threshold"], c.failed)
			body := string(mustJSON(t, rate["Metrics"]))
			for _, m := range []string{metrics.Name(metrics.TaskFailures), metrics.Name(metrics.TasksStarted), `"Namespace":"` + c.ns + `"`} {
				if !strings.Contains(body, m) {
					t.Errorf("failure-rate alarm lacks %s: %s", m, body)
				}
			}
			if c.f == env.fix { // started by the queues: nothing runs while idle, nothing beats
				for _, a := range c.f.ofType("AWS::CloudWatch::Alarm") {
					if a.Properties["MetricName"] == metrics.Name(metrics.SlotsCapacity) {
						t.Errorf("a no-consumer alarm on a consumer that scales to zero: %v", a.Properties)
					}
				}
				return
			}
			beat := c.f.metricAlarm(t, c.ns, metrics.Name(metrics.SlotsCapacity), nil)
			equalJSON(t, "heartbeat statistic", beat["Statistic"], "SampleCount")
			equalJSON(t, "heartbeat comparison", beat["ComparisonOperator"], "LessThanThreshold")
			equalJSON(t, "heartbeat threshold", beat["Threshold"], 1)
			equalJSON(t, "heartbeat missing data", beat["TreatMissingData"], "breaching")
			for name, fn := range map[string]awslambda.Function{"api": c.f.d.API, "consumer": c.f.d.Consumer, "promoter": c.f.d.Promoter} {
				vars := c.f.resources[c.f.id(fn)].Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
				equalJSON(t, name+" "+triageconfig.EnvMetricsNamespace, vars[triageconfig.EnvMetricsNamespace], c.ns)
			}
		})
	}
}

// The dashboard shows the key metrics, in the functions' namespace.
func TestDashboard(t *testing.T) {
	f := stackUnderTest(t)
	boards := f.ofType("AWS::CloudWatch::Dashboard")
	if len(boards) != 1 {
		t.Fatalf("%d dashboards, want 1", len(boards))
	}
	for _, b := range boards {
		equalJSON(t, "DashboardName", b.Properties["DashboardName"], "triage-triage")
		body := string(mustJSON(t, b.Properties["DashboardBody"]))
		for _, id := range []metrics.ID{
			metrics.TaskWait, metrics.QueueOldestAge, metrics.QueueDepth,
			metrics.TasksStarted, metrics.TasksCompleted, metrics.TasksDeadLettered,
			metrics.TaskFailures, metrics.Promotions, metrics.Recoveries,
			metrics.MessagesDropped, metrics.PutOffs, metrics.SlotsBusy, metrics.SlotsReservedBusy,
		} {
			if !strings.Contains(body, metrics.Name(id)) {
				t.Errorf("dashboard lacks %s", metrics.Name(id))
			}
		}
		for _, want := range []string{`\"Triage\"`, `\"p99\"`, `Wait from enqueue to start`} {
			if !strings.Contains(body, want) {
				t.Errorf("dashboard body lacks %s", want)
			}
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
