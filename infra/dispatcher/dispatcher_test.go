package dispatcher_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/triagehq/triage/infra/dispatcher"
	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/triageconfig"
)

// testEnv is shared by every test of this binary: synthesizing runs jsii and
// three arm64 `go build`s, so it happens once (see stackUnderTest) and the
// table-driven tests read the same template.
type testEnv struct {
	root   string // repository root (SourceRoot)
	outDir string // removed by TestMain
	once   sync.Once
	fix    *fixture
	err    error
}

var env testEnv

func TestMain(m *testing.M) {
	code := func() int {
		dir, err := os.MkdirTemp("", "triage-infra-test-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		env.outDir = dir
		if env.root, err = dispatcher.FindRepoRoot("."); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer jsii.Close()
		return m.Run()
	}()
	os.Exit(code)
}

// fixture is one synthesized TriageStack-like stack.
type fixture struct {
	stack     awscdk.Stack
	d         *dispatcher.Dispatcher
	tmpl      assertions.Template
	resources map[string]resource // logical id -> resource, from the template JSON
	outputs   map[string]any
}

type resource struct {
	Type           string
	Properties     map[string]any
	DeletionPolicy string
}

// stackUnderTest synthesizes the default deployment once per test binary.
func stackUnderTest(t *testing.T) *fixture {
	t.Helper()
	env.once.Do(func() {
		start := time.Now()
		env.fix, env.err = synth(filepath.Join(env.outDir, "a"), true, nil)
		fmt.Fprintf(os.Stderr, "synth with bundling took %s\n", time.Since(start).Round(100*time.Millisecond))
	})
	if env.err != nil {
		t.Fatal(env.err)
	}
	return env.fix
}

// synth builds a stack in a new app whose outdir is dir. bundle=false sets
// the context the CLI uses to skip bundling, for tests that only need the
// template. nil props are those of this repository's app, which keeps
// fixed names.
func synth(dir string, bundle bool, props *dispatcher.Props) (*fixture, error) {
	return synthWith(dir, bundle, props, nil)
}

// synthWith is synth with extra, when not nil, called to add constructs
// (grantees, say) to the stack before the template is taken.
func synthWith(dir string, bundle bool, props *dispatcher.Props, extra func(awscdk.Stack, *dispatcher.Dispatcher)) (*fixture, error) {
	ctx, err := cdkContext()
	if err != nil {
		return nil, err
	}
	if !bundle {
		ctx["aws:cdk:bundling-stacks"] = []string{}
	}
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(dir), Context: &ctx})
	stack := awscdk.NewStack(app, jsii.String("TriageStack"), nil)
	if props == nil {
		props = &dispatcher.Props{PhysicalNames: true, Metrics: dispatcher.MetricsProps{Dashboard: true}}
	}
	if props.SourceRoot == "" {
		props.SourceRoot = env.root
	}
	d, err := dispatcher.New(stack, "Dispatcher", props)
	if err != nil {
		return nil, err
	}
	if extra != nil {
		extra(stack, d)
	}
	tmpl := assertions.Template_FromStack(stack, nil)
	raw, err := json.Marshal(tmpl.ToJSON())
	if err != nil {
		return nil, fmt.Errorf("template to JSON: %w", err)
	}
	var doc struct {
		Resources map[string]resource
		Outputs   map[string]any
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("decode template: %w", err)
	}
	return &fixture{stack: stack, d: d, tmpl: tmpl, resources: doc.Resources, outputs: doc.Outputs}, nil
}

// cdkContext returns the context of the repository's cdk.json, so the tests
// see the same feature flags as `cdk synth`.
func cdkContext() (map[string]any, error) {
	b, err := os.ReadFile(filepath.Join(env.root, "cdk.json"))
	if err != nil {
		return nil, fmt.Errorf("read cdk.json: %w", err)
	}
	var c struct{ Context map[string]any }
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("parse cdk.json: %w", err)
	}
	if c.Context == nil {
		c.Context = map[string]any{}
	}
	return c.Context, nil
}

// id returns the logical id of construct c's CloudFormation resource.
func (f *fixture) id(c constructs.IConstruct) string {
	return *f.stack.GetLogicalId(c.Node().DefaultChild().(awscdk.CfnElement))
}

func (f *fixture) ofType(typ string) map[string]resource {
	m := map[string]resource{}
	for id, r := range f.resources {
		if r.Type == typ {
			m[id] = r
		}
	}
	return m
}

// check runs an assertions call, which panics on mismatch, as a test error.
func check(t *testing.T, what string, fn func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s: %v", what, r)
		}
	}()
	fn()
}

func getAtt(id, attr string) map[string]any { return map[string]any{"Fn::GetAtt": []any{id, attr}} }
func ref(id string) map[string]any          { return map[string]any{"Ref": id} }

