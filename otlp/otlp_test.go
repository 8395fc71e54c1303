package otlp_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/triagehq/triage/otlp"
)

// Install with an endpoint makes the global provider export there: a span
// started from otel's global tracer (as triage's worker does) reaches a
// loopback OTLP receiver when shutdown flushes it. Without an endpoint it
// installs nothing.
func TestInstallExportsTheGlobalProvidersSpans(t *testing.T) {
	got := make(chan int, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/v1/traces" {
			got <- len(body)
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()

	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	before := otel.GetTracerProvider()
	shutdown, err := otlp.Install(context.Background(), "test")
	if err != nil {
		t.Fatal(err)
	}
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if otel.GetTracerProvider() != before {
		t.Fatal("no endpoint set, yet Install changed the global provider")
	}

	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	shutdown, err = otlp.Install(context.Background(), "test")
	if err != nil {
		t.Fatal(err)
	}
	_, span := otel.Tracer("worker").Start(context.Background(), "triage.attempt")
	span.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-got:
		if n == 0 {
			t.Fatal("empty export")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nothing exported to the OTLP endpoint")
	}
}

// A worker that does not import this package links no OTLP exporter (nor
// protobuf through it): the point of keeping the exporter here.
func TestWorkerLinksNoExporter(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/triagehq/triage/worker").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	for _, d := range deps {
		if strings.Contains(d, "otlptrace") || strings.HasPrefix(d, "google.golang.org/grpc") {
			t.Errorf("package worker links %s", d)
		}
	}
	t.Logf("package worker links %d packages", len(deps))
}
