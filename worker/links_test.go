package worker_test

import (
	"os/exec"
	"strings"
	"testing"
)

// maxMinimalDeps is the most packages the smallest worker program may
// link (issue 24: a lean worker). It was 562 with the OTLP exporter and
// the Prometheus client linked by default, 445 with the exporter opt-in
// (package otlp), 396 with the Prometheus client opt-in too (package
// workerprom).
const maxMinimalDeps = 400

// The smallest worker (testdata/minimal: one handler, Run) links at most
// maxMinimalDeps packages, and neither the Prometheus client nor an OTLP
// exporter: those come only with workerprom and otlp.
func TestMinimalWorkerLinks(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "./testdata/minimal").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	for _, d := range deps {
		if strings.HasPrefix(d, "github.com/prometheus/") || strings.Contains(d, "otlptrace") || strings.HasPrefix(d, "google.golang.org/") {
			t.Errorf("a minimal worker links %s", d)
		}
	}
	if len(deps) > maxMinimalDeps {
		t.Errorf("a minimal worker links %d packages; the bound is %d", len(deps), maxMinimalDeps)
	}
	t.Logf("a minimal worker links %d packages (bound %d)", len(deps), maxMinimalDeps)
}
