package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/task"
)

// A member add counts a request's batch members on their shard before
// they are written, so that each member is then one plain put, as a plain
// task is (createMember's transaction, billed twice, cost a member about
// +5 write units over a plain task):
//
//	item        pk                           holds                      by-due key
//	member add  BATCH#<batch>#add#<add id>   shard, member ids, created batches#<shard of add id> /
//	                                                                    add#created#<batch>#<add id>
//
// CountMembers is one transaction: the shard's added goes up by the
// request's member count (on the condition that the shard exists and is
// not sealed, as createMember's) and the add record, listing the members'
// ids, is written. The members are then written with plain puts, each
// before MemberAddDeadline has passed since the count (the writer stops
// there: see WriteBefore). SettleAdd closes the add: it takes back from
// the shard the members that were not written (their send or record
// failed) and deletes the record, in one transaction; when every member
// was written it only deletes the record.
//
// Invariant: a shard's added is never below the members written on it
// and counted there, so a batch never completes before a member it
// counted has finished; and every add is settled, by its writer or, after
// a crash, by the promoter's sweep (OpenBatches, once the add is older than
// MemberAddStale, long after its last possible write), which reads the
// listed members and takes back those that do not exist. Until then the
// batch waits: it completes late, never early.
//
// Cost for a request of n members: the count (2 units for the shard, 2 per
// KB of the record and its index entry's 2: about 10 for n = 100), the
// delete (about 4 for n = 100), and n plain creates of 3 units: about 3.1
// units a member. A request with one member (a single submit naming the
// batch) keeps createMember's transaction, which is cheaper for one.

// MemberAddDeadline is how long after its count a member add's members
// may be written: a writer past it writes no more of them (their messages,
// sent already, find no task and are dead-lettered as such).
const MemberAddDeadline = time.Minute

// MemberAddStale is how old a member add must be before the sweep settles
// it: far past MemberAddDeadline, so no write of its members can land
// after the sweep has read them.
const MemberAddStale = 5 * time.Minute

// Member adds are entered in the batch sweep's by-due partitions
// (batches#<shard>, with the sealed heads: one query of the sweep reads
// both), their sort keys beginning with addEntryPrefix.
const addEntryPrefix = "add#"

// AddRef is a member add's entry in the sweep's index.
type AddRef struct {
	Batch, ID string
	Created   time.Time
}

func addEntry(a *MemberAdd) string {
	return addEntryPrefix + SortableTime(a.Created) + "#" + a.Batch + "#" + a.ID
}

// parseAddEntry reads a member add's sort key (addEntry).
func parseAddEntry(sk string) (AddRef, bool) {
	rest, ok := strings.CutPrefix(sk, addEntryPrefix)
	if !ok {
		return AddRef{}, false
	}
	parts := strings.Split(rest, "#")
	if len(parts) != 3 {
		return AddRef{}, false
	}
	at, err := time.Parse(sortableLayout, parts[0])
	if err != nil {
		return AddRef{}, false
	}
	return AddRef{Batch: parts[1], ID: parts[2], Created: at}, true
}

// MemberAdd is one request's members of one batch, counted before they
// are written.
type MemberAdd struct {
	ID      string    `dynamodbav:"add_id"`
	Batch   string    `dynamodbav:"batch_id"`
	Shard   int       `dynamodbav:"shard"`
	Members []string  `dynamodbav:"members,stringset"`
	Created time.Time `dynamodbav:"created_at"`
}

// NewMemberAdd returns the add of members (their ids) to batch, on the
// shard its own id picks.
func (s *Store) NewMemberAdd(batch string, members []string) *MemberAdd {
	now := s.now().UTC()
	id := task.NewID(now)
	return &MemberAdd{ID: id, Batch: batch, Shard: Shard(id, BatchShards), Members: members, Created: now}
}

// WriteBefore is when the add's members must have been written by.
func (a *MemberAdd) WriteBefore() time.Time { return a.Created.Add(MemberAddDeadline) }

func addKey(batch, id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{spec.AttrPK: &types.AttributeValueMemberS{Value: batchPrefix + batch + "#add#" + id}}
}

