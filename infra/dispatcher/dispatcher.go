// Package dispatcher is the CDK construct of a triage deployment: the task
// table, one queue and dead-letter queue per priority, the HTTP API, the
// consumer and promoter functions with their schedules, least-privilege
// roles, alarms and stack outputs.
//
// Code of your own joins a deployment through grant methods and
// environments: a producer gets GrantSubmitDirect (or GrantSendMessages,
// or GrantInvokeApi) and ProducerEnvironment, a consumer running outside
// the stack's consumer function gets GrantConsume and ConsumerEnvironment.
//
// Table and queue shapes come from spec.New (internal/spec), the same spec the local
// bootstrap uses, and function settings travel as the environment variables
// triageconfig reads, so the deployed stack and `triage dev` cannot drift
// apart.
package dispatcher

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2authorizers"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/customresources"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/triageconfig"
)

// Dispatcher is one triage deployment. Its fields expose the resources so a
// stack can extend them (extra grants, dashboards) and tests can find them.
//
// To add constructs under it, use d.Construct as their scope, not d: jsii
// cannot pass a Go struct that embeds a construct back to the CDK.
type Dispatcher struct {
	constructs.Construct

	// Spec is the resource spec the table and queues were declared from.
	// Its names are the resources' names only with Props.PhysicalNames;
	// otherwise CloudFormation names them, so read names from the
	// resources (Table.TableName(), Queue.QueueUrl(), ...).
	Spec spec.Spec
	// Table is the single task table.
	Table awsdynamodb.Table
	// Bucket keeps payloads and results too large for a task's item
	// (objects under t/, deleted with their tasks by the counters function).
	Bucket awss3.Bucket
	// Queues holds each priority's queue and DLQ, in the spec's order.
	Queues []PriorityQueues
	// EventBus receives the lifecycle events when Props.Events is set (nil
	// otherwise): the counters function may put events on it, nothing else.
	EventBus awsevents.IEventBus
	// API, Consumer, Promoter and Counters are the four functions.
	API, Consumer, Promoter, Counters awslambda.Function
	// HTTPAPI fronts the API function.
	HTTPAPI awsapigatewayv2.HttpApi
	// TokensSecret is Props.TokensSecret: nil unless given (the tokens
	// minted with `triage tokens create` live hashed in the table).
	TokensSecret awssecretsmanager.ISecret
	// PromoterSchedule runs the promoter every PromoteInterval.
	PromoterSchedule awsevents.Rule
	// ConsumerSchedules start FanOut consumers every minute (five targets
	// per rule, EventBridge's limit) with Props.Scheduled; none otherwise.
	ConsumerSchedules []awsevents.Rule
	// ConsumerMappings are the queues' SQS event source mappings to the
	// consumer, one per priority in the spec's order (none with
	// Props.Scheduled).
	ConsumerMappings []awslambdaeventsources.SqsEventSource
	// Alarms are all the alarms, in creation order.
	Alarms []awscloudwatch.Alarm
	// Dashboard shows triage's key metrics when Props.Metrics.Dashboard
	// is set (nil otherwise).
	Dashboard awscloudwatch.Dashboard
	// ScheduleResources write Props.Schedules into the table, one each.
	ScheduleResources []customresources.AwsCustomResource

	physicalNames bool
	iamAuth       bool
	// handlers are the routed Lambda ARNs, which a consumer may invoke.
	handlers []string
	// apiRoute is the route of the task API, /api/v1/{proxy+}.
	apiRoute awsapigatewayv2.HttpRoute
	// producerEnv and consumerEnv are what ProducerEnvironment and
	// ConsumerEnvironment return.
	producerEnv, consumerEnv map[string]string
}

// PriorityQueues is one priority's queue pair.
type PriorityQueues struct {
	Priority string // "high", "medium" or "low"
	Spec     spec.Queue
	Queue    awssqs.Queue
	DLQ      awssqs.Queue
}

