package store

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Claim is a claim made from a task's message alone, without reading the
// task first: the message's copies of the task's type, key and timeout
// (task.Message) are what the claimer decided on, and the write's
// condition checks them against the item.
type Claim struct {
	ID              string
	DispatchVersion int64 // the message's version
	Type            string
	Key             string
	TimeoutSeconds  int
	WorkerID        string
	LeaseUntil      time.Time
	// StartedAt is the attempt's started_at; zero means the store's now.
	StartedAt     time.Time
	ProgressToken string
}

// Claim moves a queued or retrying task to executing with one conditional
// UpdateItem, the same change Transition makes for a claim (status
// executing, version + 1, attempts + 1, the worker, its lease, started_at
// and a new progress token; retry_at, the set-aside marks, a suspension,
// the aging mark, the edge parent and the by-due entry removed), conditional on the task
// waiting for exactly this message (status queued or retrying and
// dispatch_version c.DispatchVersion) and having the type, key and timeout
// the claimer decided on. Only one claim of a message can win.
//
// It returns the claimed task as written (ALL_NEW: every attribute, a
// durable task's recorded steps and signals included), or a
// *ConflictError whose Current is the item as it was when the condition
// failed (ALL_OLD; nil when there is no item), which tells a stale
// message from a running, finished or not yet recorded task without
// another read. It never creates an item.
func (s *Store) Claim(ctx context.Context, c Claim) (*task.Task, error) {
	now, started := s.now(), c.StartedAt
	if started.IsZero() {
		started = now
	}
	val := func(v any) expression.ValueBuilder { return expression.Value(v) }
	at := func(t time.Time) expression.ValueBuilder {
		av, _ := attributevalue.Marshal(t) // as MarshalTask stores a time
		return expression.Value(av)
	}
	upd := expression.Set(expression.Name("status"), val(string(triagetype.Executing))).
		Set(expression.Name("version"), expression.Name("version").Plus(val(1))).
		Set(expression.Name("attempts"), expression.Name("attempts").Plus(val(1))).
		Set(expression.Name("worker_id"), val(c.WorkerID)).
		Set(expression.Name("lease_until"), at(c.LeaseUntil)).
		Set(expression.Name("started_at"), at(started)).
		Set(expression.Name("waiting_since"), at(now)).
		Set(expression.Name("progress_token"), val(c.ProgressToken)).
		Remove(expression.Name("retry_at")).
		Remove(expression.Name("held")).
		Remove(expression.Name("released")).
		Remove(expression.Name("suspended")).
		Remove(expression.Name("tracked")).
		Remove(expression.Name("edge_parent")).
		Remove(expression.Name(spec.AttrDuePK)).
		Remove(expression.Name(spec.AttrDueSK))
	key := expression.AttributeNotExists(expression.Name("key"))
	if c.Key != "" {
		key = expression.Name("key").Equal(val(c.Key))
	}
	cond := expression.Name("dispatch_version").Equal(val(c.DispatchVersion)).
		And(expression.Name("status").In(val(string(triagetype.Queued)), val(string(triagetype.Retrying)))).
		And(expression.Name("type").Equal(val(c.Type))).
		And(expression.Name("timeout_seconds").Equal(val(c.TimeoutSeconds))).
		And(key)
	expr, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build()
	if err != nil {
		return nil, fmt.Errorf("build claim of task %s: %w", c.ID, err)
	}
	saved, err := s.updateTask(ctx, c.ID, expr)
	if err != nil {
		return nil, err
	}
	s.log.LogAttrs(ctx, transitionLevel(triagetype.Executing), "task transition",
		slog.String("task_id", saved.ID), slog.String("type", saved.Type),
		slog.String("priority", string(saved.Priority)), slog.String("effective_priority", string(saved.EffectivePriority)),
		slog.String("from", "queued or retrying"), slog.String("to", string(triagetype.Executing)),
		slog.Int64("version", saved.Version), slog.Int("attempts", saved.Attempts),
		slog.String("trace_id", saved.TraceID))
	return saved, nil
}
