package dispatcher

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2/customresources"
	"github.com/aws/jsii-runtime-go"

	"github.com/triagehq/triage/internal/schedule"
	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/triagetype"
)

// Deploy-time schedules (Props.Schedules). Each is one CloudFormation
// custom resource (the CDK's AwsCustomResource: SDK calls, no function
// code of triage's own) that puts the schedule's item into the table when
// it is created or changed, and deletes it when it is removed from the
// props or the stack is deleted. The item is written pending (see
// schedule.DeployItem): the promoter's next run starts it at its first
// tick after that run. Why a custom resource rather than the promoter
// reading the schedules from its configuration on start: the schedules
// exist once the deploy finishes (GET /schedules shows them), a removed
// one is deleted by CloudFormation, and a schedule's payload (up to 3 KiB
// each) does not have to fit Lambda's 4 KB of environment.

// scheduleItems validates every schedule at synth time and returns their
// pending items, by name, in props order.
func scheduleItems(r Props) ([]map[string]any, error) {
	shards := r.Shards
	if shards == 0 {
		shards = spec.DefaultShards
	}
	seen := map[string]bool{}
	var items []map[string]any
	for _, s := range r.Schedules {
		if seen[s.Name] {
			return nil, fmt.Errorf("Schedules: %q is given twice", s.Name)
		}
		seen[s.Name] = true
		it, err := schedule.DeployItem(s, shards, r.Types)
		if err != nil {
			return nil, fmt.Errorf("Schedules: %w", err)
		}
		items = append(items, it)
	}
	return items, nil
}

// declareSchedules declares one custom resource per schedule.
func (d *Dispatcher) declareSchedules(r Props) {
	items, _ := scheduleItems(r) // validated by resolved
	for i, s := range r.Schedules {
		put := &customresources.AwsSdkCall{
			Service: jsii.String("DynamoDB"), Action: jsii.String("PutItem"),
			Parameters:         map[string]any{"TableName": d.Table.TableName(), "Item": items[i]},
			PhysicalResourceId: customresources.PhysicalResourceId_Of(jsii.String(s.Name)),
		}
		cr := customresources.NewAwsCustomResource(d.Construct, jsii.String("Schedule-"+s.Name), &customresources.AwsCustomResourceProps{
			OnCreate: put,
			OnUpdate: put,
			OnDelete: &customresources.AwsSdkCall{
				Service: jsii.String("DynamoDB"), Action: jsii.String("DeleteItem"),
				Parameters: map[string]any{"TableName": d.Table.TableName(), "Key": schedule.DeployKey(s.Name)},
			},
			Policy: customresources.AwsCustomResourcePolicy_FromSdkCalls(&customresources.SdkCallsPolicyOptions{
				Resources: &[]*string{d.Table.TableArn()},
			}),
			InstallLatestAwsSdk: jsii.Bool(false),
		})
		d.ScheduleResources = append(d.ScheduleResources, cr)
	}
}

// Schedule is a deploy-time schedule (Props.Schedules): the API's
// schedule, whose read-only fields are ignored.
type Schedule = triagetype.Schedule
