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

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/direct"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triageconfig"
	"github.com/triagehq/triage/triagetype"
)

func TestMain(m *testing.M) { stacktest.Main(m) }

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func receiveAll(t *testing.T, env *stacktest.Env, p triagetype.Priority) []string {
	t.Helper()
	out, err := env.SQS.ReceiveMessage(ctx(t), &sqs.ReceiveMessageInput{
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

// TestRecordAndMessage checks what a direct submit leaves behind: the
// record the API reads, and one message in the dispatcher's format on the
// task's queue.
func TestRecordAndMessage(t *testing.T) {
	env := stacktest.New(t)
	c := ctx(t)
	tr, err := direct.New(c, env.AWS, direct.Options{Config: &triageconfig.Config{Prefix: env.Prefix}})
	if err != nil {
		t.Fatal(err)
	}
	tk, created, err := triage.NewClient(tr).Submit(c, "echo", json.RawMessage(`{ "x": 1 }`), triage.WithPriority(triage.High), triage.WithIdempotencyKey("k"))
	if err != nil || !created {
		t.Fatalf("Submit = %v, %v, %v", tk, created, err)
	}
	rec, err := store.New(env.DynamoDB, env.Spec.Table.Name).Get(c, tk.ID)
	if err != nil {
		t.Fatalf("task not stored: %v", err)
	}
	if rec.Status != triagetype.Queued || rec.IdempotencyKey != "k" || rec.EffectivePriority != triagetype.High || string(rec.Payload) != `{"x":1}` {
		t.Fatalf("stored %+v", rec)
	}
	bodies := receiveAll(t, env, triagetype.High)
	var msg task.Message
	if len(bodies) != 1 || json.Unmarshal([]byte(bodies[0]), &msg) != nil || msg.ID != tk.ID || msg.Version != rec.DispatchVersion {
		t.Fatalf("high queue holds %v, want one message for %s at version %d", bodies, tk.ID, rec.DispatchVersion)
	}
}

// TestNew covers the ways New finds a deployment, and refuses one it
// cannot find.
func TestNew(t *testing.T) {
	env := stacktest.New(t)
	tests := []struct {
		name string
		cfg  *triageconfig.Config
		ok   bool
	}{
		{"by prefix", &triageconfig.Config{Prefix: env.Prefix}, true},
		{"prefix from the environment", envConfig(t, env.Getenv(nil)), true},
		{"explicit table and queue", &triageconfig.Config{Prefix: env.Prefix, Table: env.Spec.Table.Name, QueueURLs: map[triagetype.Priority]string{triagetype.High: env.QueueURLs[triagetype.High]}}, true},
		{"settings from the environment", envConfig(t, env.Getenv(map[string]string{triageconfig.EnvShards: "32", triageconfig.EnvTypes: "echo"})), true},
		{"a prefix with no queues", &triageconfig.Config{Prefix: env.Prefix + "-missing"}, false},
		{"a queue URL for an unknown priority", &triageconfig.Config{Prefix: env.Prefix, QueueURLs: map[triagetype.Priority]string{"urgent": "http://127.0.0.1:1/q"}}, false},
		{"a setting that breaks its rule", &triageconfig.Config{Prefix: env.Prefix, Shards: triageconfig.Off}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := direct.New(ctx(t), env.AWS, direct.Options{Config: tt.cfg})
			if !tt.ok {
				if err == nil {
					t.Fatal("New succeeded")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tk, _, err := triage.NewClient(tr).Submit(ctx(t), "echo", nil)
			if err != nil || tk.Status != triage.Queued {
				t.Fatalf("Submit = %+v, %v", tk, err)
			}
			if tt.name == "settings from the environment" {
				if _, _, err := triage.NewClient(tr).Submit(ctx(t), "other", nil); !strings.Contains(err.Error(), "TRIAGE_TYPES") {
					t.Fatalf("a type TRIAGE_TYPES leaves out: %v", err)
				}
			}
		})
	}
}

// TestTransportSubmitSendsOnlyWhatItRecords calls the transport itself,
// below the client's local checks, as another client of the Transport
// interface would: a request the API refuses is refused with the API's
// answer and sends nothing, a repeated idempotency key sends nothing, a
// task due beyond SQS's longest delay is recorded with no message, and a
// queue URL given explicitly is the one written to.
func TestTransportSubmitSendsOnlyWhatItRecords(t *testing.T) {
	env := stacktest.New(t)
	c := ctx(t)
	tr, err := direct.New(c, env.AWS, direct.Options{Config: &triageconfig.Config{Prefix: env.Prefix, QueueURLs: map[triagetype.Priority]string{triagetype.High: env.QueueURLs[triagetype.High]}}})
	if err != nil {
		t.Fatal(err)
	}
	refused := []struct {
		req   triage.SubmitRequest
		field string
		is    error
	}{
		{triage.SubmitRequest{Type: "echo", Priority: "urgent"}, "priority", triage.ErrBadRequest},
		{triage.SubmitRequest{Payload: json.RawMessage(`{}`)}, "type", triage.ErrBadRequest},
		{triage.SubmitRequest{Type: "echo", MaxAttempts: new(0)}, "max_attempts", triage.ErrBadRequest},
		{triage.SubmitRequest{Type: "echo", Payload: json.RawMessage(`"` + strings.Repeat("a", task.MaxPayloadBytes) + `"`)}, "payload", triage.ErrTooLarge},
	}
	for _, tt := range refused {
		_, _, err := tr.Submit(c, tt.req)
		var e *triage.Error
		if !errors.Is(err, tt.is) || !errors.As(err, &e) || e.Field != tt.field {
			t.Errorf("Submit(bad %s) = %v, want %v naming it", tt.field, err, tt.is)
		}
	}

	first, created, err := tr.Submit(c, triage.SubmitRequest{Type: "echo", Priority: "high", IdempotencyKey: "once"})
	if err != nil || !created {
		t.Fatalf("Submit = %+v, %v, %v", first, created, err)
	}
	again, created, err := tr.Submit(c, triage.SubmitRequest{Type: "echo", Priority: "low", IdempotencyKey: "once"})
	if err != nil || created || again.ID != first.ID {
		t.Fatalf("resubmit = %+v, %v, %v; want task %s, not created", again, created, err, first.ID)
	}
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	sched, _, err := tr.Submit(c, triage.SubmitRequest{Type: "echo", RunAt: &at})
	if err != nil || sched.Status != triage.Scheduled {
		t.Fatalf("scheduled submit = %+v, %v", sched, err)
	}

	want := map[triagetype.Priority]int{triagetype.High: 1} // the first submit's message, on the queue given
	for _, p := range triagetype.Priorities() {
		bodies := receiveAll(t, env, p)
		if len(bodies) != want[p] || (want[p] == 1 && !strings.Contains(bodies[0], first.ID)) {
			t.Errorf("%s queue holds %v, want %d message(s)", p, bodies, want[p])
		}
	}
}

// envConfig decodes the TRIAGE_* settings getenv returns, as a function
// deployed with the dispatcher's environment would.
func envConfig(t *testing.T, getenv func(string) string) *triageconfig.Config {
	t.Helper()
	cfg, err := triageconfig.Decode(getenv)
	if err != nil {
		t.Fatal(err)
	}
	return &cfg
}