// normalize round-trips v through JSON so Go literals compare with decoded template values.
func normalize(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func equalJSON(t *testing.T, what string, got, want any) {
	t.Helper()
	if g, w := normalize(t, got), normalize(t, want); !reflect.DeepEqual(g, w) {
		gb, _ := json.Marshal(g)
		wb, _ := json.Marshal(w)
		t.Errorf("%s:\n got %s\nwant %s", what, gb, wb)
	}
}

func TestResourceCounts(t *testing.T) {
	f := stackUnderTest(t)
	s := spec.New("")
	for _, c := range []struct {
		typ  string
		want int
	}{
		{"AWS::DynamoDB::Table", 1},
		{"AWS::S3::Bucket", 1},
		{"AWS::S3::BucketPolicy", 1}, // EnforceSSL
		{"AWS::SQS::Queue", 2 * len(s.Queues)},
		{"AWS::SQS::QueuePolicy", 2 * len(s.Queues)}, // EnforceSSL
		{"AWS::Lambda::Function", 4},
		{"AWS::Logs::LogGroup", 4},
		{"AWS::Lambda::EventSourceMapping", 1 + len(s.Queues)}, // the counters' stream + the consumer's queues
		{"AWS::Events::Rule", 1},                               // the promoter's: the queues start the consumer
		{"AWS::CloudWatch::Alarm", 2*len(s.Queues) + 2*4 + metricAlarms},
		{"AWS::CloudWatch::Dashboard", 1},
		{"AWS::ApiGatewayV2::Api", 1},
		{"AWS::ApiGatewayV2::Route", 4},
		{"AWS::ApiGatewayV2::Authorizer", 0},
		{"AWS::SecretsManager::Secret", 0},    // the tokens live hashed in the table
		{"AWS::Lambda::EventInvokeConfig", 2}, // no async retries for the scheduled functions
	} {
		t.Run(c.typ, func(t *testing.T) {
			check(t, c.typ, func() { f.tmpl.ResourceCountIs(jsii.String(c.typ), jsii.Number(c.want)) })
		})
	}
}

func TestTableFollowsSpec(t *testing.T) {
	f := stackUnderTest(t)
	tbl := f.d.Spec.Table
	r, ok := f.resources[f.id(f.d.Table)]
	if !ok {
		t.Fatal("table resource not found")
	}
	if r.DeletionPolicy != "Retain" {
		t.Errorf("DeletionPolicy = %q, want Retain", r.DeletionPolicy)
	}

	// Derive every expected value from the spec.
	keys := func(pk, sk string) []map[string]string {
		k := []map[string]string{{"AttributeName": pk, "KeyType": "HASH"}}
		if sk != "" {
			k = append(k, map[string]string{"AttributeName": sk, "KeyType": "RANGE"})
		}
		return k
	}
	attrs := map[string]bool{tbl.PartitionKey: true}
	var gsis []map[string]any
	for _, ix := range tbl.Indexes {
		attrs[ix.PartitionKey] = true
		if ix.SortKey != "" {
			attrs[ix.SortKey] = true
		}
		proj := map[string]any{"ProjectionType": string(ix.Projection)}
		if len(ix.NonKeyAttributes) > 0 {
			proj["NonKeyAttributes"] = ix.NonKeyAttributes
		}
		gsis = append(gsis, map[string]any{
			"IndexName":  ix.Name,
			"KeySchema":  keys(ix.PartitionKey, ix.SortKey),
			"Projection": proj,
		})
	}
	var defs []map[string]string
	for _, a := range sortedKeys(attrs) {
		defs = append(defs, map[string]string{"AttributeName": a, "AttributeType": "S"})
	}

	p := r.Properties
	gotDefs, _ := p["AttributeDefinitions"].([]any)
	sort.Slice(gotDefs, func(i, j int) bool {
		return fmt.Sprint(gotDefs[i].(map[string]any)["AttributeName"]) < fmt.Sprint(gotDefs[j].(map[string]any)["AttributeName"])
	})
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"TableName", p["TableName"], tbl.Name},
		{"KeySchema", p["KeySchema"], keys(tbl.PartitionKey, "")},
		{"AttributeDefinitions", gotDefs, defs},
		{"GlobalSecondaryIndexes", p["GlobalSecondaryIndexes"], gsis},
		{"TimeToLiveSpecification", p["TimeToLiveSpecification"], map[string]any{"AttributeName": tbl.TTLAttribute, "Enabled": true}},
		{"BillingMode", p["BillingMode"], "PAY_PER_REQUEST"},
		{"PointInTimeRecovery", p["PointInTimeRecoverySpecification"], map[string]any{"PointInTimeRecoveryEnabled": true}},
		{"StreamSpecification", p["StreamSpecification"], map[string]any{"StreamViewType": tbl.Stream}},
	} {
		t.Run(c.name, func(t *testing.T) { equalJSON(t, c.name, c.got, c.want) })
	}
	// The same through the assertions library, as a cross-check of the matcher path.
	check(t, "HasResourceProperties", func() {
		f.tmpl.HasResourceProperties(jsii.String("AWS::DynamoDB::Table"), map[string]any{
			"TableName":               tbl.Name,
			"TimeToLiveSpecification": map[string]any{"AttributeName": tbl.TTLAttribute, "Enabled": true},
		})
	})
}

func TestQueuesRedriveToOwnDLQ(t *testing.T) {
	f := stackUnderTest(t)
	if len(f.d.Queues) != len(f.d.Spec.Queues) {
		t.Fatalf("%d queue pairs, spec has %d", len(f.d.Queues), len(f.d.Spec.Queues))
	}
	for i, q := range f.d.Queues {
		sq := f.d.Spec.Queues[i]
		t.Run(string(sq.Priority), func(t *testing.T) {
			qid, dlqID := f.id(q.Queue), f.id(q.DLQ)
			queue, dlq := f.resources[qid].Properties, f.resources[dlqID].Properties
			equalJSON(t, "RedrivePolicy", queue["RedrivePolicy"], map[string]any{
				"deadLetterTargetArn": getAtt(dlqID, "Arn"),
				"maxReceiveCount":     sq.MaxReceiveCount,
			})
			equalJSON(t, "QueueName", queue["QueueName"], sq.Name)
			// Lambda refuses an event source whose queue's visibility
			// timeout is below the function's timeout (5 min by default).
			equalJSON(t, "VisibilityTimeout", queue["VisibilityTimeout"], max(sq.VisibilityTimeout, 5*time.Minute).Seconds())
			equalJSON(t, "MessageRetentionPeriod", queue["MessageRetentionPeriod"], sq.RetentionPeriod.Seconds())
			equalJSON(t, "SqsManagedSseEnabled", queue["SqsManagedSseEnabled"], true)
			equalJSON(t, "DLQ QueueName", dlq["QueueName"], sq.DLQName)
			equalJSON(t, "DLQ MessageRetentionPeriod", dlq["MessageRetentionPeriod"], sq.DLQRetention.Seconds())
			equalJSON(t, "DLQ SqsManagedSseEnabled", dlq["SqsManagedSseEnabled"], true)
			if _, ok := dlq["RedrivePolicy"]; ok {
				t.Error("the DLQ itself has a RedrivePolicy")
			}
		})
	}
}

