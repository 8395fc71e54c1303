package dispatcher_test

import (
	"log"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"

	"github.com/triagehq/triage/infra/dispatcher"
)

// A CDK app in your own module (example.com/app, which requires
// github.com/triagehq/triage and github.com/triagehq/triage/infra): a
// triage deployment whose consumer function runs your Go handlers, and a
// producer function of yours that submits tasks with the Go direct
// transport.
func Example() {
	defer jsii.Close()
	app := awscdk.NewApp(nil)
	stack := awscdk.NewStack(app, jsii.String("Tasks"), nil)

	d, err := dispatcher.New(stack, "Dispatcher", &dispatcher.Props{
		Prefix: "acme",
		// `go build` runs in your module's root (where cdk.json starts
		// the app): the stock functions by import path, the consumer from
		// your main package built on github.com/triagehq/triage/worker.
		SourceRoot:      ".",
		ConsumerPackage: "./cmd/consumer", // worker.StartLambda: the queues start it
	})
	if err != nil {
		log.Fatal(err)
	}

	// The producer: where the table, bucket and queues are, and the right
	// to submit directly (no HTTP hop), nothing more.
	env := d.ProducerEnvironment()
	signup := awslambda.NewFunction(stack, jsii.String("Signup"), &awslambda.FunctionProps{
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: awslambda.Architecture_ARM_64(),
		Handler:      jsii.String("bootstrap"),
		Code:         awslambda.Code_FromAsset(jsii.String("build/signup"), nil),
		Environment:  &env,
	})
	d.GrantSubmitDirect(signup)

	// What your handlers use besides triage is yours to grant, to the
	// consumer function: e.g. bucket.GrantRead(d.Consumer, nil).

	app.Synth(nil)
}

// A consumer built on the worker package that runs as a container instead
// of in the stack's consumer function: it gets the consumer function's
// environment and exactly its permissions.
func ExampleDispatcher_GrantConsume() {
	defer jsii.Close()
	app := awscdk.NewApp(nil)
	stack := awscdk.NewStack(app, jsii.String("Tasks"), nil)
	d, err := dispatcher.New(stack, "Dispatcher", &dispatcher.Props{SourceRoot: "."})
	if err != nil {
		log.Fatal(err)
	}

	task := awsecs.NewFargateTaskDefinition(stack, jsii.String("WorkerTask"), &awsecs.FargateTaskDefinitionProps{
		Cpu:            jsii.Number(512),
		MemoryLimitMiB: jsii.Number(1024),
		RuntimePlatform: &awsecs.RuntimePlatform{
			CpuArchitecture:       awsecs.CpuArchitecture_ARM64(),
			OperatingSystemFamily: awsecs.OperatingSystemFamily_LINUX(),
		},
	})
	env := d.ConsumerEnvironment()
	task.AddContainer(jsii.String("worker"), &awsecs.ContainerDefinitionOptions{
		// Your main: worker.New(...), handlers, then w.Run(ctx).
		Image:       awsecs.ContainerImage_FromAsset(jsii.String("."), &awsecs.AssetImageProps{File: jsii.String("cmd/worker/Dockerfile")}),
		Environment: &env,
		Logging:     awsecs.LogDrivers_AwsLogs(&awsecs.AwsLogDriverProps{StreamPrefix: jsii.String("worker")}),
	})
	d.GrantConsume(task.TaskRole())
	// Run it with an awsecs.FargateService in your cluster.

	app.Synth(nil)
}

// A producer that sends raw task messages, {"type":"...","payload":{...}},
// with the AWS SDK straight to a queue, which the consumer adopts as tasks.
// It needs only the queue URLs and sqs:SendMessage.
func ExampleDispatcher_GrantSendMessages() {
	defer jsii.Close()
	app := awscdk.NewApp(nil)
	stack := awscdk.NewStack(app, jsii.String("Tasks"), nil)
	d, err := dispatcher.New(stack, "Dispatcher", &dispatcher.Props{SourceRoot: "."})
	if err != nil {
		log.Fatal(err)
	}

	sender := awslambda.NewFunction(stack, jsii.String("Importer"), &awslambda.FunctionProps{
		Runtime: awslambda.Runtime_PYTHON_3_13(),
		Handler: jsii.String("importer.handler"),
		Code:    awslambda.Code_FromAsset(jsii.String("importer"), nil),
	})
	env := d.ProducerEnvironment()
	for _, p := range []string{"HIGH", "MEDIUM", "LOW"} {
		name := "TRIAGE_QUEUE_URL_" + p
		sender.AddEnvironment(jsii.String(name), env[name], nil)
	}
	d.GrantSendMessages(sender)

	app.Synth(nil)
}

// With IAMAuth every route wants SigV4: a caller's role gets
// execute-api:Invoke on the task API, and still sends a bearer token, in
// X-Triage-Token.
func ExampleDispatcher_GrantInvokeApi() {
	defer jsii.Close()
	app := awscdk.NewApp(nil)
	stack := awscdk.NewStack(app, jsii.String("Tasks"), nil)
	d, err := dispatcher.New(stack, "Dispatcher", &dispatcher.Props{SourceRoot: ".", IAMAuth: true})
	if err != nil {
		log.Fatal(err)
	}

	caller := awsiam.NewRole(stack, jsii.String("Reporting"), &awsiam.RoleProps{
		AssumedBy: awsiam.NewServicePrincipal(jsii.String("ecs-tasks.amazonaws.com"), nil),
	})
	d.GrantInvokeApi(caller)
	awscdk.NewCfnOutput(stack, jsii.String("TriageApi"), &awscdk.CfnOutputProps{Value: d.HTTPAPI.ApiEndpoint()})

	app.Synth(nil)
}
