// Command infra is the CDK app of triage: one stack, TriageStack, holding a
// dispatcher.Dispatcher. cdk.json at the repository root runs it as
// `cd infra && go run .`.
//
// A few settings can be given as CDK context (`cdk synth -c key=value` or
// cdk.json's "context"):
//
//	prefix         resource name prefix (default "triage")
//	physicalNames  "false" lets CloudFormation name the table, queues and functions
//	               (default "true": <prefix>-tasks, <prefix>-high, ...; see below)
//	scheduled      "true" starts the consumer every minute, always polling (about $90 a
//	               month idle), instead of from the queues' event source mappings
//	fanOut         consumers started every minute with scheduled (default 1)
//	dashboard      "true" adds the CloudWatch dashboard ($3 a month)
//	iamAuth        "true" puts IAM authorization on the API routes
//	demoHandlers   "true" makes the consumer also run the demo handlers (trying it out)
//	routes         task type handlers, "type=arn:aws:lambda:...,type2=https://hook"
//	alarmTopicArn  SNS topic that receives alarm notifications
//	removalPolicy  "destroy" deletes the table with the stack (default "retain")
//
// Unlike the construct, whose default follows the CDK convention of
// generated names, this app keeps the fixed names it has always given: a
// deployed TriageStack whose names changed would have its table, queues and
// functions replaced. Set physicalNames=false only for a new stack.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/triagehq/triage/infra/dispatcher"
	"github.com/triagehq/triage/triageconfig"
)

// StackName is the name of the one stack this app defines.
const StackName = "TriageStack"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "infra:", err)
		os.Exit(1)
	}
}

func run() error {
	defer jsii.Close()
	root, err := dispatcher.FindRepoRoot(".")
	if err != nil {
		return err
	}
	// The CDK CLI runs in the repository root (where cdk.json is) and hands
	// the app paths relative to it: CDK_OUTDIR, CDK_PERF_COUNTERS_FILE,
	// CDK_ERROR_FILE and whatever later versions add. cdk.json has to
	// `cd infra` to run this module, so move back to the root before
	// anything reads them: every relative path then means what the CLI meant.
	if err := os.Chdir(root); err != nil {
		return fmt.Errorf("change to the repository root: %w", err)
	}
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(outDir(root, os.Getenv("CDK_OUTDIR")))})
	if _, err := NewStack(app, StackName, root); err != nil {
		return err
	}
	app.Synth(nil)
	return nil
}

// outDir is where the cloud assembly goes: CDK_OUTDIR as the CLI gives it
// (relative to the root, the working directory by now), or root/cdk.out
// when the app runs without the CLI.
func outDir(root, env string) string {
	if env == "" {
		return filepath.Join(root, "cdk.out")
	}
	return env
}

// NewStack declares TriageStack in app from the context settings. The stack
// is environment-agnostic unless the CLI provides an account and region.
func NewStack(app constructs.Construct, name, root string) (awscdk.Stack, error) {
	var env *awscdk.Environment
	if acct, region := os.Getenv("CDK_DEFAULT_ACCOUNT"), os.Getenv("CDK_DEFAULT_REGION"); acct != "" && region != "" {
		env = &awscdk.Environment{Account: jsii.String(acct), Region: jsii.String(region)}
	}
	stack := awscdk.NewStack(app, jsii.String(name), &awscdk.StackProps{
		Env:         env,
		Description: jsii.String("triage: serverless priority task dispatcher"),
	})
	props, err := propsFromContext(stack, func(key string) string {
		if v := stack.Node().TryGetContext(jsii.String(key)); v != nil {
			return fmt.Sprint(v)
		}
		return ""
	})
	if err != nil {
		return nil, err
	}
	props.SourceRoot = root
	if _, err := dispatcher.New(stack, "Dispatcher", props); err != nil {
		return nil, err
	}
	return stack, nil
}

// propsFromContext reads the settings documented on the package through get,
// which returns "" for a missing key.
func propsFromContext(scope constructs.Construct, get func(string) string) (*dispatcher.Props, error) {
	p := &dispatcher.Props{Prefix: get("prefix"), PhysicalNames: true}
	if v := get("fanOut"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("context fanOut: want a whole number, got %q", v)
		}
		p.FanOut = n
	}
	for key, dst := range map[string]*bool{"iamAuth": &p.IAMAuth, "demoHandlers": &p.DemoHandlers, "physicalNames": &p.PhysicalNames, "scheduled": &p.Scheduled, "dashboard": &p.Metrics.Dashboard} {
		if v := get(key); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("context %s: want true or false, got %q", key, v)
			}
			*dst = b
		}
	}
	if v := get("routes"); v != "" {
		routes, err := triageconfig.ParseRoutes(v) // the functions' own TRIAGE_ROUTES parser
		if err != nil {
			return nil, fmt.Errorf("context routes: %w", err)
		}
		p.Routes = routes
	}
	if v := get("alarmTopicArn"); v != "" {
		p.Alarms.Topic = awssns.Topic_FromTopicArn(scope, jsii.String("AlarmTopic"), jsii.String(v))
	}
	switch v := strings.ToLower(get("removalPolicy")); v {
	case "", "retain":
	case "destroy":
		p.RemovalPolicy = awscdk.RemovalPolicy_DESTROY
	default:
		return nil, fmt.Errorf("context removalPolicy: want retain or destroy, got %q", v)
	}
	return p, nil
}
