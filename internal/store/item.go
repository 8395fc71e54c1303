package store

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// The storage shapes of the API types a task's record and a control item
// hold. triagetype carries JSON names only; the names an item stores are
// these, and MarshalTask, UnmarshalTask, MarshalProgress and
// UnmarshalControls are the one way in and out of them.

// taskItem is a task as its record stores it: task.Task's own attributes,
// with the parts whose types are triagetype's (task.Task leaves them out
// of its dynamodbav names) in their storage shapes.
type taskItem struct {
	*task.Task
	Error      *storedError      `dynamodbav:"error,omitempty"`
	History    []storedAttempt   `dynamodbav:"history,omitempty"`
	Progress   *storedProgress   `dynamodbav:"progress,omitempty"`
	Promotions []storedPromotion `dynamodbav:"promotions,omitempty"`
	Suspend    *storedSuspend    `dynamodbav:"suspended,omitempty"`
}

// storedStep is a durable step as its own attribute of the task's item
// (task.StepAttr) stores it.
type storedStep struct {
	Seq        int             `dynamodbav:"seq"`
	Name       string          `dynamodbav:"name"`
	Kind       string          `dynamodbav:"kind"`
	Type       string          `dynamodbav:"type,omitempty"`
	Result     json.RawMessage `dynamodbav:"result,omitempty"`
	ResultRef  string          `dynamodbav:"ref,omitempty"`
	ResultSize int             `dynamodbav:"size"`
	Error      string          `dynamodbav:"error,omitempty"`
	Until      *time.Time      `dynamodbav:"until,omitempty"`
	Signal     string          `dynamodbav:"signal,omitempty"`
	TimedOut   bool            `dynamodbav:"timed_out,omitempty"`
	Attempt    int             `dynamodbav:"attempt"`
	At         time.Time       `dynamodbav:"at"`
	DurationMS int64           `dynamodbav:"ms"`
}

// storedSignal is a delivered signal as its attribute (task.SignalAttr)
// stores it.
type storedSignal struct {
	Name    string          `dynamodbav:"name"`
	Payload json.RawMessage `dynamodbav:"payload"`
	At      time.Time       `dynamodbav:"at"`
}

type storedSuspend struct {
	Kind   string    `dynamodbav:"kind"`
	Signal string    `dynamodbav:"signal,omitempty"`
	WakeAt time.Time `dynamodbav:"wake_at"`
}

type storedError struct {
	Message   string `dynamodbav:"message"`
	Retriable bool   `dynamodbav:"retriable"`
}

type storedAttempt struct {
	Attempt    int       `dynamodbav:"attempt"`
	WorkerID   string    `dynamodbav:"worker_id"`
	StartedAt  time.Time `dynamodbav:"started_at"`
	FinishedAt time.Time `dynamodbav:"finished_at"`
	Error      string    `dynamodbav:"error,omitempty"`
	Outcome    string    `dynamodbav:"outcome,omitempty"`
}

type storedProgress struct {
	Percent   int       `dynamodbav:"percent"`
	Message   string    `dynamodbav:"message,omitempty"`
	Attempt   int       `dynamodbav:"attempt"`
	UpdatedAt time.Time `dynamodbav:"updated_at"`
}

// storedPromotion is short, and At is in Unix seconds, so that a step adds
// about 35 bytes to the task's record.
type storedPromotion struct {
	From     triagetype.Priority `dynamodbav:"f"`
	To       triagetype.Priority `dynamodbav:"t"`
	At       time.Time           `dynamodbav:"at,unixtime"`
	WaitedMS int64               `dynamodbav:"w"`
}

// storedControls is a control item's settings (internal/control writes
// them attribute by attribute under these names).
type storedControls struct {
	Type               string     `dynamodbav:"type,omitempty"`
	Key                string     `dynamodbav:"key,omitempty"`
	Paused             bool       `dynamodbav:"paused"`
	RateLimitPerSecond float64    `dynamodbav:"rate_limit_per_second,omitempty"`
	MaxConcurrency     int        `dynamodbav:"max_concurrency,omitempty"`
	Held               bool       `dynamodbav:"held,omitempty"`
	HeldSince          *time.Time `dynamodbav:"held_since,omitempty"`
	WaitUntil          *time.Time `dynamodbav:"wait_until,omitempty"`
	Weight             int        `dynamodbav:"weight,omitempty"`
}

// MarshalTask encodes t's attributes as its record stores them (without
// the key and index attributes, which Store adds).
func MarshalTask(t *task.Task) (map[string]types.AttributeValue, error) {
	it := taskItem{Task: t}
	if t.Error != nil {
		it.Error = &storedError{Message: t.Error.Message, Retriable: t.Error.Retriable}
	}
	for _, a := range t.History {
		it.History = append(it.History, storedAttempt(a))
	}
	if t.Progress != nil {
		p := storedProgress(*t.Progress)
		it.Progress = &p
	}
	for _, p := range t.Promotions {
		it.Promotions = append(it.Promotions, storedPromotion(p))
	}
	if t.Suspend != nil {
		sp := storedSuspend(*t.Suspend)
		it.Suspend = &sp
	}
	return attributevalue.MarshalMap(it)
}

// UnmarshalTask decodes a task's record (an item, or a stream image of
// one).
func UnmarshalTask(av map[string]types.AttributeValue) (*task.Task, error) {
	t := &task.Task{}
	it := taskItem{Task: t}
	if err := attributevalue.UnmarshalMap(av, &it); err != nil {
		return nil, err
	}
	if it.Error != nil {
		t.Error = &triagetype.TaskError{Message: it.Error.Message, Retriable: it.Error.Retriable}
	}
	for _, a := range it.History {
		t.History = append(t.History, triagetype.Attempt(a))
	}
	if it.Progress != nil {
		p := triagetype.Progress(*it.Progress)
		t.Progress = &p
	}
	for _, p := range it.Promotions {
		t.Promotions = append(t.Promotions, triagetype.Promotion(p))
	}
	if it.Suspend != nil {
		sp := triagetype.Suspend(*it.Suspend)
		t.Suspend = &sp
	}
	return t, nil
}

// MarshalProgress encodes a progress report as a task's record stores it.
func MarshalProgress(p triagetype.Progress) (types.AttributeValue, error) {
	return attributevalue.Marshal(storedProgress(p))
}

// UnmarshalControls decodes a control item into s, leaving the fields the
// item does not hold as they are.
func UnmarshalControls(av map[string]types.AttributeValue, s *triagetype.ControlSettings) error {
	c := storedControls(*s)
	if err := attributevalue.UnmarshalMap(av, &c); err != nil {
		return fmt.Errorf("decode controls: %w", err)
	}
	*s = triagetype.ControlSettings(c)
	return nil
}
