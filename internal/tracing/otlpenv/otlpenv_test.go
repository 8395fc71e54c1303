package otlpenv_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/triagehq/triage/internal/tracing"
	"github.com/triagehq/triage/internal/tracing/otlpenv"
)

// With OTEL_EXPORTER_OTLP_ENDPOINT set, spans are exported over OTLP/HTTP:
// a loopback receiver gets them on Flush.
func TestFromEnvExportsOverOTLP(t *testing.T) {
	got := make(chan *coltrace.ExportTraceServiceRequest, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req coltrace.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		got <- &req
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_SERVICE_NAME", "triage-test")

	p, err := otlpenv.FromEnv(context.Background(), "triage", func(k string) string { return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL}[k] })
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(context.Background())
	if !p.Exporting() {
		t.Fatal("OTEL_EXPORTER_OTLP_ENDPOINT set, but the provider does not export")
	}
	_, span := p.Tracer().Start(context.Background(), tracing.SpanSubmit)
	span.End()
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case req := <-got:
		var names []string
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					names = append(names, s.Name)
				}
			}
		}
		if len(names) != 1 || names[0] != tracing.SpanSubmit {
			t.Fatalf("exported spans %v, want [%s]", names, tracing.SpanSubmit)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nothing exported")
	}
	if off, _ := otlpenv.FromEnv(context.Background(), "triage", func(string) string { return "" }); off.Exporting() {
		t.Error("no OTEL_* endpoint, yet the provider exports")
	}
}