// New declares a triage deployment under scope. It returns an error for
// invalid props or when the function sources cannot be listed; errors raised
// inside the CDK itself (and bundling failures) surface as panics, as in any
// CDK app.
func New(scope constructs.Construct, id string, props *Props) (*Dispatcher, error) {
	p, err := props.resolved()
	if err != nil {
		return nil, fmt.Errorf("dispatcher %s: %w", id, err)
	}
	s := spec.New(p.Prefix)
	// Hash the function sources before declaring anything, so a missing or
	// broken package leaves no half-built construct behind.
	code := map[string]awslambda.Code{}
	for _, fn := range []struct{ name, pkg string }{
		{"api", apiPackage}, {"consumer", p.ConsumerPackage}, {"promoter", promoterPackage}, {"counters", countersPackage},
	} {
		if code[fn.name], err = goCode(p.SourceRoot, fn.pkg, p.BuildLog); err != nil {
			return nil, fmt.Errorf("dispatcher %s: function %s: %w", id, fn.name, err)
		}
	}
	d := &Dispatcher{Construct: constructs.NewConstruct(scope, jsii.String(id)), Spec: s, physicalNames: p.PhysicalNames, iamAuth: p.IAMAuth}
	for _, typ := range sortedKeys(p.Routes) {
		if t := p.Routes[typ]; isLambdaTarget(t) {
			d.handlers = append(d.handlers, t)
		}
	}

	d.Table = newTable(d.Construct, s.Table, p.RemovalPolicy, p.PhysicalNames, p.Provisioned)
	d.Bucket = newBucket(d.Construct, p.RemovalPolicy)
	for _, q := range s.Queues {
		if !p.Scheduled {
			// Lambda refuses an SQS event source whose queue hides a
			// message for less than the function's timeout. The consumer
			// sets every message's visibility itself once it has it
			// (claim, put-off, retry), so this only bounds how soon a
			// message handed to an invocation that died before its claim
			// comes back.
			q.VisibilityTimeout = max(q.VisibilityTimeout, p.Consumer.Timeout)
		}
		d.Queues = append(d.Queues, newQueuePair(d.Construct, q, p.PhysicalNames))
	}
	// The API's tokens live hashed in the table (`triage tokens create`),
	// which costs nothing idle; a secret is read only when one is given.
	d.TokensSecret = p.TokensSecret

	common := d.commonEnv(p)
	d.producerEnv = merge(d.locationEnv(p), tableEnv(p), typesEnv(p))
	d.consumerEnv = merge(common, consumerEnv(p))
	apiEnv := merge(common, typesEnv(p))
	if d.TokensSecret != nil {
		apiEnv[triageconfig.EnvTokensSecretARN] = *d.TokensSecret.SecretArn()
	}
	d.API = d.newFunction("Api", p, p.API, code["api"], apiEnv, false)
	d.Consumer = d.newFunction("Consumer", p, p.Consumer, code["consumer"], d.consumerEnv, true)
	promoterEnv := map[string]string{
		triageconfig.EnvLowAfter:        durationEnv(p.PromoteLowAfter),
		triageconfig.EnvMediumAfter:     durationEnv(p.PromoteMediumAfter),
		triageconfig.EnvPromoteInterval: p.PromoteInterval.String(),
	}
	if p.Scheduled {
		// The promoter starts more scheduled consumers as the backlog
		// grows; started by the queues, Lambda scales them itself.
		promoterEnv[triageconfig.EnvConsumerARN] = *d.Consumer.FunctionArn()
	}
	d.Promoter = d.newFunction("Promoter", p, p.Promoter, code["promoter"], merge(common, promoterEnv), true)
	d.Counters = d.newFunction("Counters", p, p.Counters, code["counters"], merge(common, d.eventsEnv(p)), false)
	d.countersTrigger()

	d.grant(p)
	d.declareSchedules(p)
	d.HTTPAPI = d.newHTTPAPI(p)
	// External handlers report progress to the API: the consumer gives them
	// its URL (progress_url) with each attempt.
	d.Consumer.AddEnvironment(jsii.String(triageconfig.EnvAPIURL), d.HTTPAPI.ApiEndpoint(), nil)
	d.consumerEnv[triageconfig.EnvAPIURL] = *d.HTTPAPI.ApiEndpoint() // and a user's own consumer (ConsumerEnvironment)
	d.schedule(p)
	d.alarms(p)
	d.observability(p)
	d.outputs()
	return d, nil
}

