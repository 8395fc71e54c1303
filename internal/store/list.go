package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/task"
)

// ListFilter selects tasks for List. Empty fields match everything.
type ListFilter struct {
	Type     string
	Status   task.Status
	Priority task.Priority // effective priority
}

// ErrBadCursor is returned for a cursor List did not issue.
var ErrBadCursor = errors.New("invalid cursor")

// source is one index partition (or the whole table) a listing walks.
type source struct {
	index  string // "" scans the table
	pk     string // partition key value in the index
	pkAttr string
}

// cursor is the opaque position of a listing: which source, and where in it.
type cursor struct {
	Source int               `json:"s"`
	Key    map[string]string `json:"k,omitempty"`
}

// List returns up to limit tasks matching f after cursor c ("" to start)
// and the cursor of the next page ("" at the end). A listing walks the
// index partitions that can hold matches one after another, so every
// matching task appears exactly once across its pages.
func (s *Store) List(ctx context.Context, f ListFilter, limit int, c string) ([]*task.Task, string, error) {
	srcs := sources(f)
	cur := cursor{}
	if c != "" {
		b, err := base64.RawURLEncoding.DecodeString(c)
		if err != nil || json.Unmarshal(b, &cur) != nil || cur.Source < 0 || cur.Source >= len(srcs) {
			return nil, "", ErrBadCursor
		}
	}
	filter, hasFilter := listFilterExpr(f)
	var out []*task.Task
	for cur.Source < len(srcs) && len(out) < limit {
		src := srcs[cur.Source]
		var start map[string]types.AttributeValue
		if len(cur.Key) > 0 {
			start = map[string]types.AttributeValue{}
			for k, v := range cur.Key {
				start[k] = &types.AttributeValueMemberS{Value: v}
			}
		}
		items, next, err := s.readSource(ctx, src, filter, hasFilter, int32(limit-len(out)), start)
		if err != nil {
			return nil, "", err
		}
		for _, it := range items {
			t, err := unmarshal(it)
			if err != nil {
				return nil, "", err
			}
			out = append(out, t)
		}
		if len(next) == 0 {
			cur = cursor{Source: cur.Source + 1}
			continue
		}
		cur.Key = map[string]string{}
		for k, v := range next {
			sv, ok := v.(*types.AttributeValueMemberS)
			if !ok {
				return nil, "", fmt.Errorf("list: unexpected key attribute %s", k)
			}
			cur.Key[k] = sv.Value
		}
	}
	if cur.Source >= len(srcs) {
		return out, "", nil
	}
	b, _ := json.Marshal(cur)
	return out, base64.RawURLEncoding.EncodeToString(b), nil
}

// sources picks the cheapest way to enumerate f's matches: the type index
// for a type, the status index partitions for a status or priority, and a
// table scan otherwise.
func sources(f ListFilter) []source {
	switch {
	case f.Type != "":
		return []source{{index: spec.IndexByType, pkAttr: spec.AttrGSI2PK, pk: f.Type}}
	case f.Status != "" || f.Priority != "":
		statuses := task.Statuses()
		if f.Status != "" {
			statuses = []task.Status{f.Status}
		}
		prios := task.Priorities()
		if f.Priority != "" {
			prios = []task.Priority{f.Priority}
		}
		var out []source
		for _, st := range statuses {
			for _, p := range prios {
				out = append(out, source{index: spec.IndexByStatus, pkAttr: spec.AttrGSI1PK, pk: StatusPartition(st, p)})
			}
		}
		return out
	}
	return []source{{}}
}

// listFilterExpr is the filter applied within a source: status and
// priority on the type index, "is a task" on a scan.
func listFilterExpr(f ListFilter) (expression.ConditionBuilder, bool) {
	var conds []expression.ConditionBuilder
	if f.Type != "" && f.Status != "" {
		conds = append(conds, expression.Name("status").Equal(expression.Value(string(f.Status))))
	}
	if f.Type != "" && f.Priority != "" {
		conds = append(conds, expression.Name("effective_priority").Equal(expression.Value(string(f.Priority))))
	}
	if f.Type == "" && f.Status == "" && f.Priority == "" {
		conds = append(conds, expression.Name(spec.AttrPK).BeginsWith("TASK#"))
	}
	switch len(conds) {
	case 0:
		return expression.ConditionBuilder{}, false
	case 1:
		return conds[0], true
	}
	return expression.And(conds[0], conds[1]), true
}

