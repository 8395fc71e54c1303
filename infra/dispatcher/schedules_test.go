package dispatcher_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/triagehq/triage/infra/dispatcher"
	"github.com/triagehq/triage/triagetype"
)

// Deploy-time schedules are one custom resource each: a PutItem of the
// schedule's pending item into the table on create and update, a
// DeleteItem of its key on delete, allowed on the table alone. The
// default deployment has none.
func TestSchedulesAsProps(t *testing.T) {
	plain, err := synth(filepath.Join(env.outDir, "schedules-none"), false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(plain.ofType("Custom::AWS")); n != 0 {
		t.Fatalf("the default deployment has %d custom resources, want none", n)
	}
	f, err := synth(filepath.Join(env.outDir, "schedules"), false, &dispatcher.Props{
		PhysicalNames: true,
		Schedules: []dispatcher.Schedule{
			{Name: "nightly-cleanup", Cron: "0 2 * * *", Timezone: "Europe/Berlin", Task: triagetype.SubmitRequest{Type: "cleanup", Priority: "low"}},
			{Name: "quarter-hour", Cron: "*/15 * * * *", Paused: true, Task: triagetype.SubmitRequest{Type: "poll"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	crs := f.ofType("Custom::AWS")
	if len(crs) != 2 || len(f.d.ScheduleResources) != 2 {
		t.Fatalf("%d custom resources (%d on the construct), want 2", len(crs), len(f.d.ScheduleResources))
	}
	tableRef := `{"Ref":"` + f.id(f.d.Table.(constructs.IConstruct)) + `"}`
	byName := map[string]string{} // schedule name -> logical id
	for lid, r := range crs {
		b, _ := json.Marshal(r.Properties["Create"])
		for _, n := range []string{"nightly-cleanup", "quarter-hour"} {
			if strings.Contains(string(b), `\"S\":\"SCHED#`+n+`\"`) {
				byName[n] = lid
			}
		}
	}
	id := byName["nightly-cleanup"]
	props := crs[id].Properties
	for key, want := range map[string][]string{
		"Create": {`\"action\":\"PutItem\"`, `\"service\":\"DynamoDB\"`, `\"S\":\"SCHED#nightly-cleanup\"`, `\"S\":\"0 2 * * *\"`, `\"S\":\"Europe/Berlin\"`, `\"dsk\":{\"S\":\"0#nightly-cleanup\"}`, `\"physicalResourceId\":{\"id\":\"nightly-cleanup\"}`, tableRef},
		"Update": {`\"action\":\"PutItem\"`, `\"S\":\"SCHED#nightly-cleanup\"`},
		"Delete": {`\"action\":\"DeleteItem\"`, `\"Key\":{\"pk\":{\"S\":\"SCHED#nightly-cleanup\"}}`, tableRef},
	} {
		b, _ := json.Marshal(props[key])
		for _, w := range want {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s of %s lacks %s:\n%s", key, id, w, b)
			}
		}
	}
	// A paused schedule has no by-due entry: nothing starts it.
	b, _ := json.Marshal(crs[byName["quarter-hour"]].Properties["Create"])
	if strings.Contains(string(b), `\"dpk\"`) || !strings.Contains(string(b), `\"paused\":{\"BOOL\":true}`) {
		t.Errorf("paused schedule's item: %s", b)
	}
	// Each custom resource's policy: PutItem and DeleteItem on the table.
	var actions []string
	for _, p := range f.ofType("AWS::IAM::Policy") {
		b, _ := json.Marshal(p.Properties["PolicyDocument"])
		if strings.Contains(string(b), "dynamodb:PutItem") && strings.Contains(string(b), "dynamodb:DeleteItem") && !strings.Contains(string(b), "dynamodb:Query") {
			actions = append(actions, string(b))
		}
	}
	want := `{"Statement":[{"Action":["dynamodb:DeleteItem","dynamodb:PutItem"],"Effect":"Allow","Resource":{"Fn::GetAtt":["` + f.id(f.d.Table.(constructs.IConstruct)) + `","Arn"]}}],"Version":"2012-10-17"}`
	if len(actions) != 2 || actions[0] != want || actions[1] != want {
		t.Errorf("want one policy per schedule, of PutItem and DeleteItem on the table alone; got %v", actions)
	}
}

// A bad schedule is refused at synth, naming the schedule and the field.
func TestSchedulesRefusedAtSynth(t *testing.T) {
	for _, tc := range []struct {
		s    []dispatcher.Schedule
		want string
	}{
		{[]dispatcher.Schedule{{Name: "a", Cron: "0 25 * * *", Task: triagetype.SubmitRequest{Type: "x"}}}, `schedule "a": cron`},
		{[]dispatcher.Schedule{{Name: "a", Cron: "0 2 * * *", Timezone: "Moon/Base", Task: triagetype.SubmitRequest{Type: "x"}}}, "timezone"},
		{[]dispatcher.Schedule{{Name: "a", Cron: "0 2 * * *", Task: triagetype.SubmitRequest{Type: "x"}}, {Name: "a", Cron: "0 3 * * *", Task: triagetype.SubmitRequest{Type: "x"}}}, `"a" is given twice`},
	} {
		app := awscdk.NewApp(nil)
		stack := awscdk.NewStack(app, jsii.String("S"), nil)
		_, err := dispatcher.New(stack, "Triage", &dispatcher.Props{Schedules: tc.s})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error containing %s", tc.s, err, tc.want)
		}
	}
}