// CountMembers counts a's members on its shard and records a, in one
// transaction. A batch that does not exist or whose shard is sealed is a
// *task.FieldError naming batch_id, and nothing is written.
func (s *Store) CountMembers(ctx context.Context, a *MemberAdd) error {
	av, err := attributevalue.MarshalMap(a)
	if err != nil {
		return fmt.Errorf("marshal member add %s: %w", a.ID, err)
	}
	maps.Copy(av, addKey(a.Batch, a.ID))
	av[spec.AttrDuePK] = &types.AttributeValueMemberS{Value: batchPartition + strconv.Itoa(s.shardOf(a.ID))}
	av[spec.AttrDueSK] = &types.AttributeValueMemberS{Value: addEntry(a)}
	err = s.transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Update: &types.Update{TableName: &s.table, Key: shardKey(a.Batch, a.Shard),
			UpdateExpression:          aws.String("ADD #added :n"),
			ConditionExpression:       aws.String("attribute_exists(#pk) AND #sealed = :f"),
			ExpressionAttributeNames:  map[string]string{"#pk": spec.AttrPK, "#added": "added", "#sealed": "sealed"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":n": &types.AttributeValueMemberN{Value: strconv.Itoa(len(a.Members))}, ":f": &types.AttributeValueMemberBOOL{Value: false}}}},
		{Put: &types.Put{TableName: &s.table, Item: av,
			ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
			ExpressionAttributeNames: map[string]string{"#pk": spec.AttrPK}}},
	}})
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) && len(tce.CancellationReasons) > 0 && aws.ToString(tce.CancellationReasons[0].Code) == "ConditionalCheckFailed" {
		return &task.FieldError{Field: "batch_id", Message: fmt.Sprintf("batch %s does not exist or is sealed", a.Batch)}
	}
	if err != nil {
		return fmt.Errorf("count %d members of batch %s: %w", len(a.Members), a.Batch, err)
	}
	return nil
}

// SettleAdd closes a: it takes missing members back from its shard and
// deletes its record, in one transaction (only the delete when missing is
// 0). It reports whether this call settled it: false when it was settled
// already (by its writer, or the sweep), and then nothing changes.
func (s *Store) SettleAdd(ctx context.Context, a *MemberAdd, missing int) (bool, error) {
	del := &types.Delete{TableName: &s.table, Key: addKey(a.Batch, a.ID),
		ConditionExpression:      aws.String("attribute_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": spec.AttrPK}}
	var err error
	if missing == 0 {
		_, err = s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: del.TableName, Key: del.Key,
			ConditionExpression: del.ConditionExpression, ExpressionAttributeNames: del.ExpressionAttributeNames})
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			return false, nil
		}
	} else {
		err = s.transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Delete: del},
			{Update: &types.Update{TableName: &s.table, Key: shardKey(a.Batch, a.Shard),
				UpdateExpression:          aws.String("ADD #added :n"),
				ConditionExpression:       aws.String("attribute_exists(#pk)"),
				ExpressionAttributeNames:  map[string]string{"#pk": spec.AttrPK, "#added": "added"},
				ExpressionAttributeValues: map[string]types.AttributeValue{":n": &types.AttributeValueMemberN{Value: strconv.Itoa(-missing)}}}},
		}})
		var tce *types.TransactionCanceledException
		if errors.As(err, &tce) {
			refused := func(i int) bool {
				return len(tce.CancellationReasons) > i && aws.ToString(tce.CancellationReasons[i].Code) == "ConditionalCheckFailed"
			}
			switch {
			case refused(0):
				return false, nil
			case refused(1):
				// The batch is gone (cleaned up): nothing to take back.
				return s.SettleAdd(ctx, a, 0)
			}
		}
	}
	if err != nil {
		return false, fmt.Errorf("settle member add %s of batch %s: %w", a.ID, a.Batch, err)
	}
	return true, nil
}

// MemberAddAt reads the member add ref names (strongly consistent): nil
// when it was settled meanwhile.
func (s *Store) MemberAddAt(ctx context.Context, ref AddRef) (*MemberAdd, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: addKey(ref.Batch, ref.ID), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("read member add %s of batch %s: %w", ref.ID, ref.Batch, err)
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	var a MemberAdd
	if err := attributevalue.UnmarshalMap(out.Item, &a); err != nil {
		return nil, fmt.Errorf("unmarshal member add %s of batch %s: %w", ref.ID, ref.Batch, err)
	}
	return &a, nil
}
