package dispatcher_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"

	"github.com/triagehq/triage/infra/dispatcher"
	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/triageconfig"
)

// The construct as a library: grants to code outside it, the environments
// that code needs, and fixed or generated names.

// routedHandler is a Lambda handler in Props.Routes of the library stack.
const routedHandler = "arn:aws:lambda:eu-west-1:123456789012:function:resize"

// grantees are roles of the library stack, one per grant method, so each
// role's policy holds exactly what one grant gave.
type grantees struct {
	submitDirect, sendMessages, consume, invokeAPI awsiam.Role
	grants                                         map[string]awsiam.Grant
}

// libraryStack synthesizes, without bundling, a deployment as a user's
// stack holds it: generated names (the default), IAM authorization, a
// Lambda and a webhook route, and one role per grant method.
func libraryStack(t *testing.T) (*fixture, *grantees) {
	t.Helper()
	stackUnderTest(t) // serialize with the shared synth
	g := &grantees{grants: map[string]awsiam.Grant{}}
	f, err := synthWith(filepath.Join(env.outDir, "library"), false, &dispatcher.Props{
		Prefix:  "acme",
		IAMAuth: true,
		Routes:  map[string]string{"resize": routedHandler, "notify": "https://hooks.example.com/triage"},
	}, func(stack awscdk.Stack, d *dispatcher.Dispatcher) {
		role := func(id string) awsiam.Role {
			return awsiam.NewRole(stack, jsii.String(id), &awsiam.RoleProps{AssumedBy: awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil)})
		}
		g.submitDirect, g.sendMessages, g.consume, g.invokeAPI = role("Producer"), role("RawSender"), role("Worker"), role("ApiCaller")
		g.grants["GrantSubmitDirect"] = d.GrantSubmitDirect(g.submitDirect)
		g.grants["GrantSendMessages"] = d.GrantSendMessages(g.sendMessages)
		g.grants["GrantConsume"] = d.GrantConsume(g.consume)
		g.grants["GrantInvokeApi"] = d.GrantInvokeApi(g.invokeAPI)
	})
	if err != nil {
		t.Fatal(err)
	}
	return f, g
}

// grantPairs flattens statements into "action resource" pairs, so policies
// compare whatever statements the CDK merged them into. Anything but a
// plain Allow of actions on resources is an error.
func grantPairs(t *testing.T, stmts []map[string]any) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, s := range stmts {
		for k := range s {
			if k != "Effect" && k != "Action" && k != "Resource" && k != "Condition" {
				t.Errorf("statement has %s: %v", k, s)
			}
		}
		if s["Effect"] != "Allow" {
			t.Errorf("statement is not an Allow: %v", s)
		}
		cond := ""
		if c, ok := s["Condition"]; ok {
			b, _ := json.Marshal(c)
			cond = " if " + string(b)
		}
		for _, a := range asList(s["Action"]) {
			for _, r := range asList(s["Resource"]) {
				out[pairKey(t, fmt.Sprint(a), r)+cond] = true
			}
		}
	}
	return out
}

func pairKey(t *testing.T, action string, resource any) string {
	t.Helper()
	b, err := json.Marshal(normalize(t, resource))
	if err != nil {
		t.Fatal(err)
	}
	return action + " " + string(b)
}

// pairs is every action on every resource.
func pairs(t *testing.T, actions []string, resources ...any) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, a := range actions {
		for _, r := range resources {
			out[pairKey(t, a, r)] = true
		}
	}
	return out
}

func union(sets ...map[string]bool) map[string]bool {
	out := map[string]bool{}
	for _, s := range sets {
		for k := range s {
			out[k] = true
		}
	}
	return out
}

// sameGrants reports the pairs one set has and the other lacks.
func sameGrants(t *testing.T, what string, got, want map[string]bool) {
	t.Helper()
	for k := range got {
		if !want[k] {
			t.Errorf("%s: grants %s, beyond what it needs", what, k)
		}
	}
	for k := range want {
		if !got[k] {
			t.Errorf("%s: lacks %s", what, k)
		}
	}
}