// Each priority queue starts the consumer through an SQS event source
// mapping that reports batch item failures, with the stated batch size,
// window and maximum concurrency; the queue's consumer role may receive,
// delete and read the queue's attributes, as the mapping needs.
func TestConsumerMappings(t *testing.T) {
	f := stackUnderTest(t)
	def := spec.DefaultMapping()
	consumer := normalize(t, ref(f.id(f.d.Consumer)))
	byQueue := map[string]map[string]any{}
	for _, m := range f.ofType("AWS::Lambda::EventSourceMapping") {
		if reflect.DeepEqual(m.Properties["FunctionName"], consumer) {
			byQueue[fmt.Sprint(m.Properties["EventSourceArn"])] = m.Properties
		}
	}
	if len(byQueue) != len(f.d.Queues) || len(f.d.ConsumerMappings) != len(f.d.Queues) {
		t.Fatalf("%d mappings to the consumer (%d declared), want one per queue (%d)", len(byQueue), len(f.d.ConsumerMappings), len(f.d.Queues))
	}
	stmts := f.policyStatements(t, f.d.Consumer)
	for _, q := range f.d.Queues {
		arn := getAtt(f.id(q.Queue), "Arn")
		m, ok := byQueue[fmt.Sprint(normalize(t, arn))]
		if !ok {
			t.Errorf("%s: no mapping to the consumer", q.Priority)
			continue
		}
		equalJSON(t, q.Priority+" FunctionResponseTypes", m["FunctionResponseTypes"], []string{"ReportBatchItemFailures"})
		equalJSON(t, q.Priority+" BatchSize", m["BatchSize"], def.BatchSize)
		equalJSON(t, q.Priority+" ScalingConfig", m["ScalingConfig"], map[string]any{"MaximumConcurrency": def.MaxConcurrency})
		if w, ok := m["MaximumBatchingWindowInSeconds"]; ok {
			equalJSON(t, q.Priority+" MaximumBatchingWindowInSeconds", w, def.Window.Seconds())
		}
		for _, a := range []string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"} {
			if !allows(t, stmts, a, arn) {
				t.Errorf("%s: the consumer may not %s, which its mapping needs", q.Priority, a)
			}
		}
	}

	t.Run("props", func(t *testing.T) {
		g, err := synth(filepath.Join(env.outDir, "mapping"), false, &dispatcher.Props{
			Mapping: dispatcher.MappingProps{BatchSize: 10, Window: 2 * time.Second, MaxConcurrency: 50},
		})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, m := range g.ofType("AWS::Lambda::EventSourceMapping") {
			if m.Properties["EventSourceArn"] == nil || strings.Contains(fmt.Sprint(m.Properties["EventSourceArn"]), "StreamArn") {
				continue
			}
			n++
			equalJSON(t, "BatchSize", m.Properties["BatchSize"], 10)
			equalJSON(t, "MaximumBatchingWindowInSeconds", m.Properties["MaximumBatchingWindowInSeconds"], 2)
			equalJSON(t, "ScalingConfig", m.Properties["ScalingConfig"], map[string]any{"MaximumConcurrency": 50})
			equalJSON(t, "FunctionResponseTypes", m.Properties["FunctionResponseTypes"], []string{"ReportBatchItemFailures"})
		}
		if n != 3 {
			t.Errorf("%d queue mappings, want 3", n)
		}
	})
}

func TestFunctions(t *testing.T) {
	f := stackUnderTest(t)
	for _, c := range []struct {
		name        string
		fn          awslambda.Function
		wantEnv     []string
		withoutEnv  []string
		wantAsyncNo bool
	}{
		{"api", f.d.API, nil, []string{triageconfig.EnvTokensSecretARN, triageconfig.EnvConsumerARN, triageconfig.EnvWebhookSecret}, false},
		{"consumer", f.d.Consumer, nil, []string{triageconfig.EnvTokensSecretARN, triageconfig.EnvConsumerARN}, true},
		{"promoter", f.d.Promoter, []string{triageconfig.EnvPromoteInterval}, []string{triageconfig.EnvTokensSecretARN, triageconfig.EnvConsumerARN}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := f.resources[f.id(c.fn)].Properties
			equalJSON(t, "Runtime", p["Runtime"], "provided.al2023")
			equalJSON(t, "Architectures", p["Architectures"], []string{"arm64"})
			equalJSON(t, "Handler", p["Handler"], "bootstrap")
			logs, _ := p["LoggingConfig"].(map[string]any)
			if lg, _ := logs["LogGroup"].(map[string]any); lg["Ref"] == nil {
				t.Errorf("LoggingConfig = %v, want the function's own log group", p["LoggingConfig"])
			}

			vars, _ := p["Environment"].(map[string]any)["Variables"].(map[string]any)
			want := map[string]any{triageconfig.EnvTable: ref(f.id(f.d.Table))}
			for _, q := range f.d.Queues {
				up := strings.ToUpper(q.Priority)
				want[triageconfig.EnvQueueURLPrefix+up] = ref(f.id(q.Queue))
				want[triageconfig.EnvDLQURLPrefix+up] = ref(f.id(q.DLQ))
			}
			for k, v := range want {
				equalJSON(t, "env "+k, vars[k], v)
			}
			for _, k := range c.wantEnv {
				if _, ok := vars[k]; !ok {
					t.Errorf("env %s missing", k)
				}
			}
			for _, k := range c.withoutEnv {
				if _, ok := vars[k]; ok {
					t.Errorf("env %s set, should not be", k)
				}
			}
		})
	}
}

// policyStatements returns the statements of every inline policy attached to
// fn's role.
func (f *fixture) policyStatements(t *testing.T, fn awslambda.Function) []map[string]any {
	t.Helper()
	return f.roleStatements(t, fn.Role())
}

