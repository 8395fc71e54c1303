package schedule

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/task"
)

// Schedules declared at deploy time (the CDK construct's Schedules) are
// written by a CloudFormation custom resource: a DynamoDB PutItem of the
// item DeployItem makes, on create and update, and a DeleteItem on
// delete. The item is pending: it has no next tick (that depends on when
// the deploy lands, which synth cannot know) and sorts first in its by-due
// partition, so the promoter's next run finds it due and starts it at its
// first tick after that run (Ticker.start). The schedule counter is not
// changed: MaxSchedules bounds what API callers create, and deploy-time
// schedules are bounded by the template.

// pendingSortKey sorts before every time: a pending schedule is due at once.
const pendingSortKey = "0"

// DeployItem validates s (the field at fault named in a *task.FieldError)
// and returns its pending item in DynamoDB's JSON form ({"S": ...}), as an
// SDK call's parameters take it. shards is the deployment's shard count;
// known, when not empty, are its task types.
func DeployItem(s Schedule, shards int, known []string) (map[string]any, error) {
	if _, err := Validate(&s, task.NewKnownTypes(known)); err != nil {
		return nil, fmt.Errorf("schedule %q: %w", s.Name, err)
	}
	st := NewStore(nil, "", shards, nil)
	sc := &Stored{Schedule: s}
	sc.NextTick, sc.LastTick, sc.LastTaskID = nil, nil, ""
	av, err := st.toItem(sc)
	if err != nil {
		return nil, err
	}
	if !s.Paused {
		av["dpk"] = &types.AttributeValueMemberS{Value: st.duePartition(s.Name)}
		av["dsk"] = &types.AttributeValueMemberS{Value: pendingSortKey + "#" + s.Name}
	}
	delete(av, "created_at")
	delete(av, "updated_at")
	out := map[string]any{}
	for k, v := range av {
		j, err := jsonValue(v)
		if err != nil {
			return nil, fmt.Errorf("schedule %q: attribute %s: %w", s.Name, k, err)
		}
		out[k] = j
	}
	return out, nil
}

// DeployKey is the key of schedule name's item in DynamoDB's JSON form.
func DeployKey(name string) map[string]any {
	return map[string]any{"pk": map[string]any{"S": keyPrefix + name}}
}

func jsonValue(v types.AttributeValue) (map[string]any, error) {
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		return map[string]any{"S": x.Value}, nil
	case *types.AttributeValueMemberN:
		return map[string]any{"N": x.Value}, nil
	case *types.AttributeValueMemberBOOL:
		return map[string]any{"BOOL": x.Value}, nil
	}
	return nil, fmt.Errorf("unexpected attribute type %T", v)
}
