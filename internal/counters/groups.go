package counters

import (
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/spec"
)

// GroupCompletion is a batch or workflow head (internal/store batch.go)
// that completed: the stream record events turns into batch.completed or
// workflow.completed.
type GroupCompletion struct {
	ID           string    `dynamodbav:"batch_id"`
	Kind         string    `dynamodbav:"kind"`
	Version      int64     `dynamodbav:"version"`
	CompletedAt  time.Time `dynamodbav:"completed_at"`
	CallbackID   string    `dynamodbav:"callback_id"`
	Total        int       `dynamodbav:"total"`
	Completed    int       `dynamodbav:"completed"`
	DeadLettered int       `dynamodbav:"dead_lettered"`
	Cancelled    int       `dynamodbav:"cancelled"`
}

// groupCompleted returns the completion a stream record of a head shows:
// its new image is completed and its old one was not. Other records
// (shards, node pages, heads that did not complete) give nil.
func groupCompleted(old, new map[string]types.AttributeValue) *GroupCompletion {
	pk, _ := new[spec.AttrPK].(*types.AttributeValueMemberS)
	if pk == nil {
		return nil
	}
	id, ok := strings.CutPrefix(pk.Value, spec.BatchKeyPrefix)
	if !ok || strings.Contains(id, "#") || stateOf(new) != "completed" || stateOf(old) == "completed" {
		return nil
	}
	var g GroupCompletion
	if err := attributevalue.UnmarshalMap(new, &g); err != nil {
		return nil
	}
	return &g
}

func stateOf(img map[string]types.AttributeValue) string {
	if v, ok := img["state"].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// ChangeOf is the Change the stream readers make of one record (ok is
// false when it is neither a task's nor a completing head's): for tests
// of what events derive from records.
func ChangeOf(seq string, old, new map[string]types.AttributeValue) (Change, bool, error) {
	return changeOf(seq, old, new)
}