// newTable declares the on-demand task table from the spec, named as the
// spec says when physical, else by CloudFormation.
func newTable(scope constructs.Construct, t spec.Table, removal awscdk.RemovalPolicy, physical bool, pv *ProvisionedProps) awsdynamodb.Table {
	props := &awsdynamodb.TableProps{
		TableName:    physicalName(physical, t.Name),
		PartitionKey: stringKey(t.PartitionKey),
		BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		TimeToLiveAttribute: jsii.String(t.TTLAttribute),
		// The /stats counters are kept from the stream (internal/counters).
		Stream:        awsdynamodb.StreamViewType(t.Stream),
		RemovalPolicy: removal,
	}
	if pv != nil {
		props.BillingMode = awsdynamodb.BillingMode_PROVISIONED
		props.ReadCapacity, props.WriteCapacity = jsii.Number(pv.MinRead), jsii.Number(pv.MinWrite)
	}
	table := awsdynamodb.NewTable(scope, jsii.String("Table"), props)
	if pv != nil {
		autoScale(table.AutoScaleReadCapacity(scaling(pv.MinRead, pv.MaxRead)), pv)
		autoScale(table.AutoScaleWriteCapacity(scaling(pv.MinWrite, pv.MaxWrite)), pv)
	}
	for _, ix := range t.Indexes {
		gsi := &awsdynamodb.GlobalSecondaryIndexProps{
			IndexName:      jsii.String(ix.Name),
			PartitionKey:   stringKey(ix.PartitionKey),
			ProjectionType: awsdynamodb.ProjectionType(ix.Projection),
		}
		if len(ix.NonKeyAttributes) > 0 {
			gsi.NonKeyAttributes = jsii.Strings(ix.NonKeyAttributes...)
		}
		if ix.SortKey != "" {
			gsi.SortKey = stringKey(ix.SortKey)
		}
		if pv != nil {
			gsi.ReadCapacity, gsi.WriteCapacity = jsii.Number(pv.MinRead), jsii.Number(pv.MinWrite)
		}
		table.AddGlobalSecondaryIndex(gsi)
		if pv != nil {
			autoScale(table.AutoScaleGlobalSecondaryIndexReadCapacity(jsii.String(ix.Name), scaling(pv.MinRead, pv.MaxRead)), pv)
			autoScale(table.AutoScaleGlobalSecondaryIndexWriteCapacity(jsii.String(ix.Name), scaling(pv.MinWrite, pv.MaxWrite)), pv)
		}
	}
	return table
}

func scaling(lo, hi int) *awsdynamodb.EnableScalingProps {
	return &awsdynamodb.EnableScalingProps{MinCapacity: jsii.Number(lo), MaxCapacity: jsii.Number(hi)}
}

// autoScale keeps the provisioned units of one dimension at the target
// utilisation.
func autoScale(s awsdynamodb.IScalableTableAttribute, pv *ProvisionedProps) {
	s.ScaleOnUtilization(&awsdynamodb.UtilizationScalingProps{TargetUtilizationPercent: jsii.Number(pv.TargetUtilizationPercent)})
}

// newBucket declares the private bucket for large payloads and results.
// CloudFormation names it (S3 names are global); the functions learn the
// name from TRIAGE_BUCKET. Objects are removed with their tasks, so it has
// no expiry rule: none could know how long a task lives.
func newBucket(scope constructs.Construct, removal awscdk.RemovalPolicy) awss3.Bucket {
	return awss3.NewBucket(scope, jsii.String("Bucket"), &awss3.BucketProps{
		Encryption:        awss3.BucketEncryption_S3_MANAGED,
		BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
		EnforceSSL:        jsii.Bool(true),
		ObjectOwnership:   awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
		LifecycleRules: &[]*awss3.LifecycleRule{{
			Id:                                  jsii.String("abort-incomplete-uploads"),
			AbortIncompleteMultipartUploadAfter: awscdk.Duration_Days(jsii.Number(1)),
		}},
		RemovalPolicy: removal,
	})
}

func stringKey(name string) *awsdynamodb.Attribute {
	return &awsdynamodb.Attribute{Name: jsii.String(name), Type: awsdynamodb.AttributeType_STRING}
}

// newQueuePair declares one priority's DLQ and the queue that redrives to it.
// Both use SQS-managed encryption and refuse plain-HTTP access. They are
// named as the spec says when physical, else by CloudFormation.
func newQueuePair(scope constructs.Construct, q spec.Queue, physical bool) PriorityQueues {
	prio := string(q.Priority)
	dlq := awssqs.NewQueue(scope, jsii.String("DeadLetterQueue"+title(prio)), &awssqs.QueueProps{
		QueueName:       physicalName(physical, q.DLQName),
		RetentionPeriod: seconds(q.DLQRetention),
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
	})
	queue := awssqs.NewQueue(scope, jsii.String("Queue"+title(prio)), &awssqs.QueueProps{
		QueueName:         physicalName(physical, q.Name),
		VisibilityTimeout: seconds(q.VisibilityTimeout),
		RetentionPeriod:   seconds(q.RetentionPeriod),
		Encryption:        awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:        jsii.Bool(true),
		DeadLetterQueue: &awssqs.DeadLetterQueue{
			Queue:           dlq,
			MaxReceiveCount: jsii.Number(float64(q.MaxReceiveCount)),
		},
	})
	return PriorityQueues{Priority: prio, Spec: q, Queue: queue, DLQ: dlq}
}

