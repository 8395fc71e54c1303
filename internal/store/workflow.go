package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/triagetype"
)

// A workflow is a batch head (kind "workflow", see batch.go) plus its
// node list, kept in pages of WorkflowPageSize nodes:
//
//	item    pk                    holds
//	page    WFN#<id>#<page>       name, task id, type and parent names of up to 100 nodes
//	key     IDEM#wf:<key>         the workflow id and request hash an idempotency key names
//
// A 1,000-node workflow has 10 pages of at most ~25 KB (names up to 128
// bytes), written once each; GET reads them with one batch read.

// WorkflowPageSize is how many nodes one page item holds.
const WorkflowPageSize = 100

// WorkflowNodeRecord is one node of a workflow's node list.
type WorkflowNodeRecord struct {
	Name   string   `dynamodbav:"n"`
	TaskID string   `dynamodbav:"id"`
	Type   string   `dynamodbav:"t"`
	After  []string `dynamodbav:"a,omitempty"`
}

type workflowPage struct {
	Nodes []WorkflowNodeRecord `dynamodbav:"nodes"`
}

func pageKey(id string, page int) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{spec.AttrPK: &types.AttributeValueMemberS{Value: "WFN#" + id + "#" + strconv.Itoa(page)}}
}

// PutWorkflowNodes writes a workflow's node list (unconditional puts of
// the same content: a retried submit writes the same pages).
func (s *Store) PutWorkflowNodes(ctx context.Context, id string, nodes []WorkflowNodeRecord) error {
	for page := 0; page*WorkflowPageSize < len(nodes); page++ {
		part := nodes[page*WorkflowPageSize : min((page+1)*WorkflowPageSize, len(nodes))]
		av, err := attributevalue.MarshalMap(workflowPage{Nodes: part})
		if err != nil {
			return fmt.Errorf("marshal workflow %s page %d: %w", id, page, err)
		}
		av[spec.AttrPK] = pageKey(id, page)[spec.AttrPK]
		if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: av}); err != nil {
			return fmt.Errorf("write workflow %s page %d: %w", id, page, err)
		}
	}
	return nil
}

// WorkflowNodes reads a workflow's node list of n nodes.
func (s *Store) WorkflowNodes(ctx context.Context, id string, n int) ([]WorkflowNodeRecord, error) {
	pages := (n + WorkflowPageSize - 1) / WorkflowPageSize
	var keys []map[string]types.AttributeValue
	for p := range pages {
		keys = append(keys, pageKey(id, p))
	}
	got := make([][]WorkflowNodeRecord, pages)
	req := map[string]types.KeysAndAttributes{s.table: {Keys: keys, ConsistentRead: aws.Bool(true)}}
	for attempt := 0; len(req) > 0 && len(keys) > 0; attempt++ {
		if attempt > 8 {
			return nil, fmt.Errorf("read workflow %s: DynamoDB kept pages unprocessed", id)
		}
		out, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
		if err != nil {
			return nil, fmt.Errorf("read workflow %s: %w", id, err)
		}
		for _, it := range out.Responses[s.table] {
			pk := attrString(it[spec.AttrPK])
			p, err := strconv.Atoi(pk[len("WFN#"+id+"#"):])
			if err != nil || p < 0 || p >= pages {
				continue
			}
			var wp workflowPage
			if err := attributevalue.UnmarshalMap(it, &wp); err != nil {
				return nil, err
			}
			got[p] = wp.Nodes
		}
		req = out.UnprocessedKeys
	}
	var all []WorkflowNodeRecord
	for _, g := range got {
		all = append(all, g...)
	}
	return all, nil
}

// ClaimWorkflowKey maps idempotency key to workflow id (with the hash of
// its request) for IdempotencyWindow, unless the key already names one:
// then it returns that workflow's id and hash.
func (s *Store) ClaimWorkflowKey(ctx context.Context, key, id, hash string) (ownerID, ownerHash string, err error) {
	now := s.now()
	pk := &types.AttributeValueMemberS{Value: idemPK("wf:" + key)}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &s.table,
		Item: map[string]types.AttributeValue{
			spec.AttrPK: pk, "workflow_id": &types.AttributeValueMemberS{Value: id},
			"request_hash": &types.AttributeValueMemberS{Value: hash},
			spec.AttrTTL:   &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(IdempotencyWindow).Unix(), 10)},
		},
		ConditionExpression:       aws.String("attribute_not_exists(#pk) OR #ttl < :now"),
		ExpressionAttributeNames:  map[string]string{"#pk": spec.AttrPK, "#ttl": spec.AttrTTL},
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Unix(), 10)}},
	})
	var ccf *types.ConditionalCheckFailedException
	if err == nil {
		return id, hash, nil
	}
	if !errors.As(err, &ccf) {
		return "", "", fmt.Errorf("record workflow idempotency key: %w", err)
	}
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{spec.AttrPK: pk}})
	if err != nil {
		return "", "", fmt.Errorf("read workflow idempotency key: %w", err)
	}
	return attrString(out.Item["workflow_id"]), attrString(out.Item["request_hash"]), nil
}

// HoldFinished records on pending workflow id's head that its node taskID
// finished before the commit, unless the head was sealed (committed) or
// abandoned meanwhile: one conditional write (ADD to the held string set,
// about 1 write unit), on the same item and with the same condition as
// AbandonHead, so it is ordered against SealHead and AbandonHead. It
// reports whether this call held the node: then the commit, whose
// SealHead returns the head with Held, resolves the node's children; if
// not, the caller reads the head again (sealed: it walks them itself).
// The set holds at most one id per node: 1,000 × 26 bytes, 26 KB at worst
// (every node cancelled before the commit), which the head's later writes
// (at most 16 shard reports and the completion) are billed by.
func (s *Store) HoldFinished(ctx context.Context, id, taskID string) (bool, error) {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: batchKey(id),
		UpdateExpression:         aws.String("ADD #held :ids"),
		ConditionExpression:      aws.String(pendingUnsealed),
		ExpressionAttributeNames: map[string]string{"#held": "held", "#st": "state", "#sealed": "sealed"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":ids":     &types.AttributeValueMemberSS{Value: []string{taskID}},
			":pending": &types.AttributeValueMemberS{Value: triagetype.WorkflowPending},
			":f":       &types.AttributeValueMemberBOOL{Value: false},
		},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("hold finished node %s of workflow %s: %w", taskID, id, err)
	}
	return true, nil
}
