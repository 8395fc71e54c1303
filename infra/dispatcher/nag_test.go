package dispatcher_test

import (
	"fmt"
	"path/filepath"
	"sort"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/triagehq/triage/infra/dispatcher"
)

// The whole stack passes the rule packs AWS users run, AwsSolutions and
// ServerlessChecks: every error cdk-nag reports is suppressed below with
// the reason it does not apply to triage (nagSuppressions).
func TestNagPacks(t *testing.T) {
	stackUnderTest(t) // serialize with the shared synth; jsii is single-threaded anyway
	var stack awscdk.Stack
	_, err := synthWith(filepath.Join(env.outDir, "nag"), false, &dispatcher.Props{PhysicalNames: true}, func(s awscdk.Stack, d *dispatcher.Dispatcher) {
		awscdk.Aspects_Of(s).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
		awscdk.Aspects_Of(s).Add(cdknag.NewServerlessChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
		nagSuppressions(d)
		stack = s
	})
	if err != nil {
		t.Fatal(err)
	}
	any := assertions.Match_StringLikeRegexp(jsii.String(".*"))
	var found []string
	for _, m := range *assertions.Annotations_FromStack(stack).FindError(jsii.String("*"), any) {
		found = append(found, fmt.Sprintf("%s: %v", *m.Id, m.Entry.Data))
	}
	sort.Strings(found)
	for _, f := range found {
		t.Errorf("unsuppressed: %s", f)
	}
	warnings := assertions.Annotations_FromStack(stack).FindWarning(jsii.String("*"), any)
	t.Logf("%d errors, %d warnings", len(found), len(*warnings))
}

// nagSuppressions are the findings of the two packs that do not apply to
// triage, each on the resources it concerns, with the reason.
func nagSuppressions(d *dispatcher.Dispatcher) {
	on := func(c any, rules ...[2]string) {
		var sup []*cdknag.NagPackSuppression
		for _, r := range rules {
			sup = append(sup, &cdknag.NagPackSuppression{Id: jsii.String(r[0]), Reason: jsii.String(r[1])})
		}
		cdknag.NagSuppressions_AddResourceSuppressions(c, &sup, jsii.Bool(true))
	}
	basicRole := [2]string{"AwsSolutions-IAM4", "AWSLambdaBasicExecutionRole grants only writing the function's own log streams"}
	indexes := [2]string{"AwsSolutions-IAM5", "table/<name>/index/* is the CDK grant's form for querying the table's own indexes (by-created, by-type, by-due); objects under t/ are the task payloads, keyed by task id; the counters' Resource::* is dynamodb:ListStreams, which the stream event source needs and cannot scope"}
	noAsyncDLQ := [2]string{"Serverless-LambdaDLQ", "no function is invoked asynchronously with work to keep: the API is synchronous behind API Gateway, the consumer is started by the SQS mappings (a failed message stays on its queue and redrives to its DLQ) or a schedule, the counters by the stream (failed batches are retried), the promoter by its minute tick, which the next tick redoes"}
	noAsyncDest := [2]string{"Serverless-LambdaAsyncFailureDestination", "the scheduled invocations carry no payload to keep: a failed tick is redone by the next one (RetryAttempts 0 on purpose)"}
	mappingDest := [2]string{"Serverless-LambdaEventSourceMappingDestination", "a queue message the consumer does not finish stays on its queue (ReportBatchItemFailures) and SQS redrives it to the priority's DLQ after maxReceiveCount; the counters' stream batches are retried until the records expire, by design"}
	for _, fn := range []any{d.API, d.Consumer, d.Promoter, d.Counters} {
		on(fn, basicRole, indexes, noAsyncDLQ, noAsyncDest, mappingDest)
	}
	for _, q := range d.Queues {
		on(q.DLQ, [2]string{"Serverless-SQSRedrivePolicy", "this queue is the dead-letter queue of its priority's queue; the promoter reconciles what lands here"})
	}
	on(d.Bucket, [2]string{"AwsSolutions-S1", "the payload store is read and written only by triage's functions through their roles; server access logs would need a second bucket per deployment, and CloudTrail data events audit it when wanted"})
	on(d.HTTPAPI,
		[2]string{"AwsSolutions-APIG4", "every /api/v1 request is authorized inside the API function by scoped bearer tokens (Props.IAMAuth adds SigV4 in front); the dashboard routes serve static assets that hold no data"},
		[2]string{"AwsSolutions-APIG1", "the API function logs every request with its outcome; stage access logs would bill the same lines twice"},
		[2]string{"Serverless-APIGWAccessLogging", "the API function logs every request with its outcome; stage access logs would bill the same lines twice"},
		[2]string{"Serverless-APIGWDefaultThrottling", "the account's API Gateway throttling applies, and the API answers 429 under backpressure itself"},
	)
	on(d.PromoterSchedule, [2]string{"Serverless-EventBusDLQ", "a missed promoter tick carries nothing to keep: the next tick, a minute later, does its work"})
	if d.TokensSecret != nil {
		on(d.TokensSecret, [2]string{"AwsSolutions-SMG4", "the secret holds the API's bearer tokens, which clients hold too: they are rotated by the operator (update the secret), not on a schedule that would lock clients out"})
	}
}