// physicalName is name when the construct names its resources, else nil:
// CloudFormation generates one.
func physicalName(physical bool, name string) *string {
	if !physical {
		return nil
	}
	return jsii.String(name)
}

// commonEnv is the environment every function gets: where the resources
// are, the settings every reader and writer of the table shares, and the
// log level.
func (d *Dispatcher) commonEnv(p Props) map[string]string {
	return merge(d.locationEnv(p), tableEnv(p), map[string]string{triageconfig.EnvLogLevel: p.LogLevel})
}

// locationEnv says where the resources are: the table, the bucket, every
// queue and DLQ by URL, so no process derives a name from the prefix or
// looks a queue up by name (with generated names it could not).
func (d *Dispatcher) locationEnv(p Props) map[string]string {
	env := map[string]string{
		triageconfig.EnvPrefix: p.Prefix,
		triageconfig.EnvTable:  *d.Table.TableName(),
		triageconfig.EnvBucket: *d.Bucket.BucketName(),
	}
	for _, q := range d.Queues {
		up := strings.ToUpper(q.Priority)
		env[triageconfig.EnvQueueURLPrefix+up] = *q.Queue.QueueUrl()
		env[triageconfig.EnvDLQURLPrefix+up] = *q.DLQ.QueueUrl()
	}
	return env
}

// tableEnv holds the settings every process that writes tasks must share
// with the functions: the shard count of the index keys (a writer with
// another count would put entries where no reader looks), whether tasks
// write by-type entries (a writer without them leaves its tasks out of a
// listing by type), and the retention of terminal tasks.
func tableEnv(p Props) map[string]string {
	env := map[string]string{
		triageconfig.EnvShards:    intEnv(p.Shards),
		triageconfig.EnvRetention: durationEnv(p.Retention),
	}
	if p.TypeIndex {
		env[triageconfig.EnvTypeIndex] = "true"
	}
	return env
}

// typesEnv is the list of accepted task types, which the API checks on
// submit, and so does a direct producer.
func typesEnv(p Props) map[string]string {
	return map[string]string{triageconfig.EnvTypes: strings.Join(p.Types, ",")}
}

// ProducerEnvironment returns the TRIAGE_* variables a producer needs,
// for a Lambda function's or container's environment: where the table,
// the bucket and every queue and DLQ are (TRIAGE_TABLE, TRIAGE_BUCKET,
// TRIAGE_QUEUE_URL_*, TRIAGE_DLQ_URL_*, TRIAGE_PREFIX), the shard count
// and retention every writer of the table must share (TRIAGE_SHARDS,
// TRIAGE_RETENTION) and the task types the API accepts (TRIAGE_TYPES).
// Settings left at their defaults are absent, as on the functions. The
// values are the ones the functions get, most of them tokens that resolve
// at deploy time; each call returns a new map.
//
// A Go producer reads them as the functions do (the direct transport's
// environment option, or config from os.Getenv); one that sends raw
// messages with the AWS SDK needs only TRIAGE_QUEUE_URL_<PRIORITY>.
// Grant the access with GrantSubmitDirect or GrantSendMessages.
func (d *Dispatcher) ProducerEnvironment() map[string]*string { return envVars(d.producerEnv) }

// ConsumerEnvironment returns the stock consumer function's environment:
// ProducerEnvironment's variables, the log level and every consumer setting
// (weights, concurrency, retries, routes, webhook secret, ...). Give it to
// a consumer built on the worker package that runs outside the stack's
// consumer function (a container, say), together with GrantConsume, and it
// behaves as that function does. Each call returns a new map.
func (d *Dispatcher) ConsumerEnvironment() map[string]*string { return envVars(d.consumerEnv) }

// envVars converts env for the CDK, leaving out empty values so the
// process applies its own default.
func envVars(env map[string]string) map[string]*string {
	vars := map[string]*string{}
	for k, v := range env {
		if v != "" {
			vars[k] = jsii.String(v)
		}
	}
	return vars
}

