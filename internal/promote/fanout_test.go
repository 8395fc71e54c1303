package promote_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/promote"
	"github.com/triagehq/triage/internal/task"
)

// lambdaStandIn answers Lambda's Invoke REST call on loopback and records
// each invocation's type and function.
func lambdaStandIn(t *testing.T) (*lambda.Client, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var calls []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "POST" || !strings.HasPrefix(r.URL.Path, "/2015-03-31/functions/") || !strings.HasSuffix(r.URL.Path, "/invocations") {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		calls = append(calls, r.Header.Get("X-Amz-Invocation-Type")+" "+strings.TrimSuffix(strings.TrimPrefix(r.URL.EscapedPath(), "/2015-03-31/functions/"), "/invocations"))
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(srv.Close)
	c := lambda.NewFromConfig(aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")},
		func(o *lambda.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	return c, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), calls...) }
}

func TestFanOutStartsConsumersForTheBacklog(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	for range 25 {
		submitReq(t, a, task.Request{Type: "x", Priority: "low"}, time.Minute)
	}
	inv, calls := lambdaStandIn(t)
	const fn = "arn:aws:lambda:us-east-1:123456789012:function:triage-consumer"
	tests := []struct {
		per, most, want int
	}{
		{per: 10, most: 10, want: 2}, // 25 visible / 10
		{per: 5, most: 3, want: 3},   // capped
		{per: 100, most: 10, want: 0},
		{per: 5, most: 0, want: 0}, // fan-out off (TRIAGE_FANOUT_MAX=0)
	}
	for _, tt := range tests {
		before := len(calls())
		n, err := promote.FanOut{Invoker: inv, Depths: a.Queues, FunctionARN: fn, PerConsumer: tt.per, Max: tt.most}.Run(context.Background())
		if err != nil || n != tt.want {
			t.Fatalf("per %d max %d: started %d (%v), want %d", tt.per, tt.most, n, err, tt.want)
		}
		got := calls()[before:]
		if len(got) != tt.want {
			t.Fatalf("stand-in saw %d invocations, want %d", len(got), tt.want)
		}
		for _, c := range got {
			if !strings.HasPrefix(c, "Event ") || !strings.Contains(c, "triage-consumer") {
				t.Fatalf("invocation %q: want an async Event invoke of the consumer", c)
			}
		}
	}
	// No consumer function configured (local runs): nothing to start.
	if n, err := (promote.FanOut{Depths: a.Queues}).Run(context.Background()); n != 0 || err != nil {
		t.Fatalf("unconfigured fan-out: %d %v", n, err)
	}
}
