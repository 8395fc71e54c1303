package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/triagehq/triage/internal/blob"
	"github.com/triagehq/triage/internal/execution"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/internal/tracing"
	"github.com/triagehq/triage/triagetype"
)

// This file is the run phase: a claimed task's handler under its
// timeout, with a heartbeat, then the outcome.

// execute runs a claimed task's handler under its timeout, with a heartbeat,
// then records the outcome.
func (c *Consumer) execute(ctx context.Context, j *job) {
	t := j.snapshot()
	started := c.store.Now()
	timeout := time.Duration(t.TimeoutSeconds) * time.Second
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	runCtx, cancelTimeout := execution.WithTimeout(runCtx, t.TimeoutSeconds)
	defer cancelTimeout()

	j.rep = newReporter(t.Attempts, c.store.Now)
	hbDone := make(chan struct{})
	hbStop := make(chan struct{})
	go func() { defer close(hbDone); c.heartbeat(ctx, j, started.Add(timeout), cancel, hbStop) }()

	var result json.RawMessage
	stage := stageLookup
	h, err := c.lookup(t.Type)
	var payload json.RawMessage
	if err == nil {
		// A payload kept in the blob store is read for each attempt. One that
		// is gone can never be run; a failed read is retried like any failure.
		stage = stagePayload
		if payload, err = c.store.Payload(runCtx, t); errors.Is(err, blob.ErrNotFound) {
			err = handler.Permanent(err)
		}
	}
	var parents []triagetype.Parent
	if pr, ok := c.store.(ParentReader); ok && err == nil && len(t.After) > 0 {
		parents, err = pr.Parents(runCtx, t) // a failed read is retried like any failure
	}
	spanCtx, span := c.startAttempt(runCtx, t)
	if err == nil {
		stage = stageHandle
		ranFrom := time.Now()
		r := execution.Request(t, payload)
		r.Traceparent, r.ProgressURL, r.Reporter = tracing.Traceparent(spanCtx), c.progressURL(t.ID), j.rep
		r.Parents = parents
		r.Durable = c.durableState(t)
		r.Durable.Observe(c.observeSteps(t, span))
		result, err = c.safeHandle(spanCtx, h, r)
		c.mx.Ran(t, time.Since(ranFrom))
	}
	close(hbStop)
	<-hbDone

	cause := context.Cause(runCtx)
	if errors.Is(cause, errLeaseLost) {
		endAttempt(span, t, errLeaseLost)
	} else {
		endAttempt(span, t, err)
	}
	if errors.Is(cause, errLeaseLost) {
		c.log.Warn("lease lost while running; outcome discarded", "task_id", t.ID, "worker_id", c.opt.WorkerID)
		return
	}
	attempt := triagetype.Attempt{Attempt: t.Attempts, WorkerID: c.opt.WorkerID, StartedAt: attemptStart(t, started), FinishedAt: c.store.Now()}
	wctx := context.WithoutCancel(ctx)
	if err == nil {
		stage = stageResult // the one error left is a result that cannot be stored
	}
	o := execution.Decide(runCtx, result, err, t.Attempts, t.MaxAttempts)
	if o.Kind != execution.Complete {
		// A result that arrived wins over a cancel request or shutdown.
		switch {
		case errors.Is(cause, errCancelRequested):
			attempt.Error, attempt.Outcome = "cancelled on request", triagetype.AttemptCancelled
			c.finishCancelled(wctx, j, attempt, nil)
			return
		case errors.Is(cause, errShutdown):
			attempt.Error, attempt.Outcome = "interrupted: consumer shut down", triagetype.AttemptInterrupted
			c.handBack(wctx, j, attempt)
			return
		}
	}
	c.finish(wctx, j, attempt, o, stage)
}

// safeHandle runs h through execution.Run, which turns a panic into a
// permanent error so one bad handler cannot crash the consumer, and logs
// the panic.
func (c *Consumer) safeHandle(ctx context.Context, h handler.Handler, r handler.Request) (json.RawMessage, error) {
	res, err := execution.Run(ctx, h, r)
	if p := (*execution.Panic)(nil); errors.As(err, &p) {
		c.log.Error("handler panicked", "task_id", r.ID, "type", r.Type, "panic", fmt.Sprint(p.Value))
	}
	return res, err
}

// progressURL is the API endpoint an external handler reports task id's
// progress to, or "" when the consumer does not know the API's address.
func (c *Consumer) progressURL(id string) string {
	if c.opt.APIURL == "" {
		return ""
	}
	return strings.TrimSuffix(c.opt.APIURL, "/") + "/api/v1/tasks/" + id + "/progress"
}

// ParentReader reads a waiting task's parents for its handler
// (*store.Store); a Store without it gives handlers no parents.
type ParentReader interface {
	Parents(ctx context.Context, t *task.Task) ([]triagetype.Parent, error)
}