// roleStatements returns the statements of every inline policy attached to
// role.
func (f *fixture) roleStatements(t *testing.T, role constructs.IConstruct) []map[string]any {
	t.Helper()
	roleRef := normalize(t, ref(f.id(role)))
	var out []map[string]any
	for _, r := range f.ofType("AWS::IAM::Policy") {
		roles, _ := r.Properties["Roles"].([]any)
		attached := false
		for _, x := range roles {
			attached = attached || reflect.DeepEqual(x, roleRef)
		}
		if !attached {
			continue
		}
		doc, _ := r.Properties["PolicyDocument"].(map[string]any)
		stmts, _ := doc["Statement"].([]any)
		for _, s := range stmts {
			out = append(out, s.(map[string]any))
		}
	}
	if len(out) == 0 {
		t.Fatalf("no policy attached to %s", *role.Node().Path())
	}
	return out
}

// allows reports whether some Allow statement grants action on resource.
func allows(t *testing.T, stmts []map[string]any, action string, resource any) bool {
	t.Helper()
	want := normalize(t, resource)
	for _, s := range stmts {
		if s["Effect"] != "Allow" || !contains(asList(s["Action"]), action) {
			continue
		}
		for _, r := range asList(s["Resource"]) {
			if reflect.DeepEqual(r, want) {
				return true
			}
		}
	}
	return false
}

func asList(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	return []any{v}
}

func contains(list []any, v any) bool {
	for _, x := range list {
		if reflect.DeepEqual(x, v) {
			return true
		}
	}
	return false
}

func TestLeastPrivilege(t *testing.T) {
	f := stackUnderTest(t)
	tableArn := getAtt(f.id(f.d.Table), "Arn")
	api, consumer, promoter, counters := f.policyStatements(t, f.d.API), f.policyStatements(t, f.d.Consumer), f.policyStatements(t, f.d.Promoter), f.policyStatements(t, f.d.Counters)

	type grant struct {
		stmts    []map[string]any
		action   string
		resource any
	}
	var must, mustNot []grant
	for _, q := range f.d.Queues {
		queue, dlq := getAtt(f.id(q.Queue), "Arn"), getAtt(f.id(q.DLQ), "Arn")
		for _, a := range []string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility", "sqs:SendMessage", "sqs:GetQueueAttributes"} {
			must = append(must, grant{consumer, a, queue})
		}
		must = append(must, grant{consumer, "sqs:SendMessage", dlq})
		mustNot = append(mustNot, grant{consumer, "sqs:ReceiveMessage", dlq}, grant{consumer, "sqs:DeleteMessage", dlq})

		must = append(must, grant{api, "sqs:SendMessage", queue}, grant{api, "sqs:GetQueueAttributes", queue})
		for _, a := range []string{"sqs:GetQueueAttributes", "sqs:ReceiveMessage", "sqs:SendMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"} {
			must = append(must, grant{api, a, dlq})
		}
		mustNot = append(mustNot, grant{api, "sqs:ReceiveMessage", queue}, grant{api, "sqs:DeleteMessage", queue})

		must = append(must, grant{promoter, "sqs:SendMessage", queue})
		for _, a := range []string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility", "sqs:GetQueueAttributes"} {
			must = append(must, grant{promoter, a, dlq})
		}
		mustNot = append(mustNot, grant{promoter, "sqs:ReceiveMessage", queue})

		// The counters function sends a completed batch's callback, only.
		must = append(must, grant{counters, "sqs:SendMessage", queue})
		for _, a := range []string{"sqs:ReceiveMessage", "sqs:DeleteMessage"} {
			mustNot = append(mustNot, grant{counters, a, queue}, grant{counters, a, dlq})
		}
	}
	for _, s := range [][]map[string]any{api, consumer, promoter} {
		must = append(must, grant{s, "dynamodb:UpdateItem", tableArn}, grant{s, "dynamodb:Query", tableArn})
	}
	// The API reads the tokens minted into the table.
	must = append(must, grant{api, "dynamodb:GetItem", tableArn})
	// Started by the queues, the consumer needs no fan-out from the promoter.
	mustNot = append(mustNot, grant{promoter, "lambda:InvokeFunction", getAtt(f.id(f.d.Consumer), "Arn")})
	for i, g := range must {
		if !allows(t, g.stmts, g.action, g.resource) {
			t.Errorf("grant %d: %s on %v is missing", i, g.action, g.resource)
		}
	}
	for i, g := range mustNot {
		if allows(t, g.stmts, g.action, g.resource) {
			t.Errorf("grant %d: %s on %v should not be allowed", i, g.action, g.resource)
		}
	}

	t.Run("no function has secret access", func(t *testing.T) {
		for name, stmts := range map[string][]map[string]any{"api": api, "consumer": consumer, "promoter": promoter} {
			for _, s := range stmts {
				for _, a := range asList(s["Action"]) {
					if strings.HasPrefix(fmt.Sprint(a), "secretsmanager:") || fmt.Sprint(a) == "*" {
						t.Errorf("%s statement allows %v", name, a)
					}
				}
			}
		}
	})
	t.Run("no lambda invoke without routes", func(t *testing.T) {
		for _, s := range consumer {
			if contains(asList(s["Action"]), "lambda:InvokeFunction") {
				t.Errorf("consumer may invoke %v with no routes configured", s["Resource"])
			}
		}
	})
}