func (s *Store) readSource(ctx context.Context, src source, filter expression.ConditionBuilder, hasFilter bool, limit int32, start map[string]types.AttributeValue) ([]map[string]types.AttributeValue, map[string]types.AttributeValue, error) {
	b := expression.NewBuilder()
	if hasFilter {
		b = b.WithFilter(filter)
	}
	if src.index == "" {
		expr, err := b.Build()
		if err != nil {
			return nil, nil, err
		}
		out, err := s.db.Scan(ctx, &dynamodb.ScanInput{
			TableName: &s.table, Limit: aws.Int32(limit), ExclusiveStartKey: start,
			FilterExpression: expr.Filter(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		})
		if err != nil {
			return nil, nil, fmt.Errorf("scan tasks: %w", err)
		}
		return out.Items, out.LastEvaluatedKey, nil
	}
	expr, err := b.WithKeyCondition(expression.Key(src.pkAttr).Equal(expression.Value(src.pk))).Build()
	if err != nil {
		return nil, nil, err
	}
	out, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName: &s.table, IndexName: aws.String(src.index), Limit: aws.Int32(limit), ExclusiveStartKey: start,
		KeyConditionExpression: expr.KeyCondition(), FilterExpression: expr.Filter(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ScanIndexForward: aws.Bool(src.index == spec.IndexByStatus),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("query %s %s: %w", src.index, src.pk, err)
	}
	return out.Items, out.LastEvaluatedKey, nil
}

// Cleanup deletes terminal tasks that finished before olderThan and returns
// how many it deleted. A task that changed meanwhile is left alone.
func (s *Store) Cleanup(ctx context.Context, olderThan time.Time) (int, error) {
	n := 0
	for _, st := range []task.Status{task.Completed, task.Cancelled, task.DeadLetter} {
		for _, p := range task.Priorities() {
			q := WaitingQuery{Status: st, Priority: p, Before: olderThan, Limit: 100}
			for {
				page, err := s.Waiting(ctx, q)
				if err != nil {
					return n, err
				}
				for _, t := range page.Tasks {
					if err := s.Delete(ctx, t); err == nil {
						n++
					} else if !errors.Is(err, ErrConflict) {
						return n, err
					}
				}
				if len(page.Next) == 0 {
					break
				}
				q.Start = page.Next
			}
		}
	}
	return n, nil
}

// typeRegistry remembers which task types this process has registered, so
// each type costs one registry write per process, not one per task.
type typeRegistry struct {
	mu   sync.Mutex
	seen map[string]bool
}

const typesKey = "TYPES"

// registerType adds typ to the table's set of known task types (used by
// stats), once per process.
func (s *Store) registerType(ctx context.Context, typ string) error {
	s.types.mu.Lock()
	seen := s.types.seen[typ]
	s.types.mu.Unlock()
	if seen {
		return nil
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.table,
		Key:                       map[string]types.AttributeValue{spec.AttrPK: &types.AttributeValueMemberS{Value: typesKey}},
		UpdateExpression:          aws.String("ADD #t :t"),
		ExpressionAttributeNames:  map[string]string{"#t": "types"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":t": &types.AttributeValueMemberSS{Value: []string{typ}}},
	})
	if err != nil {
		return fmt.Errorf("register task type %q: %w", typ, err)
	}
	s.types.mu.Lock()
	s.types.seen[typ] = true
	s.types.mu.Unlock()
	return nil
}

// Types lists every task type ever submitted.
func (s *Store) Types(ctx context.Context) ([]string, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{spec.AttrPK: &types.AttributeValueMemberS{Value: typesKey}},
	})
	if err != nil {
		return nil, fmt.Errorf("read task types: %w", err)
	}
	if ss, ok := out.Item["types"].(*types.AttributeValueMemberSS); ok {
		return ss.Value, nil
	}
	return nil, nil
}

// CountByStatus counts one type's tasks by status, reading its index
// partition (the status attribute only).
func (s *Store) CountByStatus(ctx context.Context, typ string) (map[task.Status]int, error) {
	key := expression.Key(spec.AttrGSI2PK).Equal(expression.Value(typ))
	expr, err := expression.NewBuilder().WithKeyCondition(key).WithProjection(expression.NamesList(expression.Name("status"))).Build()
	if err != nil {
		return nil, err
	}
	in := &dynamodb.QueryInput{
		TableName: &s.table, IndexName: aws.String(spec.IndexByType),
		KeyConditionExpression: expr.KeyCondition(), ProjectionExpression: expr.Projection(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	}
	counts := map[task.Status]int{}
	for {
		out, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("count type %q: %w", typ, err)
		}
		for _, it := range out.Items {
			if v, ok := it["status"].(*types.AttributeValueMemberS); ok {
				counts[task.Status(v.Value)]++
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return counts, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}
