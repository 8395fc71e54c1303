package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/triagehq/triage/internal/api"
	"github.com/triagehq/triage/internal/blob"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// bigJSON is a JSON document of exactly n bytes.
func bigJSON(n int) string {
	return `{"blob":"` + strings.Repeat("x", n-11) + `"}`
}

// brief describes a response without its (large) bodies.
func brief(m map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		if k == "payload" || k == "result" {
			v = "(omitted)"
		}
		out[k] = v
	}
	return out
}

// A 300 KB payload and the 300 KB result echo makes of it round-trip
// through the API and a consumer, while the task's item stays small: both
// live in the bucket, each written once, and are removed with the task.
func TestLargePayloadAndResultRoundTrip(t *testing.T) {
	f := newFix2(t, nil, api.Options{})
	stacktest.RunCounters(t, f.app) // the stream consumer removes a deleted task's objects
	payload := bigJSON(300 << 10)
	code, sub := f.do(t, "POST", "/api/v1/tasks", "adm", `{"type":"echo","priority":"high","payload":`+payload+`}`)
	if code != 201 {
		t.Fatalf("submit = %d %v", code, brief(sub))
	}
	id := sub["id"].(string)
	if sub["payload_size"] != float64(len(payload)) {
		t.Fatalf("submit answer payload_size = %v, want %d", sub["payload_size"], len(payload))
	}
	f.consume(t)
	got := f.waitStatus(t, id, "completed")
	for _, field := range []string{"payload", "result"} {
		b, err := json.Marshal(got[field])
		if err != nil || string(b) != payload {
			t.Fatalf("GET %s: %d bytes, want the %d submitted (err %v)", field, len(b), len(payload), err)
		}
	}
	if got["result_size"] != float64(len(payload)) {
		t.Fatalf("result_size = %v", got["result_size"])
	}

	// The item keeps references only.
	item := rawItem(t, f, id)
	if n := store.ItemSize(item); n > 2048 {
		t.Fatalf("the completed task's item is %d bytes; the bodies should be off it", n)
	}
	for _, a := range []string{"payload", "result"} {
		if _, ok := item[a]; ok {
			t.Fatalf("the item still has %s", a)
		}
	}
	keys := objectKeys(t, f)
	if len(keys) != 2 || !keys[blob.PayloadKey(id)] {
		t.Fatalf("bucket holds %v, want the payload and one result", keys)
	}

	// A list page names the sizes and does not carry the bodies.
	_, page := f.do(t, "GET", "/api/v1/tasks?limit=5", "adm", "")
	row := page["tasks"].([]any)[0].(map[string]any)
	if row["id"] != id || row["payload"] != nil || row["result"] != nil || row["payload_size"] != float64(len(payload)) {
		t.Fatalf("list row = id %v payload %v result %v payload_size %v", row["id"], row["payload"] != nil, row["result"] != nil, row["payload_size"])
	}

	// Deleting the task removes its objects (through the table's stream).
	if code, _ := f.do(t, "DELETE", "/api/v1/tasks/"+id, "adm", ""); code != 204 {
		t.Fatalf("delete = %d", code)
	}
	deadline := time.Now().Add(20 * time.Second)
	for len(objectKeys(t, f)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("objects left after the task was deleted: %v", objectKeys(t, f))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Small bodies stay on the item, and the limits are the documented ones:
// a payload of MaxPayloadBytes is accepted, one byte more is a 413.
func TestPayloadLimits(t *testing.T) {
	f := newFix2(t, nil, api.Options{})
	small := submitID(t, f.fixture, `{"type":"echo","payload":`+bigJSON(store.InlineMax)+`}`)
	if item := rawItem(t, f, small); item["payload"] == nil || item["payload_ref"] != nil {
		t.Fatalf("a payload of InlineMax bytes left the item: %v", item["payload_ref"])
	}
	if len(objectKeys(t, f)) != 0 {
		t.Fatal("an inline payload was written to the bucket")
	}
	code, body := f.do(t, "POST", "/api/v1/tasks", "adm", `{"type":"echo","payload":`+bigJSON(task.MaxPayloadBytes)+`}`)
	if code != 201 {
		t.Fatalf("payload of MaxPayloadBytes = %d %v", code, brief(body))
	}
	code, body = f.do(t, "POST", "/api/v1/tasks", "adm", `{"type":"echo","payload":`+bigJSON(task.MaxPayloadBytes+1)+`}`)
	if e, _ := body["error"].(map[string]any); code != 413 || e["field"] != "payload" {
		t.Fatalf("payload over MaxPayloadBytes = %d %v", code, brief(body))
	}
}

// A submit whose record is never written (an idempotency key that names
// another task here) leaves no object behind.
func TestUnrecordedPayloadIsRemoved(t *testing.T) {
	f := newFix2(t, nil, api.Options{})
	body := `{"type":"echo","idempotency_key":"k1","payload":` + bigJSON(10<<10) + `}`
	first := submitID(t, f.fixture, body)
	st := f.app.Store
	// The enqueuer finds the key first; race the store directly, as a
	// concurrent submit would.
	tk := &task.Task{ID: task.NewID(time.Now()), Type: "echo", Priority: triagetype.Low, EffectivePriority: triagetype.Low, Status: triagetype.Queued,
		Payload: json.RawMessage(bigJSON(10 << 10)), IdempotencyKey: "k1", CreatedAt: time.Now().UTC(), MaxAttempts: 1, TimeoutSeconds: 1}
	saved, created, err := st.Create(context.Background(), tk)
	if err != nil || created || saved.ID != first {
		t.Fatalf("create with a used key = %v created %v err %v, want task %s", saved, created, err, first)
	}
	keys := objectKeys(t, f)
	if len(keys) != 1 || !keys[blob.PayloadKey(first)] {
		t.Fatalf("bucket holds %v, want only the first task's payload", keys)
	}
}

func rawItem(t *testing.T, f *fix2, id string) map[string]ddbtypes.AttributeValue {
	t.Helper()
	out, err := f.app.DynamoDB.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(f.app.Config.Table), ConsistentRead: aws.Bool(true),
		Key: map[string]ddbtypes.AttributeValue{spec.AttrPK: &ddbtypes.AttributeValueMemberS{Value: "TASK#" + id}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

func objectKeys(t *testing.T, f *fix2) map[string]bool {
	t.Helper()
	out, err := f.app.S3.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(f.app.Config.Bucket)})
	var nsb *s3types.NoSuchBucket
	if errors.As(err, &nsb) {
		t.Fatalf("no bucket %s", f.app.Config.Bucket)
	}
	if err != nil {
		t.Fatal(fmt.Errorf("list objects: %w", err))
	}
	keys := map[string]bool{}
	for _, o := range out.Contents {
		keys[aws.ToString(o.Key)] = true
	}
	return keys
}