func TestSchedules(t *testing.T) {
	f := stackUnderTest(t)
	rules := f.ofType("AWS::Events::Rule")
	targets := func(fn awslambda.Function) (rate string, n int) {
		arn := normalize(t, getAtt(f.id(fn), "Arn"))
		for _, r := range rules {
			ts, _ := r.Properties["Targets"].([]any)
			for _, x := range ts {
				if reflect.DeepEqual(x.(map[string]any)["Arn"], arn) {
					rate = fmt.Sprint(r.Properties["ScheduleExpression"])
					n++
				}
			}
		}
		return rate, n
	}
	if rate, n := targets(f.d.Promoter); rate != "rate(1 minute)" || n != 1 {
		t.Errorf("promoter: %d targets, schedule %q; want 1 at rate(1 minute)", n, rate)
	}
	if rate, n := targets(f.d.Consumer); n != 0 || len(f.d.ConsumerSchedules) != 0 {
		t.Errorf("consumer: %d rule targets (schedule %q), %d rules; want none: the queues start it", n, rate, len(f.d.ConsumerSchedules))
	}
	// EventBridge must be allowed to invoke the promoter, and only it.
	for fn, want := range map[awslambda.Function]bool{f.d.Promoter: true, f.d.Consumer: false} {
		found := false
		for _, p := range f.ofType("AWS::Lambda::Permission") {
			found = found || (p.Properties["Principal"] == "events.amazonaws.com" &&
				reflect.DeepEqual(p.Properties["FunctionName"], normalize(t, getAtt(f.id(fn), "Arn"))))
		}
		if found != want {
			t.Errorf("events.amazonaws.com permission on %s: %t, want %t", *fn.Node().Path(), found, want)
		}
	}
}

func TestHTTPAPI(t *testing.T) {
	f := stackUnderTest(t)
	var keys []string
	for _, r := range f.ofType("AWS::ApiGatewayV2::Route") {
		keys = append(keys, fmt.Sprint(r.Properties["RouteKey"]))
		if at := r.Properties["AuthorizationType"]; at != nil && at != "NONE" {
			t.Errorf("route %v: AuthorizationType %v without IAMAuth", r.Properties["RouteKey"], at)
		}
	}
	sort.Strings(keys)
	equalJSON(t, "route keys", keys, []string{"ANY /api/v1/{proxy+}", "GET /", "GET /dashboard.css", "GET /dashboard.js"})
	check(t, "integration", func() {
		f.tmpl.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Integration"), map[string]any{
			"IntegrationType":      "AWS_PROXY",
			"IntegrationUri":       getAtt(f.id(f.d.API), "Arn"),
			"PayloadFormatVersion": "2.0",
		})
	})
}

func TestAlarms(t *testing.T) {
	f := stackUnderTest(t)
	alarms := f.ofType("AWS::CloudWatch::Alarm")
	type want struct {
		name, namespace, metric, dimension string
		value                              any
		threshold                          float64
	}
	var wants []want
	for _, q := range f.d.Queues {
		wants = append(wants,
			want{q.Priority + " DLQ depth", "AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName", getAtt(f.id(q.DLQ), "QueueName"), 0},
			want{q.Priority + " oldest message", "AWS/SQS", "ApproximateAgeOfOldestMessage", "QueueName", getAtt(f.id(q.Queue), "QueueName"), (30 * time.Minute).Seconds()},
		)
	}
	for name, fn := range map[string]awslambda.Function{"api": f.d.API, "consumer": f.d.Consumer, "promoter": f.d.Promoter, "counters": f.d.Counters} {
		for _, m := range []string{"Errors", "Throttles"} {
			wants = append(wants, want{name + " " + m, "AWS/Lambda", m, "FunctionName", ref(f.id(fn)), 0})
		}
	}
	if len(alarms) != len(wants)+metricAlarms { // the alarms on triage's own metrics: TestMetricAlarms
		t.Errorf("%d alarms, want %d", len(alarms), len(wants))
	}
	for _, w := range wants {
		t.Run(w.name, func(t *testing.T) {
			dims := normalize(t, []map[string]any{{"Name": w.dimension, "Value": w.value}})
			for _, a := range alarms {
				p := a.Properties
				if p["Namespace"] == w.namespace && p["MetricName"] == w.metric && reflect.DeepEqual(p["Dimensions"], dims) {
					equalJSON(t, "Threshold", p["Threshold"], w.threshold)
					equalJSON(t, "ComparisonOperator", p["ComparisonOperator"], "GreaterThanThreshold")
					return
				}
			}
			t.Errorf("no %s/%s alarm on %v", w.namespace, w.metric, w.value)
		})
	}
}

func TestOutputs(t *testing.T) {
	f := stackUnderTest(t)
	want := []string{"ApiUrl", "TableName"}
	for _, q := range f.d.Queues {
		want = append(want, "QueueUrl"+title(q.Priority), "DlqUrl"+title(q.Priority))
	}
	for _, name := range want {
		if _, ok := f.outputs[name]; !ok {
			t.Errorf("output %s missing (have %v)", name, sortedKeys(f.outputs))
		}
	}
	equalJSON(t, "TableName output", f.outputs["TableName"].(map[string]any)["Value"], ref(f.id(f.d.Table)))
	if _, ok := f.outputs["TokensSecretArn"]; ok {
		t.Error("output TokensSecretArn without a tokens secret")
	}
}

