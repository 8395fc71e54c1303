package main

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

// The idle month prices what the template declares: the promoter's minute
// schedule, three queue pollers, the secret; alarms and the dashboard
// apart; a scheduled consumer's always-on time when one is declared.
func TestPriceIdleMonth(t *testing.T) {
	const tmpl = `{"Resources":{
	 "Promoter":{"Type":"AWS::Lambda::Function","Properties":{"MemorySize":256,"Timeout":60}},
	 "Consumer":{"Type":"AWS::Lambda::Function","Properties":{"MemorySize":512,"Timeout":300}},
	 "QueueHigh":{"Type":"AWS::SQS::Queue"},"QueueMedium":{"Type":"AWS::SQS::Queue"},"QueueLow":{"Type":"AWS::SQS::Queue"},
	 "PromoterSchedule":{"Type":"AWS::Events::Rule","Properties":{"ScheduleExpression":"rate(1 minute)","Targets":[{"Arn":{"Fn::GetAtt":["Promoter","Arn"]}}]}},
	 "MapHigh":{"Type":"AWS::Lambda::EventSourceMapping","Properties":{"EventSourceArn":{"Fn::GetAtt":["QueueHigh","Arn"]},"FunctionName":{"Ref":"Consumer"}}},
	 "MapMedium":{"Type":"AWS::Lambda::EventSourceMapping","Properties":{"EventSourceArn":{"Fn::GetAtt":["QueueMedium","Arn"]},"FunctionName":{"Ref":"Consumer"}}},
	 "MapLow":{"Type":"AWS::Lambda::EventSourceMapping","Properties":{"EventSourceArn":{"Fn::GetAtt":["QueueLow","Arn"]},"FunctionName":{"Ref":"Consumer"}}},
	 "Secret":{"Type":"AWS::SecretsManager::Secret"},
	 "Alarm1":{"Type":"AWS::CloudWatch::Alarm","Properties":{}},
	 "Alarm2":{"Type":"AWS::CloudWatch::Alarm","Properties":{"Metrics":[{"MetricStat":{}},{"MetricStat":{}},{"Expression":"a/b"}]}},
	 "Board":{"Type":"AWS::CloudWatch::Dashboard"}
	}}`
	path := filepath.Join(t.TempDir(), "t.json")
	if err := os.WriteFile(path, []byte(tmpl), 0o600); err != nil {
		t.Fatal(err)
	}
	pr := publicPrices()
	m, err := priceIdleMonth(path, pr)
	if err != nil {
		t.Fatal(err)
	}
	runs := float64(monthSeconds / 60)
	promoter := runs*pr.LambdaPerMillionRequests/1e6 + runs*promoterIdleSeconds*256/1024*pr.LambdaPerGBSecondARM +
		runs*promoterIdleReadUnits*pr.DDBPerMillionReadUnits/1e6 + runs*promoterIdleSQS*pr.SQSPerMillionRequests/1e6
	pollers := 3 * pollersPerMapping * monthSeconds / pollerWait * pr.SQSPerMillionRequests / 1e6
	want := promoter + pollers + pr.SecretMonth
	if math.Abs(m.Total-want) > 0.01 {
		t.Errorf("total $%.4f, want $%.4f (promoter %.4f, pollers %.4f, secret %.2f)", m.Total, want, promoter, pollers, pr.SecretMonth)
	}
	if wantApart := 3*pr.AlarmPerMetricMonth + pr.DashboardMonth; math.Abs(m.Observation-wantApart) > 0.001 {
		t.Errorf("alarms and dashboard $%.4f, want $%.4f", m.Observation, wantApart)
	}

	// The same template with a scheduled consumer (rate(1 minute)) adds
	// its always-on time: about 4.3 instances at 512 MB.
	sched := `{"Resources":{"Consumer":{"Type":"AWS::Lambda::Function","Properties":{"MemorySize":512,"Timeout":300}},
	 "ConsumerSchedule":{"Type":"AWS::Events::Rule","Properties":{"ScheduleExpression":"rate(1 minute)","Targets":[{"Arn":{"Fn::GetAtt":["Consumer","Arn"]}}]}}}}`
	if err := os.WriteFile(path, []byte(sched), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := priceIdleMonth(path, pr)
	if err != nil {
		t.Fatal(err)
	}
	if s.Total < 70 || s.Total > 110 {
		t.Errorf("scheduled consumer: $%.2f a month idle, want the ~$90 the issue priced", s.Total)
	}
}
