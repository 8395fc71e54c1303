package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/blob"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// This file keeps a task's durable execution records (task.Step,
// task.Signal) on its item, each as a top-level attribute of its own
// (task.StepAttr, task.SignalAttr): see internal/task/durable.go and
// internal/durable.
//
// Why on the task's item and not an item per step: the table has no sort
// key, so items of their own could not be read with one Query; on the item
// they come with every read of it, the claim's ALL_NEW answer included, so
// an attempt gets all its recorded steps with no read of its own, and a
// record's fence (the attempt's claim) is checked in the same write. The
// price: a step's write, like every later write of the item, is billed on
// the item's size (1 write unit per KB): 1–2 units per step for a task
// with small results, more as inline results accumulate, which
// task.MaxStepsInline bounds (results past it go to S3).

// ErrNotExecuting means a step could not be recorded because the attempt
// recording it no longer holds the task (its claim was lost or ended).
var ErrNotExecuting = errors.New("the attempt no longer holds the task")

// ErrSignalExists means a signal of that name was delivered already: the
// first is kept and a second is refused.
var ErrSignalExists = errors.New("signal already delivered")

// Unmarshal decodes a task item, its durable records included (a read's
// item, a write's ALL_NEW answer, a stream image).
func Unmarshal(av map[string]types.AttributeValue) (*task.Task, error) {
	t, err := UnmarshalTask(av)
	if err != nil {
		return nil, err
	}
	for k, v := range av {
		switch {
		case strings.HasPrefix(k, task.StepAttrPrefix):
			var s storedStep
			if err := attributevalue.Unmarshal(v, &s); err != nil {
				return nil, fmt.Errorf("unmarshal step %s of task %s: %w", k, t.ID, err)
			}
			t.Steps = append(t.Steps, task.Step(s))
		case strings.HasPrefix(k, task.SignalAttrPrefix):
			var s storedSignal
			if err := attributevalue.Unmarshal(v, &s); err != nil {
				return nil, fmt.Errorf("unmarshal signal %s of task %s: %w", k, t.ID, err)
			}
			t.Signals = append(t.Signals, task.Signal(s))
		}
	}
	sort.Slice(t.Steps, func(i, j int) bool { return t.Steps[i].Seq < t.Steps[j].Seq })
	sort.Slice(t.Signals, func(i, j int) bool { return t.Signals[i].At.Before(t.Signals[j].At) })
	return t, nil
}

// RecordStep writes step s of task id, conditional on the attempt that
// records it still holding the task: status executing with the attempt's
// token (minted at each claim), so an attempt whose lease was lost (the
// task reclaimed, finished or parked) can never record; that is
// ErrNotExecuting. A result over the inline limits (inline: the bytes of
// the task's inline step results so far) is written to the blob store
// first, under a key of its own per attempt and step. One UpdateItem
// (plus one S3 PUT for a large result); the item is not versioned by it.
func (s *Store) RecordStep(ctx context.Context, id, token string, st task.Step, inline int) error {
	if len(st.Result) > task.MaxStepInline || inline+len(st.Result) > task.MaxStepsInline {
		if s.blobs == nil {
			return fmt.Errorf("step %q of task %s: result of %d bytes is over the inline limit and no blob store is set", st.Name, id, len(st.Result))
		}
		key := blob.StepKey(id, st.Seq, st.Attempt)
		if err := s.blobs.Put(ctx, key, st.Result); err != nil {
			return fmt.Errorf("store result of step %q of task %s: %w", st.Name, id, err)
		}
		st.ResultRef, st.Result = key, nil
	}
	av, err := attributevalue.Marshal(storedStep(st))
	if err != nil {
		return fmt.Errorf("marshal step %q of task %s: %w", st.Name, id, err)
	}
	cond := expression.Name("status").Equal(expression.Value(string(triagetype.Executing))).
		And(expression.Name("progress_token").Equal(expression.Value(token)))
	expr, err := expression.NewBuilder().
		WithUpdate(expression.Set(expression.Name(task.StepAttr(st.Seq)), expression.Value(av))).
		WithCondition(cond).Build()
	if err != nil {
		return err
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: taskKey(id),
		UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("step %q of task %s: %w", st.Name, id, ErrNotExecuting)
	}
	if err != nil {
		return fmt.Errorf("record step %q of task %s: %w", st.Name, id, err)
	}
	return nil
}

// StepResult returns a recorded step's result, reading it from the blob
// store when it is kept there.
func (s *Store) StepResult(ctx context.Context, id string, st task.Step) ([]byte, error) {
	if st.ResultRef == "" {
		return st.Result, nil
	}
	return s.body(ctx, id, st.ResultRef)
}

// Signal delivers signal sig to task id: one conditional UpdateItem that
// keeps the first signal of a name (a second is ErrSignalExists) and
// refuses a finished task (a *ConflictError carrying it) or a missing one
// (ErrNotFound). It returns the task as written, signals included, so the
// caller can see whether the task waits for it (Suspend).
func (s *Store) Signal(ctx context.Context, id string, sig task.Signal) (*task.Task, error) {
	av, err := attributevalue.Marshal(storedSignal(sig))
	if err != nil {
		return nil, fmt.Errorf("marshal signal %q of task %s: %w", sig.Name, id, err)
	}
	attr := task.SignalAttr(sig.Name)
	cond := expression.AttributeExists(expression.Name("status")).
		And(expression.AttributeNotExists(expression.Name(attr))).
		And(expression.Not(expression.Name("status").In(
			expression.Value(string(triagetype.Completed)),
			expression.Value(string(triagetype.Cancelled)),
			expression.Value(string(triagetype.DeadLetter)))))
	expr, err := expression.NewBuilder().
		WithUpdate(expression.Set(expression.Name(attr), expression.Value(av))).
		WithCondition(cond).Build()
	if err != nil {
		return nil, err
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: taskKey(id),
		UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if len(ccf.Item) == 0 {
			return nil, fmt.Errorf("signal task %s: %w", id, ErrNotFound)
		}
		cur, uerr := Unmarshal(ccf.Item)
		if uerr != nil {
			return nil, uerr
		}
		if _, dup := ccf.Item[attr]; dup {
			return cur, fmt.Errorf("signal %q of task %s: %w", sig.Name, id, ErrSignalExists)
		}
		return cur, &ConflictError{ID: id, Current: cur}
	}
	if err != nil {
		return nil, fmt.Errorf("signal task %s: %w", id, err)
	}
	return Unmarshal(out.Attributes)
}

// ForgetFailedSteps removes t's step records of permanent errors, so an
// operator's retry of a dead-lettered task runs those steps again rather
// than replaying their failure (the steps that succeeded still replay).
// It is conditional on the task still being dead_letter, and writes
// nothing when no step failed.
func (s *Store) ForgetFailedSteps(ctx context.Context, t *task.Task) error {
	var upd expression.UpdateBuilder
	n := 0
	for _, st := range t.Steps {
		if st.Error != "" {
			upd = upd.Remove(expression.Name(task.StepAttr(st.Seq)))
			n++
		}
	}
	if n == 0 {
		return nil
	}
	cond := expression.Name("status").Equal(expression.Value(string(triagetype.DeadLetter)))
	expr, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build()
	if err != nil {
		return err
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: taskKey(t.ID),
		UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	})
	if err != nil {
		return s.conflict(t.ID, err)
	}
	return nil
}
