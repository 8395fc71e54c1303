package tracing_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/triagehq/triage"
	"github.com/triagehq/triage/internal/api"
	"github.com/triagehq/triage/internal/app/apiapp"
	"github.com/triagehq/triage/internal/app/consumerapp"
	"github.com/triagehq/triage/internal/app/promoterapp"
	"github.com/triagehq/triage/internal/auth"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/handler/webhook"
	"github.com/triagehq/triage/internal/promote"
	"github.com/triagehq/triage/internal/submit"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/internal/tracing"
	"github.com/triagehq/triage/triageconfig"
	"github.com/triagehq/triage/triagetype"
)

func TestMain(m *testing.M) { stacktest.Main(m) }

const (
	callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan  = "00f067aa0ba902b7"
)

// One task, one trace: a submit over HTTP under the caller's traceparent,
// a first attempt whose webhook fails, a retry that succeeds. The spans
// are submit (child of the caller's span) -> two attempts (children of the
// submit span), and each webhook request carries its attempt's context.
func TestTaskIsOneTraceAcrossSubmitRetryAndWebhook(t *testing.T) {
	var mu sync.Mutex
	var hooks []string // traceparent headers the webhook received
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hooks = append(hooks, r.Header.Get("traceparent"))
		n := len(hooks)
		mu.Unlock()
		if n == 1 {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer srv.Close()

	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	env := stacktest.New(t)
	a := env.App(t, nil)
	a.Tracing = tracing.New(tp)

	toks, _ := auth.Parse("")
	toks.Add("trace-token", auth.Admin)
	api := httptest.NewServer(apiapp.Handler(a, toks, api.Options{}))
	defer api.Close()
	reg := handler.NewRegistry()
	if err := reg.Register("hook", webhook.New(srv.URL, []byte("secret"))); err != nil {
		t.Fatal(err)
	}
	opt := dispatch.Options{PollWait: time.Second, Lease: 5 * time.Second, LeaseMargin: time.Second,
		Backoff: map[triagetype.Priority]triageconfig.Backoff{triagetype.High: {Base: time.Second, Max: time.Second}}}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { _ = consumerapp.New(a, reg, opt, dispatch.Deps{}).Run(ctx); close(stopped) }()
	defer func() { cancel(); <-stopped }()

	c := triage.NewClient(triage.HTTP(api.URL, "trace-token"))
	sctx := triage.ContextWithTraceparent(context.Background(), "00-"+callerTrace+"-"+callerSpan+"-01")
	tk, _, err := c.Submit(sctx, "hook", map[string]int{"n": 1}, triage.WithPriority(triage.High))
	if err != nil {
		t.Fatal(err)
	}
	if tk.TraceID != callerTrace {
		t.Errorf("task trace_id %q, want the caller's trace %s", tk.TraceID, callerTrace)
	}
	done := stacktest.WaitStatus(t, a.Store, tk.ID, triagetype.Completed, 30*time.Second)
	if done.Attempts != 2 {
		t.Fatalf("%d attempts, want 2 (a failure, then success)", done.Attempts)
	}

	var submitSpan trace.SpanID
	var attempts []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.SpanContext.TraceID().String() != callerTrace {
			t.Errorf("span %s in trace %s, want every span in the caller's %s", s.Name, s.SpanContext.TraceID(), callerTrace)
		}
		switch s.Name {
		case tracing.SpanSubmit:
			submitSpan = s.SpanContext.SpanID()
			if s.Parent.SpanID().String() != callerSpan {
				t.Errorf("submit span's parent %s, want the caller's span %s", s.Parent.SpanID(), callerSpan)
			}
		case tracing.SpanAttempt:
			attempts = append(attempts, s)
		}
	}
	if !submitSpan.IsValid() || len(attempts) != 2 {
		t.Fatalf("submit span %v, %d attempt spans; want one and two", submitSpan, len(attempts))
	}
	outcomes := map[string]bool{}
	for _, s := range attempts {
		if s.Parent.SpanID() != submitSpan {
			t.Errorf("attempt span's parent %s, want the submit span %s", s.Parent.SpanID(), submitSpan)
		}
		for _, kv := range s.Attributes {
			if kv.Key == tracing.AttrOutcome {
				outcomes[kv.Value.AsString()] = true
			}
		}
	}
	if !outcomes["retrying"] || !outcomes["completed"] {
		t.Errorf("attempt outcomes %v, want retrying and completed", outcomes)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(hooks) != 2 {
		t.Fatalf("webhook called %d times, want 2", len(hooks))
	}
	for i, h := range hooks {
		parts := strings.Split(h, "-")
		if len(parts) != 4 || parts[1] != callerTrace {
			t.Errorf("webhook call %d traceparent %q, want one in trace %s", i+1, h, callerTrace)
			continue
		}
		found := false
		for _, s := range attempts {
			found = found || s.SpanContext.SpanID().String() == parts[2]
		}
		if !found {
			t.Errorf("webhook call %d traceparent %q names no attempt span", i+1, h)
		}
	}
}

// A direct send (a raw SQS message) joins its producer's trace through
// its traceparent message attribute.
func TestDirectSendJoinsTheProducersTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	env := stacktest.New(t)
	a := env.App(t, nil)
	a.Tracing = tracing.New(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)))
	reg := handler.NewRegistry()
	ran := make(chan handler.Request, 1)
	_ = reg.Register("direct", handler.Func(func(_ context.Context, r handler.Request) (json.RawMessage, error) {
		ran <- r
		return nil, nil
	}))
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		_ = consumerapp.New(a, reg, dispatch.Options{PollWait: time.Second}, dispatch.Deps{}).Run(ctx)
		close(stopped)
	}()
	defer func() { cancel(); <-stopped }()

	_, err := a.SQS.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:    aws.String(env.QueueURLs[triagetype.Medium]),
		MessageBody: aws.String(`{"type":"direct","payload":{}}`),
		MessageAttributes: map[string]sqstypes.MessageAttributeValue{
			"traceparent": {DataType: aws.String("String"), StringValue: aws.String("00-" + callerTrace + "-" + callerSpan + "-01")},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var r handler.Request
	select {
	case r = <-ran:
	case <-time.After(30 * time.Second):
		t.Fatal("the direct send never ran")
	}
	if r.TraceID != callerTrace || !strings.HasPrefix(r.Traceparent, "00-"+callerTrace+"-") {
		t.Errorf("handler got trace_id %q traceparent %q, want the producer's trace %s", r.TraceID, r.Traceparent, callerTrace)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(exp.GetSpans()) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	spans := exp.GetSpans()
	if len(spans) != 1 || spans[0].Name != tracing.SpanAttempt || spans[0].Parent.SpanID().String() != callerSpan {
		t.Fatalf("spans %+v, want one attempt span under the producer's span %s", spans, callerSpan)
	}
}

// A promotion is a span in its task's trace, a child of the submit span.
func TestPromotionIsASpanOfTheTasksTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	env := stacktest.New(t)
	a := env.App(t, nil)
	a.Tracing = tracing.New(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)))
	s := submit.New(a.Enqueuer, submit.Options{Tracing: a.Tracing, Now: a.Store.Now})
	o := s.Submit(context.Background(), task.Request{Type: "slow", Priority: "low"})
	if o.Err != nil {
		t.Fatal(o.Err)
	}
	time.Sleep(1100 * time.Millisecond)
	p := promoterapp.New(a, promote.Options{LowAfter: time.Second, MediumAfter: time.Hour})
	if r, err := p.RunOnce(context.Background()); err != nil || r.Promoted[triagetype.Medium] != 1 {
		t.Fatalf("promoter run: %+v, %v; want the task promoted to medium", r, err)
	}
	var submitSpan, promoteParent trace.SpanID
	var to string
	for _, sp := range exp.GetSpans() {
		switch sp.Name {
		case tracing.SpanSubmit:
			submitSpan = sp.SpanContext.SpanID()
		case tracing.SpanPromote:
			promoteParent = sp.Parent.SpanID()
			for _, kv := range sp.Attributes {
				if kv.Key == "triage.promote.to" {
					to = kv.Value.AsString()
				}
			}
		}
	}
	if !submitSpan.IsValid() || promoteParent != submitSpan || to != "medium" {
		t.Fatalf("submit span %s, promote span's parent %s, to %q; want a promotion to medium under the submit span", submitSpan, promoteParent, to)
	}
}
