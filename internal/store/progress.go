package store

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Report is one progress report of an external handler, made with its
// attempt's token. Progress, Checkpoint or both are set.
type Report struct {
	Token      string
	Progress   *task.Progress // Attempt and UpdatedAt are filled in by Store.Report
	Checkpoint json.RawMessage
}

// ErrBadToken means a report's token is not the current attempt's: wrong,
// of an attempt that has ended, or for a task that is not running (or does
// not exist: the answer does not tell a guesser which ids exist).
var ErrBadToken = errors.New("the token is not that of the task's running attempt")

// TooSoonError refuses a report made less than the interval after the
// task's last one; Wait is how long until one may be made.
type TooSoonError struct{ Wait time.Duration }

func (e *TooSoonError) Error() string {
	return fmt.Sprintf("a task's progress may be reported at most once per %s; try again in %s", task.ProgressInterval, e.Wait.Round(time.Millisecond))
}

// Report writes an external handler's progress report, at most once per
// interval per task.
//
// It costs one strongly consistent read (to check the token and the rate
// before spending a write: a refused conditional write is billed as a
// write) and, when accepted, one UpdateItem conditional on the task still
// executing under the same token and on no other report having landed
// since the read. It does not bump the task's version, so it never makes a
// worker's heartbeat or outcome write lose its race; those writes change
// only the attributes they set, so they leave the report in place.
func (s *Store) Report(ctx context.Context, id string, r Report, interval time.Duration) (*task.Task, error) {
	cur, err := s.Get(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil, ErrBadToken
	}
	if err != nil {
		return nil, err
	}
	if cur.Status != triagetype.Executing || cur.ProgressToken == "" ||
		subtle.ConstantTimeCompare([]byte(cur.ProgressToken), []byte(r.Token)) != 1 {
		return nil, ErrBadToken
	}
	now := s.now().UTC()
	if cur.ReportedAt != nil {
		if wait := cur.ReportedAt.Add(interval).Sub(now); wait > 0 {
			return nil, &TooSoonError{Wait: wait}
		}
	}
	upd := expression.Set(expression.Name("reported_at"), expression.Value(now))
	if r.Progress != nil {
		p := *r.Progress
		p.Attempt, p.UpdatedAt = cur.Attempts, now
		av, err := MarshalProgress(p)
		if err != nil {
			return nil, fmt.Errorf("marshal progress of task %s: %w", id, err)
		}
		upd = upd.Set(expression.Name("progress"), expression.Value(av))
	}
	if r.Checkpoint != nil {
		upd = upd.Set(expression.Name("checkpoint"), expression.Value(&types.AttributeValueMemberB{Value: r.Checkpoint}))
	}
	cond := expression.Name("status").Equal(expression.Value(string(triagetype.Executing))).
		And(expression.Name("progress_token").Equal(expression.Value(r.Token)))
	if cur.ReportedAt == nil {
		cond = cond.And(expression.AttributeNotExists(expression.Name("reported_at")))
	} else {
		prev, err := attributevalue.Marshal(*cur.ReportedAt)
		if err != nil {
			return nil, fmt.Errorf("marshal reported_at of task %s: %w", id, err)
		}
		cond = cond.And(expression.Name("reported_at").Equal(expression.Value(prev)))
	}
	expr, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build()
	if err != nil {
		return nil, fmt.Errorf("build progress report of task %s: %w", id, err)
	}
	got, err := s.updateTask(ctx, id, expr)
	var ce *ConflictError
	if errors.As(err, &ce) {
		// Either the attempt ended, or another report won the race.
		if now := ce.Current; now != nil && now.Status == triagetype.Executing && now.ProgressToken == r.Token {
			return nil, &TooSoonError{Wait: interval}
		}
		return nil, ErrBadToken
	}
	return got, err
}
