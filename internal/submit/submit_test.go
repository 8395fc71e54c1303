package submit_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/enqueue"
	"github.com/triagehq/triage/internal/fault"
	"github.com/triagehq/triage/internal/submit"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// enqueuer answers each task with the error its type names, and records
// what it was given.
type enqueuer struct{ got []*task.Task }

func (e *enqueuer) SubmitBatch(_ context.Context, ts []*task.Task) []enqueue.Result {
	e.got = append(e.got, ts...)
	out := make([]enqueue.Result, len(ts))
	for i, t := range ts {
		switch t.Type {
		case "unsent":
			out[i].Err = fmt.Errorf("%w: queue down", enqueue.ErrNotSent)
		case "unrecorded":
			out[i].Err = fmt.Errorf("%w: table down", enqueue.ErrNotRecorded)
		case "broken":
			out[i].Err = errors.New("disk on fire")
		case "old":
			out[i].Task = t
		default:
			out[i].Task, out[i].Created = t, true
		}
	}
	return out
}

// full refuses every high task.
type full struct{}

func (full) Check(_ context.Context, p triagetype.Priority) error {
	if p == triagetype.High {
		return &enqueue.OverloadedError{Priority: p, RetryAfter: 5 * time.Second}
	}
	return nil
}

func TestEveryStepDecidesInOrder(t *testing.T) {
	enq := &enqueuer{}
	s := submit.New(enq, submit.Options{Pressure: full{}, Known: task.NewKnownTypes([]string{"ok", "old", "unsent", "unrecorded", "broken"})})
	tests := []struct {
		req              task.Request
		status           int
		code, field, msg string
	}{
		{task.Request{Type: "ok"}, http.StatusCreated, "", "", ""},
		{task.Request{Type: "old"}, http.StatusOK, "", "", ""},
		{task.Request{Type: ""}, http.StatusBadRequest, triagetype.CodeInvalidField, "type", ""},
		{task.Request{Type: "ok", Priority: "urgent"}, http.StatusBadRequest, triagetype.CodeInvalidField, "priority", ""},
		{task.Request{Type: "ok", Payload: []byte(`"` + strings.Repeat("x", task.MaxPayloadBytes) + `"`)}, http.StatusRequestEntityTooLarge, "too_large", "payload", ""},
		{task.Request{Type: "other"}, http.StatusBadRequest, triagetype.CodeInvalidField, "type", "TRIAGE_TYPES"},
		// An unknown type is refused before the depth is read.
		{task.Request{Type: "other", Priority: "high"}, http.StatusBadRequest, triagetype.CodeInvalidField, "type", ""},
		{task.Request{Type: "ok", Priority: "high"}, http.StatusTooManyRequests, "too_many_requests", "", "retry after 5 s"},
		{task.Request{Type: "unsent"}, http.StatusServiceUnavailable, "unavailable", "", "nothing was recorded"},
		{task.Request{Type: "unrecorded"}, http.StatusServiceUnavailable, "unavailable", "", "not accepted"},
		{task.Request{Type: "broken"}, http.StatusInternalServerError, "internal", "", "submit failed"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%s", tt.req.Type, tt.req.Priority), func(t *testing.T) {
			o := s.Submit(context.Background(), tt.req)
			if got := o.Status(); got != tt.status {
				t.Fatalf("status %d (%+v), want %d", got, o.Err, tt.status)
			}
			if tt.code == "" {
				if o.Task == nil || o.Task.Type != tt.req.Type {
					t.Fatalf("task %+v, want one of type %q", o.Task, tt.req.Type)
				}
				return
			}
			if o.Err == nil || o.Err.Code != tt.code || o.Err.Field != tt.field || !strings.Contains(o.Err.Message, tt.msg) {
				t.Fatalf("refusal %+v, want code %q field %q message with %q", o.Err, tt.code, tt.field, tt.msg)
			}
			if tt.status == http.StatusInternalServerError && (o.Err.Cause == nil || strings.Contains(o.Err.Message, "fire")) {
				t.Fatalf("500 %+v: want the cause kept beside a message that does not show it", o.Err)
			}
		})
	}
}

func TestBatchNamesItemsAndSendsOnlyTheAccepted(t *testing.T) {
	enq := &enqueuer{}
	s := submit.New(enq, submit.Options{})
	outs, e := s.SubmitBatch(context.Background(), []task.Request{{Type: "a"}, {Type: "b", MaxAttempts: new(-1)}, {Type: "c"}})
	if e != nil {
		t.Fatal(e)
	}
	if outs[0].Status() != 201 || outs[2].Status() != 201 || outs[1].Status() != 400 || outs[1].Err.Field != "tasks[1].max_attempts" {
		t.Fatalf("outcomes %+v %+v %+v", outs[0], outs[1].Err, outs[2])
	}
	if len(enq.got) != 2 || enq.got[0].Type != "a" || enq.got[1].Type != "c" {
		t.Fatalf("enqueued %d tasks, want a and c", len(enq.got))
	}
	for _, n := range []int{0, 101} {
		if _, e := s.SubmitBatch(context.Background(), make([]task.Request, n)); e == nil || fault.Status(e.Kind) != 400 || e.Field != "tasks" {
			t.Errorf("batch of %d: %+v, want 400 naming tasks", n, e)
		}
	}
}
