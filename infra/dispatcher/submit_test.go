package dispatcher_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/direct"
	"github.com/triagehq/triage/triageconfig"
	"github.com/triagehq/triage/triagetype"
)

// awsCall is one request a producer made, as IAM authorizes it: the action
// and what it acts on ("table", "queue high", "dlq low", "object t/...").
type awsCall struct{ action, resource string }

// awsRecorder answers DynamoDB, SQS and S3 requests as the services would
// for a fresh deployment (nothing stored, every write accepted) and records
// each as the IAM actions it needs.
type awsRecorder struct {
	table  string
	queues map[string]string // queue URL -> "queue <priority>" or "dlq <priority>"
	mu     sync.Mutex
	calls  []awsCall
}

func (r *awsRecorder) record(action, resource string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, awsCall{action, resource})
}

func (r *awsRecorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	target := req.Header.Get("X-Amz-Target")
	service, op, _ := strings.Cut(target, ".")
	var in map[string]any
	_ = json.Unmarshal(body, &in)
	reply := func(v any) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_ = json.NewEncoder(w).Encode(v)
	}
	fail := func(format string, args ...any) {
		r.record("unknown", fmt.Sprintf(format, args...))
		http.Error(w, "unexpected request", http.StatusBadRequest)
	}
	switch {
	case strings.HasPrefix(service, "DynamoDB_"):
		table := func(name any) string {
			if name == r.table {
				return "table"
			}
			return fmt.Sprintf("table %v", name)
		}
		if op == "TransactWriteItems" {
			// IAM authorizes each item of a transaction as its own action.
			items, _ := in["TransactItems"].([]any)
			for _, it := range items {
				for kind, v := range it.(map[string]any) {
					action := map[string]string{"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem"}[kind]
					r.record("dynamodb:"+action, table(v.(map[string]any)["TableName"]))
				}
			}
			reply(map[string]any{})
			return
		}
		r.record("dynamodb:"+op, table(in["TableName"]))
		reply(map[string]any{}) // no item: nothing stored yet
	case service == "AmazonSQS":
		queue := func(url any) string {
			if q, ok := r.queues[fmt.Sprint(url)]; ok {
				return q
			}
			return fmt.Sprintf("queue %v", url)
		}
		switch op {
		case "GetQueueUrl":
			name := fmt.Sprint(in["QueueName"])
			url := "https://sqs.test/123456789012/" + name
			r.record("sqs:GetQueueUrl", queue(url))
			reply(map[string]any{"QueueUrl": url})
		case "SendMessage", "SendMessageBatch":
			r.record("sqs:SendMessage", queue(in["QueueUrl"]))
			if op == "SendMessage" {
				reply(map[string]any{"MessageId": "m", "MD5OfMessageBody": md5hex(in["MessageBody"])})
				return
			}
			var ok []map[string]any
			entries, _ := in["Entries"].([]any)
			for i, e := range entries {
				e := e.(map[string]any)
				ok = append(ok, map[string]any{"Id": e["Id"], "MessageId": fmt.Sprint("m", i), "MD5OfMessageBody": md5hex(e["MessageBody"])})
			}
			reply(map[string]any{"Successful": ok, "Failed": []any{}})
		case "GetQueueAttributes":
			r.record("sqs:GetQueueAttributes", queue(in["QueueUrl"]))
			reply(map[string]any{"Attributes": map[string]string{}})
		default:
			fail("sqs:%s", op)
		}
	case target == "": // S3, addressed by path: /<bucket>/<key>
		_, key, _ := strings.Cut(strings.TrimPrefix(req.URL.Path, "/"), "/")
		switch {
		case req.Method == http.MethodPut:
			r.record("s3:PutObject", "object "+key)
			w.Header().Set("ETag", `"x"`)
		case req.Method == http.MethodPost && req.URL.Query().Has("delete"):
			// DeleteObjects is authorized as DeleteObject on each key.
			for _, m := range regexp.MustCompile(`<Key>([^<]*)</Key>`).FindAllStringSubmatch(string(body), -1) {
				r.record("s3:DeleteObject", "object "+m[1])
			}
			_, _ = io.WriteString(w, `<DeleteResult></DeleteResult>`)
		default:
			fail("s3 %s %s", req.Method, req.URL)
		}
	default:
		fail("%s", target)
	}
}

func md5hex(v any) string {
	sum := md5.Sum([]byte(fmt.Sprint(v)))
	return hex.EncodeToString(sum[:])
}

// TestGrantSubmitDirectCoversSubmit runs the Go direct transport's submits —
// without and with an idempotency key, a small and a 200 KB payload —
// against a recorder of AWS requests, and checks that GrantSubmitDirect
// allows every request made, on the resource it was made on. The grant is
// least privilege by its own test (TestGrants); this one keeps it from
// being less than a submit needs when the submit path changes.
func TestGrantSubmitDirectCoversSubmit(t *testing.T) {
	f, g := libraryStack(t)
	granted := grantPairs(t, f.roleStatements(t, g.submitDirect))
	// What each recorded resource is in the template.
	resources := map[string]any{"table": getAtt(f.id(f.d.Table), "Arn")}
	rec := &awsRecorder{table: "tasks-under-test", queues: map[string]string{}}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	dcfg := &triageconfig.Config{Prefix: "acme", Table: rec.table, QueueURLs: map[triagetype.Priority]string{}}
	for _, q := range f.d.Queues {
		url := "https://sqs.test/123456789012/" + q.Spec.Name
		rec.queues[url] = "queue " + q.Priority
		rec.queues["https://sqs.test/123456789012/"+q.Spec.DLQName] = "dlq " + q.Priority
		resources["queue "+q.Priority] = getAtt(f.id(q.Queue), "Arn")
		resources["dlq "+q.Priority] = getAtt(f.id(q.DLQ), "Arn")
		dcfg.QueueURLs[triagetype.Priority(q.Priority)] = url
	}

	ctx := context.Background()
	cfg := aws.Config{
		Region:       "eu-west-1",
		BaseEndpoint: aws.String(srv.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
	}
	tr, err := direct.New(ctx, cfg, direct.Options{Config: dcfg})
	if err != nil {
		t.Fatal(err)
	}
	big := `{"blob":"` + strings.Repeat("x", 200<<10) + `"}`
	for _, r := range []triage.SubmitRequest{
		{Type: "resize", Payload: json.RawMessage(`{"w":1}`)},
		{Type: "resize", Payload: json.RawMessage(`{"w":2}`), Priority: "high", IdempotencyKey: "k-1"},
		{Type: "resize", Payload: json.RawMessage(big), Priority: "low"},
	} {
		if _, _, err := tr.Submit(ctx, r); err != nil {
			t.Fatalf("submit %s %s: %v", r.Priority, r.IdempotencyKey, err)
		}
	}

	seen := map[string]bool{}
	for _, c := range rec.calls {
		seen[c.action] = true
		var res any
		switch {
		case strings.HasPrefix(c.resource, "object t/"):
			res = map[string]any{"Fn::Join": []any{"", []any{getAtt(f.id(f.d.Bucket), "Arn"), "/t/*"}}}
		default:
			res = resources[c.resource]
		}
		if res == nil || !granted[pairKey(t, c.action, res)] {
			t.Errorf("a direct submit calls %s on %s, which GrantSubmitDirect does not allow", c.action, c.resource)
		}
	}
	for _, a := range []string{"sqs:SendMessage", "dynamodb:PutItem", "dynamodb:GetItem"} {
		if !seen[a] {
			t.Errorf("no %s recorded: the recorder saw %v", a, rec.calls)
		}
	}
	t.Logf("calls: %v", rec.calls)
}