// consumerEnv is the consumer's polling and handler configuration.
func consumerEnv(p Props) map[string]string {
	env := map[string]string{
		triageconfig.EnvConcurrency:  intEnv(p.Concurrency),
		triageconfig.EnvReservedHigh: reservedEnv(p.ReservedHigh),
		triageconfig.EnvPollWait:     durationEnv(p.PollWait),
		triageconfig.EnvRoutes:       routesEnv(p.Routes),
		triageconfig.EnvWeights:      weightsEnv(p.Weights),
		triageconfig.EnvRetryBackoff: retryEnv(p.Retry),
	}
	if p.Strict {
		env[triageconfig.EnvStrict] = "true"
	}
	if p.DemoHandlers {
		env[triageconfig.EnvDemoHandlers] = "true"
	}
	if p.WebhookSecret != nil {
		// A Secrets Manager value stays a dynamic reference in the template;
		// CloudFormation resolves it at deploy time.
		env[triageconfig.EnvWebhookSecret] = *p.WebhookSecret.UnsafeUnwrap()
	}
	return env
}

// newFunction declares one Go function with its own log group. Empty
// environment values are left out, so the function applies its own default.
// Scheduled functions get no async retries: the next tick comes soon anyway,
// and a retried poll would only overlap it.
func (d *Dispatcher) newFunction(id string, p Props, f FunctionProps, code awslambda.Code, env map[string]string, scheduled bool) awslambda.Function {
	logs := awslogs.NewLogGroup(d.Construct, jsii.String(id+"Logs"), &awslogs.LogGroupProps{
		Retention: p.LogRetention,
		// Logs are operational data of a function that no longer exists
		// once the stack is gone.
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	vars := envVars(env)
	props := &awslambda.FunctionProps{
		FunctionName: physicalName(p.PhysicalNames, p.Prefix+"-"+strings.ToLower(id)),
		Description:  jsii.String("triage " + strings.ToLower(id) + " (" + p.Prefix + ")"),
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: awslambda.Architecture_ARM_64(),
		Handler:      jsii.String("bootstrap"),
		Code:         code,
		MemorySize:   jsii.Number(float64(f.MemoryMiB)),
		Timeout:      awscdk.Duration_Seconds(jsii.Number(f.Timeout.Seconds())),
		Environment:  &vars,
		LogGroup:     logs,
	}
	if scheduled {
		props.RetryAttempts = jsii.Number(0)
	}
	return awslambda.NewFunction(d.Construct, jsii.String(id), props)
}

// countersTrigger feeds the table's stream to the counters function in
// batches gathered over up to 2 s, so counter writes per task shrink as
// the rate grows. Failed batches are retried whole (never bisected: the
// function recognises a retried batch by its first record) until the
// records expire from the stream after 24 hours. The same trigger carries
// lifecycle events (Props.Events, EventWebhooks): a batch whose events
// fail to publish is failed after its counters are applied, and given up
// after a few deliveries (internal/counters Publish), so no extra trigger
// or function is needed.
func (d *Dispatcher) countersTrigger() {
	d.Counters.AddEventSource(awslambdaeventsources.NewDynamoEventSource(d.Table, &awslambdaeventsources.DynamoEventSourceProps{
		StartingPosition:      awslambda.StartingPosition_TRIM_HORIZON,
		BatchSize:             jsii.Number(spec.StreamBatchSize),
		MaxBatchingWindow:     awscdk.Duration_Seconds(jsii.Number(spec.StreamBatchWindow.Seconds())),
		BisectBatchOnError:    jsii.Bool(false),
		ParallelizationFactor: jsii.Number(1),
		// Only task items count and make events: the stream also carries
		// the counters' own writes, worker heartbeats and controls, which
		// would each invoke the function for nothing.
		Filters: &[]*map[string]interface{}{
			awslambda.FilterCriteria_Filter(&map[string]interface{}{
				"dynamodb": map[string]interface{}{
					"Keys": map[string]interface{}{
						spec.AttrPK: map[string]interface{}{"S": awslambda.FilterRule_BeginsWith(jsii.String(spec.TaskKeyPrefix))},
					},
				},
			}),
		},
	}))
}

// eventsEnv declares the events bus (Props.Events) and returns where the
// counters function sends lifecycle events.
func (d *Dispatcher) eventsEnv(p Props) map[string]string {
	env := map[string]string{triageconfig.EnvEventWebhooks: p.EventWebhooks}
	if p.EventWebhooks != "" && p.WebhookSecret != nil {
		env[triageconfig.EnvWebhookSecret] = *p.WebhookSecret.UnsafeUnwrap()
	}
	if !p.Events {
		return env
	}
	d.EventBus = p.EventBus
	if d.EventBus == nil {
		d.EventBus = awsevents.NewEventBus(d.Construct, jsii.String("EventBus"), &awsevents.EventBusProps{
			EventBusName: physicalName(d.physicalNames, p.Prefix+"-events"),
			Description:  jsii.String("triage task lifecycle events (" + p.Prefix + "): source triage, detail-type task.*"),
		})
	}
	env[triageconfig.EnvEventBus] = *d.EventBus.EventBusArn()
	return env
}

// grant gives each function exactly the access its job needs. The
// consumer's policy is GrantConsume's, so a consumer outside the stack
// gets exactly what the stock one has.
func (d *Dispatcher) grant(p Props) {
	queues, dlqs := d.queueARNs()

	// Consumer: work the queues, dead-letter into the DLQs, read and write
	// the table and the objects, invoke the routed Lambda handlers. No
	// access to the tokens secret.
	d.GrantConsume(d.Consumer)

	// The other three read and write the table too; the grant covers the
	// table and its indexes. The counters function also reads the stream
	// (its trigger grants that).
	for _, fn := range []awslambda.Function{d.API, d.Promoter, d.Counters} {
		d.Table.GrantReadWriteData(fn)
	}

	// Payloads and results over the inline limit (internal/blob): the API
	// writes them (a submit) and removes the objects of writes that were
	// refused, and reads them; the counters function deletes the objects
	// of removed tasks. The promoter creates tasks too (a schedule's
	// tick, the callback of a batch its sweep completes), whose payload
	// may be over the inline limit: it writes them, never reads or
	// deletes. The consumer's access is GrantConsume's.
	objects := []string{d.objectsARN()}
	allow(d.API, objects, "s3:PutObject", "s3:GetObject", "s3:DeleteObject")
	allow(d.Promoter, objects, "s3:PutObject")
	// The counters function also completes the batches it counts members
	// of (internal/flow): it creates a callback task, whose payload may be
	// over the inline limit, and sends its message.
	allow(d.Counters, objects, "s3:PutObject", "s3:DeleteObject")
	allow(d.Counters, queues, "sqs:SendMessage")
	// Lifecycle events: the counters function puts them on the bus, only.
	if d.EventBus != nil {
		allow(d.Counters, []string{*d.EventBus.EventBusArn()}, "events:PutEvents")
	}

	// API: enqueue and report depths; read, replay and purge-by-receive the
	// DLQs, handing back at once what it read and did not delete
	// (ChangeMessageVisibility: without it a listing hid the DLQ's
	// messages from every replay for 5 s); read its tokens.
	allow(d.API, queues, "sqs:SendMessage", "sqs:GetQueueAttributes")
	allow(d.API, dlqs, "sqs:GetQueueAttributes", "sqs:ReceiveMessage", "sqs:SendMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility")
	if d.TokensSecret != nil {
		allow(d.API, []string{secretPolicyARN(d.TokensSecret)}, "secretsmanager:GetSecretValue")
		if key := d.TokensSecret.EncryptionKey(); key != nil {
			key.GrantDecrypt(d.API)
		}
	}

	// Promoter: re-send promoted and scheduled tasks, reconcile the DLQs,
	// and with the scheduled consumer start more consumers.
	allow(d.Promoter, queues, "sqs:SendMessage", "sqs:GetQueueAttributes")
	allow(d.Promoter, dlqs, "sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility", "sqs:GetQueueAttributes")
	if p.Scheduled {
		d.Consumer.GrantInvoke(d.Promoter)
	}
}

// allow adds one statement to fn's role.
func allow(fn awslambda.Function, resources []string, actions ...string) {
	fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(actions...),
		Resources: jsii.Strings(resources...),
	}))
}

