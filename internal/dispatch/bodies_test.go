package dispatch_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/triagehq/triage/internal/app/consumerapp"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/triageconfig"
	"github.com/triagehq/triage/triagetype"
)

// A direct send whose payload is too large for the task's item is adopted
// with its payload in the bucket, and the handler gets it whole; so does a
// retry, and the large result it returns is kept in the bucket too.
func TestLargeDirectSendAdoptedAndRun(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	ctx := context.Background()
	payload := `{"blob":"` + strings.Repeat("d", 200<<10) + `"}`
	if _, err := env.SQS.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:    aws.String(a.Queues.URL(triagetype.Medium)),
		MessageBody: aws.String(`{"type":"big","max_attempts":2,"payload":` + payload + `}`),
	}); err != nil {
		t.Fatal(err)
	}
	var seen atomic.Value
	var whole atomic.Int32
	l := newLedger(func(ctx context.Context, r handler.Request) (json.RawMessage, error) {
		seen.Store(r.ID)
		if bytes.Equal(r.Payload, []byte(payload)) {
			whole.Add(1)
		}
		if r.Attempt == 1 {
			return nil, errors.New("the retry must read the payload again")
		}
		return r.Payload, nil
	})
	opt := stacktest.FastDispatch()
	opt.Backoff = map[triagetype.Priority]triageconfig.Backoff{triagetype.Medium: {Base: time.Second, Max: time.Second}}
	stacktest.Run(t, consumerapp.New(a, stacktest.Registry("big", l), opt, dispatch.Deps{}))
	waitEnds(t, l, 2, 30*time.Second)
	id, _ := seen.Load().(string)
	done := stacktest.WaitStatus(t, a.Store, id, triagetype.Completed, 10*time.Second)
	if whole.Load() != 2 {
		t.Fatalf("%d of 2 attempts got the whole payload", whole.Load())
	}
	if done.PayloadRef == "" || done.PayloadSize != len(payload) || done.ResultRef == "" || len(done.Payload) != 0 || len(done.Result) != 0 {
		t.Fatalf("record: payload_ref %q (%d bytes, %d inline), result_ref %q (%d inline)", done.PayloadRef, done.PayloadSize, len(done.Payload), done.ResultRef, len(done.Result))
	}
	if err := a.Store.LoadBodies(ctx, done); err != nil || string(done.Result) != payload {
		t.Fatalf("stored result: %d bytes, err %v", len(done.Result), err)
	}
	if item, err := a.Store.Item(done); err != nil || store.ItemSize(item) > 2048 {
		t.Fatalf("item of the completed task: %d bytes, err %v", store.ItemSize(item), err)
	}
}
