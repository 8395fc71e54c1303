package dispatch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/internal/tracing"
	"github.com/triagehq/triage/triagetype"
)

// This file adopts direct sends: messages a producer sent straight to a
// queue with a type and payload, which get a task record on first receive.

// router says where a new task goes: "" to run, or the scope to set it
// aside in (*control.Controls.Route, the submit path's router).
type router interface {
	Route(ctx context.Context, t *task.Task) string
}

// adopt creates the task record of a message a producer sent straight to
// SQS, keyed by the message id so a redelivery finds the same task.
//
// A new task that may start here and now (a handler here, the controls
// admit it, nothing sets it aside) is recorded already claimed by this
// consumer: executing, attempt 1, under this consumer's lease. That one
// conditional put is the create and the claim at once, so a direct send
// costs one write less than a submitted task, and every guarantee holds
// as after a claim: a redelivery's put is refused and finds it executing
// under the lease (at most one run), a crash leaves the lease to expire
// and the task to be reclaimed with the attempt counted. got then holds
// the claimed task; otherwise t is the task as recorded (new, or found by
// a redelivery) for the ordinary claim.
func (c *Consumer) adopt(ctx context.Context, m queue.Received) (got claimed, t *task.Task, err error) {
	t, err = c.newAdopted(ctx, m)
	if err != nil {
		return claimed{}, nil, err
	}
	if t.Held == "" && t.Status == triagetype.Queued && t.BatchID == "" && t.WorkflowID == "" {
		got = c.claimAtCreate(ctx, t)
	}
	saved, created, err := c.store.Create(ctx, t)
	if err != nil {
		if got.release != nil {
			got.release()
		}
		return claimed{}, nil, err
	}
	if created {
		c.mx.Submitted(saved)
		c.log.Info("adopted direct send", "task_id", saved.ID, "message_id", m.MessageID, "type", saved.Type)
		if got.task != nil {
			got.started()
			c.mx.Started(saved, *saved.StartedAt, true)
			done, rel := c.keyUse.start(saved), got.release
			return claimed{task: saved, release: func() { rel(); done() }}, saved, nil
		}
		return claimed{}, saved, nil
	}
	if got.release != nil {
		got.release() // a redelivery: its task exists, claimed or not
	}
	return claimed{}, saved, nil
}

// claimAtCreate makes new task t, not yet recorded, claimed by this
// consumer when it may start here now: a handler here and the controls'
// admission (whose release got holds). Otherwise t is left queued and got
// empty, and the ordinary claim decides again on the recorded task.
func (c *Consumer) claimAtCreate(ctx context.Context, t *task.Task) (got claimed) {
	if _, err := c.handlers.Lookup(t.Type); err != nil {
		return claimed{}
	}
	release, started := func() {}, func() {}
	t.ProgressToken = task.NewProgressToken() // this attempt's alone; its slots name it
	if c.opt.Gate != nil {
		d, err := c.decide(ctx, t)
		if err != nil || d.Release == nil {
			t.ProgressToken = ""
			return claimed{}
		}
		release = c.chainReleases(ctx, d)
		if d.Started != nil {
			started = d.Started
		}
	}
	now := c.store.Now()
	until := c.lease().claimUntil(now, time.Duration(t.TimeoutSeconds)*time.Second)
	t.Status = triagetype.Executing
	t.Attempts = 1
	t.WorkerID = c.opt.WorkerID
	t.LeaseUntil, t.StartedAt = &until, &now
	return claimed{task: t, release: release, started: started}
}

// newAdopted is the task a direct send asks for, not yet recorded.
func (c *Consumer) newAdopted(ctx context.Context, m queue.Received) (*task.Task, error) {
	var r task.Request
	dec := json.NewDecoder(bytes.NewReader([]byte(m.Body)))
	dec.DisallowUnknownFields() // as strict as the API: a misspelt field is an error, not a default
	if err := dec.Decode(&r); err != nil {
		return nil, &task.FieldError{Field: "body", Message: err.Error()}
	}
	if r.Priority == "" {
		r.Priority = m.Priority
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	r.RunAt, r.DelaySeconds = nil, nil // the message is already here
	t := r.NewTask(c.store.Now(), 0)
	// The task's id is derived from the message, so a redelivery names the
	// same task and its create finds it: no idempotency item, and no
	// transaction (which would bill the two items twice), is needed. A
	// producer's own idempotency_key still works as on the API.
	t.ID = adoptedID(m)
	t.EffectivePriority = m.Priority
	t.DispatchVersion = 0
	// A producer's traceparent attribute puts the task in its trace: each
	// attempt's span is a child of the producer's span.
	if ctx := tracing.WithParent(context.Background(), m.Traceparent); tracing.TraceID(ctx) != "" {
		t.Traceparent = tracing.Traceparent(ctx)
		if r.TraceID == "" {
			t.TraceID = tracing.TraceID(ctx)
		}
	}
	if r, ok := c.opt.Gate.(router); ok {
		if scope := r.Route(ctx, t); scope != "" {
			// Past its key's fair window (counted per consumer process),
			// or paused: recorded set aside, as an API submit would be.
			// Its message then names a task with no live message and is
			// dropped as stale.
			t.Held, t.DispatchVersion = scope, task.NoMessage
		}
	}
	return t, nil
}

// adoptedID is the task id of a direct send: a ULID whose time is the
// message's send time and whose 80 random bits are the first bytes of a
// SHA-256 of its SQS MessageId (unique per message), so every receive of
// the message derives the same id.
func adoptedID(m queue.Received) string {
	at := m.SentAt
	if at.IsZero() {
		at = time.UnixMilli(0)
	}
	var id ulid.ULID
	if err := id.SetTime(ulid.Timestamp(at)); err != nil {
		_ = id.SetTime(0)
	}
	_ = id.SetEntropy(adoptedEntropy(m.MessageID))
	return id.String()
}

func adoptedEntropy(messageID string) []byte {
	sum := sha256.Sum256([]byte("sqs:" + messageID))
	return sum[:10]
}

// AdoptedIDSuffix is the part of a direct send's task id that comes from
// its SQS message id alone (the last 16 characters; the first 10 are its
// send time), so a checker that knows the message ids can find their tasks.
func AdoptedIDSuffix(messageID string) string {
	var id ulid.ULID
	_ = id.SetEntropy(adoptedEntropy(messageID))
	return id.String()[10:]
}