// TestDeterministicAssets synthesizes a second, independent app (new outdir,
// so it bundles again) and compares each function's asset hash.
func TestDeterministicAssets(t *testing.T) {
	a := stackUnderTest(t)
	start := time.Now()
	b, err := synth(filepath.Join(env.outDir, "b"), true, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("second synth with bundling took %s", time.Since(start).Round(100*time.Millisecond))
	keys := map[any]string{}
	for id, r := range a.ofType("AWS::Lambda::Function") {
		ka := r.Properties["Code"].(map[string]any)["S3Key"]
		kb := b.resources[id].Properties["Code"].(map[string]any)["S3Key"]
		if ka == nil || !reflect.DeepEqual(ka, kb) {
			t.Errorf("%s: S3Key %v, then %v", id, ka, kb)
		}
		if other, dup := keys[ka]; dup {
			t.Errorf("%s and %s share asset %v", id, other, ka)
		}
		keys[ka] = id
	}
	for _, dir := range []string{"a", "b"} {
		matches, _ := filepath.Glob(filepath.Join(env.outDir, dir, "asset.*", "bootstrap"))
		if len(matches) != 4 {
			t.Errorf("%s: %d bundled bootstraps, want 4", dir, len(matches))
		}
	}
}

// TestVariants checks the props that change the shape of the stack. It skips
// bundling (as `cdk deploy OtherStack` would), so it costs one synth without builds.
func TestVariants(t *testing.T) {
	stackUnderTest(t) // serialize with the shared synth; jsii is single-threaded anyway
	const handler = "arn:aws:lambda:eu-west-1:123456789012:function:resize"
	f, err := synth(filepath.Join(env.outDir, "variants"), false, &dispatcher.Props{
		Prefix:          "acme",
		PhysicalNames:   true,
		Scheduled:       true,
		FanOut:          7,
		IAMAuth:         true,
		PromoteInterval: 90 * time.Second,
		Weights:         map[string]int{"high": 8, "low": 2},
		Retry:           map[string]dispatcher.RetryBackoff{"low": {Base: 2 * time.Second, Max: 2 * time.Minute}, "high": {Base: time.Second, Max: 5 * time.Second}},
		Routes:          map[string]string{"resize": handler, "notify": "https://hooks.example.com/triage"},
		Alarms:          dispatcher.AlarmProps{DLQDepthThreshold: 5},
		RemovalPolicy:   awscdk.RemovalPolicy_DESTROY,
		Shards:          32,
		TypeIndex:       true,
		Types:           []string{"resize", "notify"},
		DemoHandlers:    true,
		Concurrency:     1,
		ReservedHigh:    triageconfig.Off,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("names use the prefix", func(t *testing.T) {
		s := spec.New("acme")
		equalJSON(t, "table", f.resources[f.id(f.d.Table)].Properties["TableName"], s.Table.Name)
		if f.resources[f.id(f.d.Table)].DeletionPolicy != "Delete" {
			t.Errorf("table DeletionPolicy %q, want Delete", f.resources[f.id(f.d.Table)].DeletionPolicy)
		}
		for i, q := range f.d.Queues {
			equalJSON(t, "queue", f.resources[f.id(q.Queue)].Properties["QueueName"], s.Queues[i].Name)
		}
	})
	t.Run("fan-out splits into rules of five", func(t *testing.T) {
		if len(f.d.ConsumerSchedules) != 2 {
			t.Fatalf("%d consumer rules, want 2", len(f.d.ConsumerSchedules))
		}
		total := 0
		for _, r := range f.d.ConsumerSchedules {
			total += len(f.resources[f.id(r)].Properties["Targets"].([]any))
		}
		if total != 7 {
			t.Errorf("%d consumer targets, want 7", total)
		}
	})
	t.Run("scheduled: no mappings, the promoter may fan out, no dashboard unless asked", func(t *testing.T) {
		f.tmpl.ResourceCountIs(jsii.String("AWS::Lambda::EventSourceMapping"), jsii.Number(1)) // the counters' stream only
		f.tmpl.ResourceCountIs(jsii.String("AWS::CloudWatch::Dashboard"), jsii.Number(0))
		vars := f.resources[f.id(f.d.Promoter)].Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
		if vars[triageconfig.EnvConsumerARN] == nil {
			t.Errorf("promoter has no %s: it cannot fan out", triageconfig.EnvConsumerARN)
		}
		if !allows(t, f.policyStatements(t, f.d.Promoter), "lambda:InvokeFunction", getAtt(f.id(f.d.Consumer), "Arn")) {
			t.Error("promoter may not invoke the scheduled consumer")
		}
	})
	t.Run("promote interval rounds up to whole minutes", func(t *testing.T) {
		equalJSON(t, "schedule", f.resources[f.id(f.d.PromoterSchedule)].Properties["ScheduleExpression"], "rate(2 minutes)")
		vars := f.resources[f.id(f.d.Promoter)].Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
		equalJSON(t, "env", vars[triageconfig.EnvPromoteInterval], "2m0s")
	})
	t.Run("consumer settings", func(t *testing.T) {
		vars := f.resources[f.id(f.d.Consumer)].Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
		equalJSON(t, "weights", vars[triageconfig.EnvWeights], "high=8,low=2")
		equalJSON(t, "no reserved slots", vars[triageconfig.EnvReservedHigh], "0")
		equalJSON(t, "demo handlers", vars[triageconfig.EnvDemoHandlers], "true")
		equalJSON(t, "retry", vars[triageconfig.EnvRetryBackoff], "high=1s:5s,low=2s:2m0s")
		equalJSON(t, "routes", vars[triageconfig.EnvRoutes], "notify=https://hooks.example.com/triage,resize="+handler)
		// External handlers get the API's URL for their progress reports.
		equalJSON(t, triageconfig.EnvAPIURL, vars[triageconfig.EnvAPIURL], getAtt(f.id(f.d.HTTPAPI), "ApiEndpoint"))
		if own := f.d.ConsumerEnvironment()[triageconfig.EnvAPIURL]; own == nil || *own == "" {
			t.Errorf("ConsumerEnvironment lacks %s", triageconfig.EnvAPIURL)
		}
	})
	t.Run("one shard count and type index for every function, known types for the API", func(t *testing.T) {
		for _, fn := range []awslambda.Function{f.d.API, f.d.Consumer, f.d.Promoter, f.d.Counters} {
			vars := f.resources[f.id(fn)].Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
			equalJSON(t, "shards", vars[triageconfig.EnvShards], "32")
			equalJSON(t, "type index", vars[triageconfig.EnvTypeIndex], "true")
		}
		vars := f.resources[f.id(f.d.API)].Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
		equalJSON(t, "types", vars[triageconfig.EnvTypes], "resize,notify")
	})
	t.Run("routes grant invoke on Lambda handlers only", func(t *testing.T) {
		stmts := f.policyStatements(t, f.d.Consumer)
		if !allows(t, stmts, "lambda:InvokeFunction", handler) {
			t.Error("consumer cannot invoke the routed handler")
		}
		for _, s := range stmts {
			if b, _ := json.Marshal(s); strings.Contains(string(b), "hooks.example.com") {
				t.Errorf("webhook URL in a policy: %s", b)
			}
		}
	})
	t.Run("IAM authorization on every route", func(t *testing.T) {
		routes := f.ofType("AWS::ApiGatewayV2::Route")
		if len(routes) != 4 { // API proxy, dashboard page and its two assets
			t.Fatalf("%d routes", len(routes))
		}
		for _, r := range routes {
			equalJSON(t, fmt.Sprint(r.Properties["RouteKey"]), r.Properties["AuthorizationType"], "AWS_IAM")
		}
	})
	t.Run("alarm threshold", func(t *testing.T) {
		check(t, "DLQ alarm", func() {
			f.tmpl.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), map[string]any{
				"MetricName": "ApproximateNumberOfMessagesVisible",
				"Threshold":  5,
			})
		})
	})
}

func TestGivenTokensSecret(t *testing.T) {
	stackUnderTest(t)
	dir := filepath.Join(env.outDir, "given-secret")
	ctx, err := cdkContext()
	if err != nil {
		t.Fatal(err)
	}
	ctx["aws:cdk:bundling-stacks"] = []string{}
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(dir), Context: &ctx})
	stack := awscdk.NewStack(app, jsii.String("TriageStack"), nil)
	secret := awssecretsmanager.Secret_FromSecretNameV2(stack, jsii.String("Tokens"), jsii.String("shared/triage-tokens"))
	d, err := dispatcher.New(stack, "Dispatcher", &dispatcher.Props{SourceRoot: env.root, TokensSecret: secret})
	if err != nil {
		t.Fatal(err)
	}
	tmpl := assertions.Template_FromStack(stack, nil)
	check(t, "no secret created", func() { tmpl.ResourceCountIs(jsii.String("AWS::SecretsManager::Secret"), jsii.Number(0)) })
	// An imported-by-name ARN has no random suffix, so the grant must match any.
	f := &fixture{stack: stack, d: d}
	raw, err := json.Marshal(tmpl.ToJSON())
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Resources map[string]resource
		Outputs   map[string]any
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	f.resources = doc.Resources
	if _, ok := doc.Outputs["TokensSecretArn"]; !ok {
		t.Errorf("no TokensSecretArn output with a given secret (have %v)", sortedKeys(doc.Outputs))
	}
	vars, _ := f.resources[f.id(d.API)].Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
	if _, ok := vars[triageconfig.EnvTokensSecretARN]; !ok {
		t.Errorf("the API function has no %s with a given secret", triageconfig.EnvTokensSecretARN)
	}
	found := false
	for _, st := range f.policyStatements(t, d.API) {
		if !contains(asList(st["Action"]), "secretsmanager:GetSecretValue") {
			continue
		}
		b, _ := json.Marshal(st["Resource"])
		found = true
		if !strings.Contains(string(b), `:secret:shared/triage-tokens-??????"`) {
			t.Errorf("GetSecretValue on %s, want the name with a wildcard suffix", b)
		}
	}
	if !found {
		t.Error("the API cannot read the given secret")
	}
}