// secretPolicyARN is the ARN to grant on. A secret imported by name has no
// random suffix in its ARN, so the policy must match any suffix, as the
// CDK's own grantRead does.
func secretPolicyARN(s awssecretsmanager.ISecret) string {
	if full := s.SecretFullArn(); full != nil {
		return *full
	}
	return *s.SecretArn() + "-??????"
}

// newHTTPAPI routes /api/v1/* and the dashboard at / to the API function.
// Bearer tokens are checked inside the function; IAMAuth adds SigV4 in front.
func (d *Dispatcher) newHTTPAPI(p Props) awsapigatewayv2.HttpApi {
	props := &awsapigatewayv2.HttpApiProps{
		ApiName:     jsii.String(p.Prefix + "-api"),
		Description: jsii.String("triage task API (" + p.Prefix + ")"),
	}
	if p.IAMAuth {
		props.DefaultAuthorizer = awsapigatewayv2authorizers.NewHttpIamAuthorizer()
	}
	api := awsapigatewayv2.NewHttpApi(d.Construct, jsii.String("HttpApi"), props)
	integration := awsapigatewayv2integrations.NewHttpLambdaIntegration(jsii.String("ApiIntegration"), d.API, nil)
	d.apiRoute = (*api.AddRoutes(&awsapigatewayv2.AddRoutesOptions{
		Path:        jsii.String("/api/v1/{proxy+}"),
		Methods:     &[]awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod_ANY},
		Integration: integration,
	}))[0]
	// The dashboard: its page and its two assets, served by the API function.
	for _, path := range []string{"/", "/dashboard.js", "/dashboard.css"} {
		api.AddRoutes(&awsapigatewayv2.AddRoutesOptions{
			Path:        jsii.String(path),
			Methods:     &[]awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod_GET},
			Integration: integration,
		})
	}
	return api
}