// render writes a CloudFormation string expression as one string, with
// ${...} for references, so an ARN built with Fn::Join reads as one.
func render(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case map[string]any:
		if r, ok := x["Ref"]; ok {
			return "${" + fmt.Sprint(r) + "}"
		}
		if a, ok := x["Fn::GetAtt"].([]any); ok && len(a) == 2 {
			return fmt.Sprintf("${%v.%v}", a[0], a[1])
		}
		if j, ok := x["Fn::Join"].([]any); ok && len(j) == 2 {
			var parts []string
			for _, p := range asList(j[1]) {
				parts = append(parts, render(p))
			}
			return strings.Join(parts, fmt.Sprint(j[0]))
		}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// TestGrants checks that each grant method gives its grantee exactly the
// intended actions on exactly the deployment's resources, nothing more
// (TestGrantSubmitDirectCoversSubmit checks the other side for
// GrantSubmitDirect: nothing less than the submit code calls).
func TestGrants(t *testing.T) {
	f, g := libraryStack(t)
	table := getAtt(f.id(f.d.Table), "Arn")
	indexes := map[string]any{"Fn::Join": []any{"", []any{table, "/index/*"}}}
	objects := map[string]any{"Fn::Join": []any{"", []any{getAtt(f.id(f.d.Bucket), "Arn"), "/t/*"}}}
	var queues, dlqs []any
	for _, q := range f.d.Queues {
		queues = append(queues, getAtt(f.id(q.Queue), "Arn"))
		dlqs = append(dlqs, getAtt(f.id(q.DLQ), "Arn"))
	}
	for name, grant := range g.grants {
		if grant == nil || !*grant.Success() {
			t.Errorf("%s did not add to the grantee's policy", name)
		}
	}

	t.Run("GrantSubmitDirect", func(t *testing.T) {
		want := union(
			pairs(t, []string{"dynamodb:GetItem", "dynamodb:PutItem"}, table),
			map[string]bool{ // batch items only: a member add's count and delete
				pairKey(t, "dynamodb:UpdateItem", table) + ` if {"ForAllValues:StringLike":{"dynamodb:LeadingKeys":["BATCH#*"]}}`: true,
				pairKey(t, "dynamodb:DeleteItem", table) + ` if {"ForAllValues:StringLike":{"dynamodb:LeadingKeys":["BATCH#*"]}}`: true,
			},
			pairs(t, []string{"sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"}, queues...),
			pairs(t, []string{"sqs:GetQueueAttributes", "sqs:GetQueueUrl"}, dlqs...),
			pairs(t, []string{"s3:PutObject", "s3:DeleteObject"}, objects),
		)
		sameGrants(t, "submit-direct producer", grantPairs(t, f.roleStatements(t, g.submitDirect)), want)
	})
	t.Run("GrantSendMessages", func(t *testing.T) {
		want := pairs(t, []string{"sqs:SendMessage"}, queues...)
		sameGrants(t, "raw sender", grantPairs(t, f.roleStatements(t, g.sendMessages)), want)
	})
	t.Run("GrantConsume", func(t *testing.T) {
		got := grantPairs(t, f.roleStatements(t, g.consume))
		// Exactly the stock consumer function's policy, less the
		// sqs:GetQueueUrl its event source mappings add (the CDK's
		// grantConsumeMessages): a consumer that polls finds its queues
		// by the URLs in its environment...
		fn := grantPairs(t, f.policyStatements(t, f.d.Consumer))
		for k := range pairs(t, []string{"sqs:GetQueueUrl"}, queues...) {
			delete(fn, k)
		}
		sameGrants(t, "custom consumer vs the consumer function", got, fn)
		// ...which is: the table's data and its indexes, the objects, the
		// queues' consumer actions, dead-lettering and the routed Lambda.
		want := union(
			pairs(t, []string{"s3:PutObject", "s3:GetObject", "s3:DeleteObject"}, objects),
			pairs(t, []string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility", "sqs:SendMessage", "sqs:GetQueueAttributes"}, queues...),
			pairs(t, []string{"sqs:SendMessage"}, dlqs...),
			pairs(t, []string{"lambda:InvokeFunction"}, routedHandler),
		)
		for _, r := range []any{table, indexes} {
			for _, a := range []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:Query", "dynamodb:BatchGetItem", "dynamodb:ConditionCheckItem"} {
				if k := pairKey(t, a, r); !got[k] {
					t.Errorf("custom consumer lacks %s", k)
				}
			}
		}
		for k := range got {
			switch {
			case strings.HasPrefix(k, "dynamodb:"):
				// The CDK's GrantReadWriteData, on the table and its indexes only.
				if !strings.HasSuffix(k, pairKey(t, "", table)) && !strings.HasSuffix(k, pairKey(t, "", indexes)) {
					t.Errorf("custom consumer: %s is on neither the table nor its indexes", k)
				}
			case !want[k]:
				t.Errorf("custom consumer: grants %s, beyond what it needs", k)
			}
		}
		for k := range want {
			if !got[k] {
				t.Errorf("custom consumer lacks %s", k)
			}
		}
		if b, _ := json.Marshal(f.roleStatements(t, g.consume)); strings.Contains(string(b), "hooks.example.com") {
			t.Error("a webhook URL is in the consumer's policy")
		}
	})
	t.Run("GrantInvokeApi", func(t *testing.T) {
		stmts := f.roleStatements(t, g.invokeAPI)
		got := grantPairs(t, stmts)
		if len(got) != 1 {
			t.Fatalf("%d grants, want one: %v", len(got), got)
		}
		var resource any
		for _, s := range stmts {
			resource = s["Resource"]
		}
		want := fmt.Sprintf("arn:${AWS::Partition}:execute-api:${AWS::Region}:${AWS::AccountId}:${%s}/*/*/api/v1/*", f.id(f.d.HTTPAPI))
		if r := render(resource); r != want || !allows(t, stmts, "execute-api:Invoke", resource) {
			t.Errorf("execute-api:Invoke on %s, want %s", r, want)
		}
	})
}

// Without IAM authorization on the routes execute-api:Invoke means nothing:
// GrantInvokeApi refuses, as the CDK's route grants do.
func TestGrantInvokeApiNeedsIAMAuth(t *testing.T) {
	f := stackUnderTest(t)
	defer func() {
		err, _ := recover().(error)
		if err == nil || !strings.Contains(err.Error(), "IAMAuth") {
			t.Errorf("panic = %v, want an error naming IAMAuth", err)
		}
	}()
	f.d.GrantInvokeApi(f.d.Promoter)
}

// resolve renders a token (or a literal) as the template would.
func (f *fixture) resolve(t *testing.T, v *string) any {
	t.Helper()
	return normalize(t, f.stack.Resolve(v))
}

func (f *fixture) functionEnv(fn awslambda.Function) map[string]any {
	vars, _ := f.resources[f.id(fn)].Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
	return vars
}

// TestProducerEnvironment checks that a producer gets where every resource
// is and the settings it must share with the functions, with the functions'
// own values, and nothing that belongs to the API or the consumer.
func TestProducerEnvironment(t *testing.T) {
	stackUnderTest(t)
	where := []string{triageconfig.EnvPrefix, triageconfig.EnvTable, triageconfig.EnvBucket}
	for _, p := range []string{"HIGH", "MEDIUM", "LOW"} {
		where = append(where, triageconfig.EnvQueueURLPrefix+p, triageconfig.EnvDLQURLPrefix+p)
	}
	for _, c := range []struct {
		name  string
		props dispatcher.Props
		extra map[string]string // settings beyond where, and their values
	}{
		{"defaults", dispatcher.Props{}, nil},
		{"settings", dispatcher.Props{
			Shards: 32, TypeIndex: true, Retention: 48 * time.Hour, Types: []string{"resize", "notify"},
			LogLevel: "debug", Weights: map[string]int{"high": 9}, Routes: map[string]string{"resize": routedHandler},
		}, map[string]string{
			triageconfig.EnvShards: "32", triageconfig.EnvRetention: "48h0m0s", triageconfig.EnvTypes: "resize,notify",
			triageconfig.EnvTypeIndex: "true",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := synth(filepath.Join(env.outDir, "producer-env-"+c.name), false, &c.props)
			if err != nil {
				t.Fatal(err)
			}
			got := f.d.ProducerEnvironment()
			want := append(slices.Clone(where), sortedKeys(c.extra)...)
			if keys := sortedKeys(got); !slices.Equal(keys, slices.Sorted(slices.Values(want))) {
				t.Errorf("variables %v, want %v", keys, slices.Sorted(slices.Values(want)))
			}
			api := f.functionEnv(f.d.API)
			for k, v := range got {
				// One owner: each value is the one the functions get.
				if r := f.resolve(t, v); !reflect.DeepEqual(r, api[k]) {
					t.Errorf("%s = %v, the API function has %v", k, r, api[k])
				}
				if want, ok := c.extra[k]; ok && *v != want {
					t.Errorf("%s = %q, want %q", k, *v, want)
				}
			}
			equalJSON(t, triageconfig.EnvTable, f.resolve(t, got[triageconfig.EnvTable]), ref(f.id(f.d.Table)))
			equalJSON(t, triageconfig.EnvBucket, f.resolve(t, got[triageconfig.EnvBucket]), ref(f.id(f.d.Bucket)))
			for _, q := range f.d.Queues {
				up := strings.ToUpper(q.Priority)
				equalJSON(t, "queue "+up, f.resolve(t, got[triageconfig.EnvQueueURLPrefix+up]), ref(f.id(q.Queue)))
				equalJSON(t, "DLQ "+up, f.resolve(t, got[triageconfig.EnvDLQURLPrefix+up]), ref(f.id(q.DLQ)))
			}

			// A new map each call.
			got[triageconfig.EnvTable] = jsii.String("changed")
			delete(got, triageconfig.EnvBucket)
			if again := f.d.ProducerEnvironment(); *again[triageconfig.EnvTable] == "changed" || again[triageconfig.EnvBucket] == nil {
				t.Error("ProducerEnvironment returned a map the caller can change")
			}

			// The consumer's environment is exactly the consumer function's.
			cons := map[string]any{}
			for k, v := range f.d.ConsumerEnvironment() {
				cons[k] = f.resolve(t, v)
			}
			equalJSON(t, "ConsumerEnvironment", cons, f.functionEnv(f.d.Consumer))
		})
	}
}

// TestPhysicalNames synthesizes both naming modes: with PhysicalNames the
// table, queues and functions carry the spec's names; without, none has a
// name and CloudFormation generates them. Either way every function finds
// every resource through its environment, the outputs keep their fixed
// logical ids, and the API keeps its descriptive name.
func TestPhysicalNames(t *testing.T) {
	stackUnderTest(t)
	for _, physical := range []bool{true, false} {
		t.Run(fmt.Sprintf("PhysicalNames=%v", physical), func(t *testing.T) {
			f, err := synth(filepath.Join(env.outDir, fmt.Sprintf("names-%v", physical)), false, &dispatcher.Props{Prefix: "acme", PhysicalNames: physical})
			if err != nil {
				t.Fatal(err)
			}
			s := spec.New("acme")
			name := func(want string) any {
				if physical {
					return want
				}
				return nil
			}
			type named struct {
				what, prop string
				id         string
				want       any
			}
			checks := []named{{"table", "TableName", f.id(f.d.Table), name(s.Table.Name)}}
			for i, q := range f.d.Queues {
				checks = append(checks,
					named{q.Priority + " queue", "QueueName", f.id(q.Queue), name(s.Queues[i].Name)},
					named{q.Priority + " DLQ", "QueueName", f.id(q.DLQ), name(s.Queues[i].DLQName)})
			}
			for fnName, fn := range map[string]awslambda.Function{"api": f.d.API, "consumer": f.d.Consumer, "promoter": f.d.Promoter, "counters": f.d.Counters} {
				checks = append(checks, named{fnName + " function", "FunctionName", f.id(fn), name("acme-" + fnName)})
			}
			for _, c := range checks {
				equalJSON(t, c.what+" "+c.prop, f.resources[c.id].Properties[c.prop], c.want)
			}
			equalJSON(t, "API name", f.resources[f.id(f.d.HTTPAPI)].Properties["Name"], "acme-api")

			// Functions find resources through their environment, never by name.
			for _, fn := range []awslambda.Function{f.d.API, f.d.Consumer, f.d.Promoter, f.d.Counters} {
				vars := f.functionEnv(fn)
				equalJSON(t, "env table", vars[triageconfig.EnvTable], ref(f.id(f.d.Table)))
				equalJSON(t, "env bucket", vars[triageconfig.EnvBucket], ref(f.id(f.d.Bucket)))
				for _, q := range f.d.Queues {
					up := strings.ToUpper(q.Priority)
					equalJSON(t, "env queue "+up, vars[triageconfig.EnvQueueURLPrefix+up], ref(f.id(q.Queue)))
					equalJSON(t, "env DLQ "+up, vars[triageconfig.EnvDLQURLPrefix+up], ref(f.id(q.DLQ)))
				}
			}
			// The queues start the consumer: the promoter fans out none.
			if v, ok := f.functionEnv(f.d.Promoter)[triageconfig.EnvConsumerARN]; ok {
				t.Errorf("promoter's consumer ARN %v: the queues start the consumer, so the promoter needs none", v)
			}

			// Fixed output ids, values from the resources.
			for id, want := range map[string]any{"TableName": ref(f.id(f.d.Table)), "BucketName": ref(f.id(f.d.Bucket)), "QueueUrlHigh": ref(f.id(f.d.Queues[0].Queue))} {
				out, _ := f.outputs[id].(map[string]any)
				equalJSON(t, "output "+id, out["Value"], want)
			}

			// No alarm describes a queue by a name it does not have.
			for id, a := range f.ofType("AWS::CloudWatch::Alarm") {
				desc := fmt.Sprint(a.Properties["AlarmDescription"])
				for _, q := range s.Queues {
					if mentions := strings.Contains(desc, q.Name); mentions && !physical {
						t.Errorf("alarm %s names %s, which generated names do not have: %s", id, q.Name, desc)
					}
				}
			}
		})
	}
}