func TestInvalidProps(t *testing.T) {
	stackUnderTest(t)
	other := filepath.Join(env.outDir, "other-module")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "go.mod"), []byte("module example.com/other\n\ngo 1.22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		p    dispatcher.Props
		want string // in the error, when given
	}{
		"fan-out":                  {p: dispatcher.Props{Scheduled: true, FanOut: dispatcher.MaxFanOut + 1}},
		"fan-out without schedule": {p: dispatcher.Props{FanOut: 3}},
		"batch size":               {p: dispatcher.Props{Mapping: dispatcher.MappingProps{BatchSize: 11}}},
		"window":                   {p: dispatcher.Props{Mapping: dispatcher.MappingProps{Window: 1500 * time.Millisecond}}},
		"concurrency":              {p: dispatcher.Props{Mapping: dispatcher.MappingProps{MaxConcurrency: 1}}},
		"reserved":                 {p: dispatcher.Props{Concurrency: 4, ReservedHigh: 4}, want: "ReservedHigh (TRIAGE_RESERVED_HIGH)"},
		// One slot leaves no room for the default reserved slot: the
		// consumer would refuse to start, so synth refuses first.
		"reserved default": {p: dispatcher.Props{Concurrency: 1}, want: "must be less than Concurrency (1)"},
		"unknown priority": {p: dispatcher.Props{Weights: map[string]int{"urgent": 1}}},
		"zero weights":     {p: dispatcher.Props{Weights: map[string]int{"high": 0, "medium": 0, "low": 0}}},
		"route target":     {p: dispatcher.Props{Routes: map[string]string{"x": "ftp://nope"}}},
		"retry priority":   {p: dispatcher.Props{Retry: map[string]dispatcher.RetryBackoff{"urgent": {Base: time.Second, Max: time.Minute}}}},
		"retry cap":        {p: dispatcher.Props{Retry: map[string]dispatcher.RetryBackoff{"low": {Base: time.Minute, Max: time.Second}}}},
		"retry base":       {p: dispatcher.Props{Retry: map[string]dispatcher.RetryBackoff{"low": {Max: time.Second}}}},
		"route type":       {p: dispatcher.Props{Routes: map[string]string{"a,b": "https://x"}}},
		"log level":        {p: dispatcher.Props{LogLevel: "loud"}},
		"shards":           {p: dispatcher.Props{Shards: 300}, want: "Shards"},
		"type":             {p: dispatcher.Props{Types: []string{"a#b"}}, want: "Types"},
		"memory":           {p: dispatcher.Props{Consumer: dispatcher.FunctionProps{MemoryMiB: 64}}},
		"timeout":          {p: dispatcher.Props{API: dispatcher.FunctionProps{Timeout: time.Hour}}},
		"consumer timeout": {p: dispatcher.Props{Consumer: dispatcher.FunctionProps{Timeout: 30 * time.Second}}},
		"consumer package blank": {
			p: dispatcher.Props{ConsumerPackage: "  "}, want: "ConsumerPackage",
		},
		"consumer package flag": {
			p: dispatcher.Props{ConsumerPackage: "-toolexec=/bin/true"}, want: "ConsumerPackage",
		},
		"consumer package pattern": {
			p: dispatcher.Props{ConsumerPackage: "./functions/..."}, want: "ConsumerPackage",
		},
		"consumer package library": {
			p: dispatcher.Props{ConsumerPackage: dispatcher.RootModule + "/worker"}, want: "not a main package",
		},
		"consumer package missing": {
			p: dispatcher.Props{ConsumerPackage: "./cmd/nope"}, want: "function consumer",
		},
		"provisioned target": {
			p: dispatcher.Props{Provisioned: &dispatcher.ProvisionedProps{TargetUtilizationPercent: 95}}, want: "TargetUtilizationPercent",
		},
		"provisioned bounds": {
			p: dispatcher.Props{Provisioned: &dispatcher.ProvisionedProps{MinWrite: 10, MaxWrite: 5}}, want: "write capacity",
		},
		"source root without triage": {
			p: dispatcher.Props{SourceRoot: other}, want: "requires " + dispatcher.RootModule,
		},
	} {
		t.Run(name, func(t *testing.T) {
			app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(filepath.Join(env.outDir, "invalid"))})
			stack := awscdk.NewStack(app, jsii.String("S"), nil)
			p := c.p
			if p.SourceRoot == "" {
				p.SourceRoot = env.root
			}
			_, err := dispatcher.New(stack, "Dispatcher", &p)
			if err == nil {
				t.Fatal("New accepted invalid props")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want it to mention %q", err, c.want)
			}
		})
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func title(s string) string { return strings.ToUpper(s[:1]) + s[1:] }

