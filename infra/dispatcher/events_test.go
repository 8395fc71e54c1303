package dispatcher_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/triagehq/triage/infra/dispatcher"
	"github.com/triagehq/triage/triageconfig"
)

// putEventsGrants lists "function: resource" for every events:PutEvents
// statement on any function's role.
func putEventsGrants(t *testing.T, f *fixture) []string {
	t.Helper()
	var out []string
	for name, fn := range map[string]awslambda.Function{"api": f.d.API, "consumer": f.d.Consumer, "promoter": f.d.Promoter, "counters": f.d.Counters} {
		for _, st := range f.policyStatements(t, fn) {
			for _, a := range asList(st["Action"]) {
				if s := fmt.Sprint(a); s == "events:PutEvents" || s == "events:*" || s == "*" {
					for _, r := range asList(st["Resource"]) {
						b, _ := json.Marshal(r)
						out = append(out, name+": "+string(b))
					}
				}
			}
		}
	}
	return out
}

// Events are opt-in: the default deployment has no bus, no grant and no
// TRIAGE_EVENT_BUS.
func TestEventsOffByDefault(t *testing.T) {
	f := stackUnderTest(t)
	if n := len(f.ofType("AWS::Events::EventBus")); n != 0 || f.d.EventBus != nil {
		t.Fatalf("%d event buses (Dispatcher.EventBus %v), want none", n, f.d.EventBus)
	}
	if g := putEventsGrants(t, f); len(g) != 0 {
		t.Fatalf("PutEvents granted without Events: %v", g)
	}
	if v, ok := f.functionEnv(f.d.Counters)[triageconfig.EnvEventBus]; ok {
		t.Fatalf("counters has %s = %v", triageconfig.EnvEventBus, v)
	}
}

// With Events the construct creates a bus, tells the counters function
// (the stream reader) its ARN, and grants exactly that function
// events:PutEvents on exactly that bus; the webhooks are the counters
// function's too, with the signing secret. No trigger or function is
// added: events ride on the counters' stream trigger.
func TestEventsBus(t *testing.T) {
	f, err := synth(filepath.Join(env.outDir, "events"), false, &dispatcher.Props{
		PhysicalNames: true, Events: true,
		EventWebhooks: "task.completed=https://hooks.example.com/done",
		WebhookSecret: awscdk.SecretValue_UnsafePlainText(jsii.String("whsec")),
	})
	if err != nil {
		t.Fatal(err)
	}
	buses := f.ofType("AWS::Events::EventBus")
	if len(buses) != 1 || f.d.EventBus == nil {
		t.Fatalf("%d event buses, want 1", len(buses))
	}
	busID := f.id(f.d.EventBus.(constructs.IConstruct))
	if name := buses[busID].Properties["Name"]; name != "triage-events" {
		t.Errorf("bus name %v, want triage-events", name)
	}
	busARN := getAtt(busID, "Arn")
	envs := f.functionEnv(f.d.Counters)
	equalJSON(t, "counters "+triageconfig.EnvEventBus, envs[triageconfig.EnvEventBus], busARN)
	equalJSON(t, "counters "+triageconfig.EnvEventWebhooks, envs[triageconfig.EnvEventWebhooks], "task.completed=https://hooks.example.com/done")
	equalJSON(t, "counters "+triageconfig.EnvWebhookSecret, envs[triageconfig.EnvWebhookSecret], "whsec")
	for _, fn := range []awslambda.Function{f.d.API, f.d.Consumer, f.d.Promoter} {
		if _, ok := f.functionEnv(fn)[triageconfig.EnvEventBus]; ok {
			t.Errorf("%s is told the events bus", f.id(fn))
		}
	}
	if !allows(t, f.policyStatements(t, f.d.Counters), "events:PutEvents", busARN) {
		t.Error("counters may not put events on the bus")
	}
	b, _ := json.Marshal(normalize(t, busARN))
	if g := putEventsGrants(t, f); len(g) != 1 || g[0] != "counters: "+string(b) {
		t.Errorf("PutEvents grants %v, want only counters on the bus", g)
	}
	if n := len(f.ofType("AWS::Lambda::EventSourceMapping")); n != 1+len(f.d.Queues) {
		t.Errorf("%d event source mappings, want the counters' one and one per queue (%d)", n, len(f.d.Queues))
	}
	if n := len(f.ofType("AWS::Lambda::Function")); n != 4 {
		t.Errorf("%d functions, want the 4 of the default stack", n)
	}
}

// An existing bus is used, not a new one, and the grant is on it.
func TestEventsOwnBus(t *testing.T) {
	const arn = "arn:aws:events:us-east-1:123456789012:event-bus/shared"
	// An imported bus is a literal ARN: the scope it is imported in does not matter.
	holder := awscdk.NewStack(awscdk.NewApp(nil), jsii.String("Holder"), nil)
	bus := awsevents.EventBus_FromEventBusArn(holder, jsii.String("Shared"), jsii.String(arn))
	f, err := synth(filepath.Join(env.outDir, "events-own"), false, &dispatcher.Props{PhysicalNames: true, Events: true, EventBus: bus})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(f.ofType("AWS::Events::EventBus")); n != 0 {
		t.Fatalf("%d buses created, want none", n)
	}
	equalJSON(t, "counters "+triageconfig.EnvEventBus, f.functionEnv(f.d.Counters)[triageconfig.EnvEventBus], arn)
	if g := putEventsGrants(t, f); len(g) != 1 || g[0] != `counters: "`+arn+`"` {
		t.Errorf("PutEvents grants %v, want only counters on %s", g, arn)
	}
}

func TestEventsPropsChecked(t *testing.T) {
	cases := []struct {
		name  string
		props dispatcher.Props
		want  string
	}{
		{"webhooks without a secret", dispatcher.Props{EventWebhooks: "https://a.example/"}, "WebhookSecret"},
		{"a bus without Events", dispatcher.Props{EventBus: awsevents.EventBus_FromEventBusName(awscdk.NewStack(awscdk.NewApp(nil), jsii.String("H"), nil), jsii.String("B"), jsii.String("b"))}, "Events"},
	}
	for _, c := range cases {
		_, err := synth(filepath.Join(env.outDir, "events-bad"), false, &c.props)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming %s", c.name, err, c.want)
		}
	}
}