// schedule runs the promoter every PromoteInterval, and starts the
// consumer from the queues' event source mappings or, with Scheduled,
// FanOut consumers every minute.
func (d *Dispatcher) schedule(p Props) {
	d.PromoterSchedule = awsevents.NewRule(d.Construct, jsii.String("PromoterSchedule"), &awsevents.RuleProps{
		Description: jsii.String("triage promoter: aging, scheduled tasks, DLQ reconciliation"),
		Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(p.PromoteInterval.Minutes()))),
		Targets:     &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(d.Promoter, nil)},
	})
	if !p.Scheduled {
		d.consumerMappings(p)
		return
	}
	const perRule = 5 // EventBridge's limit of targets per rule
	for start := 0; start < p.FanOut; start += perRule {
		var targets []awsevents.IRuleTarget
		for i := start; i < p.FanOut && i < start+perRule; i++ {
			targets = append(targets, awseventstargets.NewLambdaFunction(d.Consumer, nil))
		}
		id := "ConsumerSchedule"
		if start > 0 {
			id += strconv.Itoa(start/perRule + 1)
		}
		d.ConsumerSchedules = append(d.ConsumerSchedules, awsevents.NewRule(d.Construct, jsii.String(id), &awsevents.RuleProps{
			Description: jsii.String(fmt.Sprintf("triage consumer polling: %d of %d instances every minute", len(targets), p.FanOut)),
			Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(1))),
			Targets:     &targets,
		}))
	}
}

// consumerMappings starts the consumer from each priority queue: an SQS
// event source mapping with ReportBatchItemFailures, so a message the
// consumer hands back, puts off or retries (and so does not delete) is
// listed as failed and left on its queue rather than deleted by Lambda.
// Lambda's pollers long-poll each queue (their receives are billed as SQS
// requests: the bench's idle month prices them); a message starts an
// invocation, which runs it and polls all three queues by weight while
// there is work, returning once nothing runs and every queue's last
// receive came back empty (see dispatch.Options.IdleStop).
func (d *Dispatcher) consumerMappings(p Props) {
	for _, q := range d.Queues {
		src := awslambdaeventsources.NewSqsEventSource(q.Queue, &awslambdaeventsources.SqsEventSourceProps{
			BatchSize:               jsii.Number(float64(p.Mapping.BatchSize)),
			MaxBatchingWindow:       awscdk.Duration_Seconds(jsii.Number(p.Mapping.Window.Seconds())),
			MaxConcurrency:          jsii.Number(float64(p.Mapping.MaxConcurrency)),
			ReportBatchItemFailures: jsii.Bool(true),
		})
		d.Consumer.AddEventSource(src)
		d.ConsumerMappings = append(d.ConsumerMappings, src)
	}
}

