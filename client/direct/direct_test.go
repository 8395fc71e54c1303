//lint:file-ignore SA1019 this deprecated wrapper builds on the deprecated client package on purpose

package direct_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/triagehq/triage/client"
	"github.com/triagehq/triage/client/direct"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
)

// TestMain starts the emulators once for this package's integration tests;
// the httptest unit tests beside them do not need them but share the binary.
func TestMain(m *testing.M) { stacktest.Main(m) }

func receiveAll(t *testing.T, env *stacktest.Env, p task.Priority) []string {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := env.SQS.ReceiveMessage(c, &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(env.QueueURLs[p]), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
	})
	if err != nil {
		t.Fatalf("receive from %s: %v", p, err)
	}
	var bodies []string
	for _, m := range out.Messages {
		bodies = append(bodies, aws.ToString(m.Body))
	}
	return bodies
}

func TestDirectSubmit(t *testing.T) {
	env := stacktest.New(t)
	c := ctx(t)
	d, err := direct.New(c, env.AWS, env.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	req := client.SubmitRequest{Type: "echo", Payload: json.RawMessage(`{ "x": 1 }`), Priority: "high", IdempotencyKey: "direct-1"}
	tk, created, err := d.Submit(c, req)
	if err != nil || !created {
		t.Fatalf("Submit = %v, created %v, %v", tk, created, err)
	}
	if tk.Status != "queued" || tk.Priority != "high" || tk.MaxAttempts != task.DefaultMaxAttempts || string(tk.Payload) != `{"x":1}` || tk.TraceID == "" {
		t.Fatalf("task = %+v", tk)
	}

	// The record is what the API would read.
	st := store.New(env.DynamoDB, env.Spec.Table.Name)
	rec, err := st.Get(c, tk.ID)
	if err != nil {
		t.Fatalf("task not stored: %v", err)
	}
	if rec.Status != task.Queued || rec.IdempotencyKey != "direct-1" || rec.EffectivePriority != task.High {
		t.Fatalf("stored %+v", rec)
	}

	// Its message is on the high queue, in the dispatcher's format.
	bodies := receiveAll(t, env, task.High)
	if len(bodies) != 1 {
		t.Fatalf("high queue holds %v, want one message", bodies)
	}
	var msg task.Message
	if err := json.Unmarshal([]byte(bodies[0]), &msg); err != nil || msg.ID != tk.ID || msg.Version != rec.DispatchVersion || msg.Priority != task.High {
		t.Fatalf("message %s (%v), want id %s v %d", bodies[0], err, tk.ID, rec.DispatchVersion)
	}

	// The same idempotency key returns the first task and sends nothing.
	again, created, err := d.Submit(c, client.SubmitRequest{Type: "echo", Priority: "low", IdempotencyKey: "direct-1"})
	if err != nil || created || again.ID != tk.ID {
		t.Fatalf("resubmit = %v, created %v, %v; want task %s, created false", again, created, err, tk.ID)
	}
	if b := receiveAll(t, env, task.Low); len(b) != 0 {
		t.Fatalf("resubmit sent %v", b)
	}
}

func TestDirectInvalid(t *testing.T) {
	env := stacktest.New(t)
	c := ctx(t)
	d, err := direct.New(c, env.AWS, env.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		req   client.SubmitRequest
		field string
		is    error
	}{
		{client.SubmitRequest{Type: "echo", Priority: "urgent"}, "priority", client.ErrBadRequest},
		{client.SubmitRequest{Payload: json.RawMessage(`{}`)}, "type", client.ErrBadRequest},
		{client.SubmitRequest{Type: "echo", MaxAttempts: intp(0)}, "max_attempts", client.ErrBadRequest},
		{client.SubmitRequest{Type: "echo", Payload: json.RawMessage(`"` + strings.Repeat("a", task.MaxPayloadBytes) + `"`)}, "payload", client.ErrTooLarge},
	}
	for _, tt := range tests {
		_, _, err := d.Submit(c, tt.req)
		var e *client.Error
		if !errors.Is(err, tt.is) || !errors.As(err, &e) || e.Field != tt.field || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("Submit(%s...) err = %v, want %v naming %s", tt.field, err, tt.is, tt.field)
		}
	}
	for _, p := range task.Priorities() {
		if b := receiveAll(t, env, p); len(b) != 0 {
			t.Errorf("invalid submits sent %v to %s", b, p)
		}
	}
}

// A task due later than SQS can delay starts scheduled, with no message,
// exactly as over the API.
func TestDirectScheduled(t *testing.T) {
	env := stacktest.New(t)
	c := ctx(t)
	d, err := direct.New(c, env.AWS, env.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	tk, created, err := d.Submit(c, client.SubmitRequest{Type: "echo", RunAt: &at})
	if err != nil || !created || tk.Status != "scheduled" || tk.RunAt == nil || !tk.RunAt.Equal(at) {
		t.Fatalf("Submit = %+v, %v, %v", tk, created, err)
	}
	if b := receiveAll(t, env, task.Medium); len(b) != 0 {
		t.Fatalf("scheduled task sent %v", b)
	}
}

func TestNewUnknownDeployment(t *testing.T) {
	env := stacktest.New(t)
	if _, err := direct.New(ctx(t), env.AWS, env.Prefix+"-missing"); err == nil {
		t.Fatal("New found queues for a prefix that has none")
	}
	if _, err := direct.New(ctx(t), env.AWS, env.Prefix, direct.WithQueueURL("urgent", "http://127.0.0.1:1/q")); err == nil {
		t.Fatal("New accepted a queue URL for an unknown priority")
	}
}

// Explicit names (a deployment's TRIAGE_TABLE and queue URLs) are used as
// given instead of being derived from the prefix.
func TestDirectExplicitNames(t *testing.T) {
	env := stacktest.New(t)
	c := ctx(t)
	d, err := direct.New(c, env.AWS, env.Prefix,
		direct.WithTable(env.Spec.Table.Name),
		direct.WithQueueURL("high", env.QueueURLs[task.High]))
	if err != nil {
		t.Fatal(err)
	}
	tk, created, err := d.Submit(c, client.SubmitRequest{Type: "echo", Priority: "high"})
	if err != nil || !created {
		t.Fatalf("Submit = %v, %v, %v", tk, created, err)
	}
	if b := receiveAll(t, env, task.High); len(b) != 1 || !strings.Contains(b[0], tk.ID) {
		t.Fatalf("high queue holds %v, want the message of %s", b, tk.ID)
	}
}

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func intp(n int) *int { return &n }