// The counters function is fed the table's stream: from the start of the
// stream, in batches gathered for up to 2 s, never bisected (a retried batch
// is recognised by its first record), filtered to task items.
func TestCountersStreamTrigger(t *testing.T) {
	f := stackUnderTest(t)
	// The counters' one; the three queues' mappings start the consumer.
	maps := map[string]resource{}
	for id, m := range f.ofType("AWS::Lambda::EventSourceMapping") {
		if reflect.DeepEqual(normalize(t, m.Properties["FunctionName"]), normalize(t, ref(f.id(f.d.Counters)))) {
			maps[id] = m
		}
	}
	if len(maps) != 1 {
		t.Fatalf("%d event source mappings to the counters function, want 1", len(maps))
	}
	for _, m := range maps {
		p := m.Properties
		for _, c := range []struct {
			name      string
			got, want any
		}{
			{"FunctionName", p["FunctionName"], ref(f.id(f.d.Counters))},
			{"EventSourceArn", p["EventSourceArn"], getAtt(f.id(f.d.Table), "StreamArn")},
			{"StartingPosition", p["StartingPosition"], "TRIM_HORIZON"},
			{"MaximumBatchingWindowInSeconds", p["MaximumBatchingWindowInSeconds"], 2},
			{"BisectBatchOnFunctionError", p["BisectBatchOnFunctionError"], false},
			// Only task items: not the counters' own writes, heartbeats or controls.
			{"FilterCriteria", p["FilterCriteria"], map[string]any{"Filters": []any{
				map[string]any{"Pattern": `{"dynamodb":{"Keys":{"pk":{"S":[{"prefix":"TASK#"}]}}}}`},
			}}},
		} {
			t.Run(c.name, func(t *testing.T) { equalJSON(t, c.name, c.got, c.want) })
		}
	}
}

// The payload bucket is private and encrypted, every function is told its
// name, and only the functions that need an object action have it, on the
// objects under t/ only.
func TestPayloadBucket(t *testing.T) {
	f := stackUnderTest(t)
	bucketID := f.id(f.d.Bucket)
	check(t, "bucket", func() {
		f.tmpl.HasResourceProperties(jsii.String("AWS::S3::Bucket"), map[string]any{
			"PublicAccessBlockConfiguration": map[string]any{
				"BlockPublicAcls": true, "BlockPublicPolicy": true, "IgnorePublicAcls": true, "RestrictPublicBuckets": true,
			},
			"BucketEncryption": map[string]any{
				"ServerSideEncryptionConfiguration": []any{map[string]any{"ServerSideEncryptionByDefault": map[string]any{"SSEAlgorithm": "AES256"}}},
			},
		})
	})
	for _, fn := range []awslambda.Function{f.d.API, f.d.Consumer, f.d.Promoter, f.d.Counters} {
		env := f.resources[f.id(fn)].Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
		if !reflect.DeepEqual(env[triageconfig.EnvBucket], normalize(t, ref(bucketID))) {
			t.Errorf("%s: %s = %v, want a reference to the bucket", f.id(fn), triageconfig.EnvBucket, env[triageconfig.EnvBucket])
		}
	}
	objects := normalize(t, map[string]any{"Fn::Join": []any{"", []any{getAtt(bucketID, "Arn"), "/t/*"}}})
	want := map[string][]string{
		"api":      {"s3:PutObject", "s3:GetObject", "s3:DeleteObject"},
		"consumer": {"s3:PutObject", "s3:GetObject", "s3:DeleteObject"},
		"counters": {"s3:PutObject", "s3:DeleteObject"},
		"promoter": {"s3:PutObject"},
	}
	fns := map[string]awslambda.Function{"api": f.d.API, "consumer": f.d.Consumer, "counters": f.d.Counters, "promoter": f.d.Promoter}
	for name, fn := range fns {
		stmts := f.policyStatements(t, fn)
		for _, a := range want[name] {
			if !allows(t, stmts, a, objects) {
				t.Errorf("%s: %s on the bucket's objects is missing", name, a)
			}
		}
		for _, st := range stmts {
			for _, a := range asList(st["Action"]) {
				act := fmt.Sprint(a)
				if strings.HasPrefix(act, "s3:") && !slices.Contains(want[name], act) {
					t.Errorf("%s may %s", name, act)
				}
			}
			for _, r := range asList(st["Resource"]) {
				if b, _ := json.Marshal(r); strings.Contains(string(b), bucketID) && !reflect.DeepEqual(r, objects) {
					t.Errorf("%s has a grant on %s beyond its objects", name, b)
				}
			}
		}
	}
}