// alarms declares, per priority, a DLQ depth and an oldest-message-age alarm,
// and per function an errors and a throttles alarm.
func (d *Dispatcher) alarms(p Props) {
	a := p.Alarms
	period := awscdk.Duration_Minutes(jsii.Number(a.Period.Minutes()))
	add := func(id, desc string, m awscloudwatch.Metric, threshold float64) {
		alarm := m.CreateAlarm(d.Construct, jsii.String(id), &awscloudwatch.CreateAlarmOptions{
			AlarmDescription:   jsii.String(desc),
			Threshold:          jsii.Number(threshold),
			EvaluationPeriods:  jsii.Number(1),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD,
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		})
		if a.Topic != nil {
			action := awscloudwatchactions.NewSnsAction(a.Topic)
			alarm.AddAlarmAction(action)
			alarm.AddOkAction(action)
		}
		d.Alarms = append(d.Alarms, alarm)
	}
	maxOver := &awscloudwatch.MetricOptions{Statistic: jsii.String("Maximum"), Period: period}
	sumOver := &awscloudwatch.MetricOptions{Statistic: jsii.String("Sum"), Period: period}
	for _, q := range d.Queues {
		t := title(q.Priority)
		// Fixed names are known now; generated ones are named by the
		// priority and prefix, which say the same to a reader.
		queueName, dlqName := q.Spec.Name, q.Spec.DLQName
		if !d.physicalNames {
			queueName = fmt.Sprintf("triage %s %s queue", p.Prefix, q.Priority)
			dlqName = fmt.Sprintf("triage %s %s", p.Prefix, q.Priority)
		}
		add("DeadLetters"+t,
			fmt.Sprintf("%s DLQ holds more than %v messages: tasks that crashed the consumer %d times", dlqName, a.DLQDepthThreshold, q.Spec.MaxReceiveCount),
			q.DLQ.MetricApproximateNumberOfMessagesVisible(maxOver), a.DLQDepthThreshold)
		add("OldestMessage"+t,
			fmt.Sprintf("%s: oldest message older than %s; consumers are not keeping up", queueName, a.OldestMessageAge),
			q.Queue.MetricApproximateAgeOfOldestMessage(maxOver), a.OldestMessageAge.Seconds())
	}
	for _, f := range []struct {
		id string
		fn awslambda.Function
	}{{"Api", d.API}, {"Consumer", d.Consumer}, {"Promoter", d.Promoter}, {"Counters", d.Counters}} {
		add(f.id+"Errors", "triage "+strings.ToLower(f.id)+" function errors", f.fn.MetricErrors(sumOver), 0)
		add(f.id+"Throttles", "triage "+strings.ToLower(f.id)+" function throttles", f.fn.MetricThrottles(sumOver), 0)
	}
}

// outputs exports what clients and operators need. The logical ids are fixed
// ("ApiUrl", "QueueUrlHigh", ...) so scripts can read them by name; that
// limits a stack to one Dispatcher (with or without fixed resource names).
func (d *Dispatcher) outputs() {
	out := func(id, desc string, value *string) {
		o := awscdk.NewCfnOutput(d.Construct, jsii.String(id), &awscdk.CfnOutputProps{Value: value, Description: jsii.String(desc)})
		o.OverrideLogicalId(jsii.String(id))
	}
	url := d.HTTPAPI.Url()
	if url == nil {
		url = d.HTTPAPI.ApiEndpoint()
	}
	out("ApiUrl", "Base URL of the triage HTTP API", url)
	out("TableName", "DynamoDB task table", d.Table.TableName())
	out("BucketName", "S3 bucket for payloads and results over the inline limit", d.Bucket.BucketName())
	if d.TokensSecret != nil {
		out("TokensSecretArn", "Secrets Manager secret holding the API bearer tokens", d.TokensSecret.SecretArn())
	}
	for _, q := range d.Queues {
		t := title(q.Priority)
		out("QueueUrl"+t, q.Priority+" priority queue", q.Queue.QueueUrl())
		out("DlqUrl"+t, q.Priority+" priority dead-letter queue", q.DLQ.QueueUrl())
	}
}

// sortedKeys returns m's keys in order, so maps render the same on every synth.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// weightsEnv encodes weights as TRIAGE_WEIGHTS expects, in a fixed order.
func weightsEnv(w map[string]int) string {
	parts := make([]string, 0, len(w))
	for _, prio := range sortedKeys(w) {
		parts = append(parts, fmt.Sprintf("%s=%d", prio, w[prio]))
	}
	return strings.Join(parts, ",")
}

// merge returns the union of maps; a later map wins.
func merge(maps ...map[string]string) map[string]string {
	m := map[string]string{}
	for _, x := range maps {
		for k, v := range x {
			m[k] = v
		}
	}
	return m
}

// durationEnv renders d for time.ParseDuration; zero means unset.
func durationEnv(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

// reservedEnv renders ReservedHigh: zero is unset (the default),
// triageconfig.Off none ("0").
func reservedEnv(n int) string {
	if n == triageconfig.Off {
		return "0"
	}
	return intEnv(n)
}

// intEnv renders n; zero means unset.
func intEnv(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

func seconds(d time.Duration) awscdk.Duration {
	return awscdk.Duration_Seconds(jsii.Number(d.Seconds()))
}

func title(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// retryEnv encodes retry waits as TRIAGE_RETRY_BACKOFF expects, in a fixed order.
func retryEnv(r map[string]RetryBackoff) string {
	parts := make([]string, 0, len(r))
	for _, prio := range sortedKeys(r) {
		parts = append(parts, fmt.Sprintf("%s=%s:%s", prio, r[prio].Base, r[prio].Max))
	}
	return strings.Join(parts, ",")
}
