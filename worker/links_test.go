package worker_test

import (
	"os/exec"
	"strings"
	"testing"
)

// maxMinimalDeps is the most packages the smallest worker program may link
// (issue 24: a lean worker, `go list -deps` ≤ 400). It was 562 with the
// OTLP exporter and the Prometheus client linked by default, 445 with the
// exporter opt-in (package otlp), 396 with the Prometheus client opt-in too
// (package workerprom), and 398 with dependencies, batches and keys (the
// schedules' store and cron parser are not linked: a worker never ticks),
// and still 398 without the demo handlers (the worker builds on
// internal/app/consumer, one package, instead of consumerapp, which adds
// them).
const maxMinimalDeps = 400

// maxOutsideDeps bounds the part of those from outside this module (the
// standard library and third parties): 370 of the 398.
const maxOutsideDeps = 380

// module is this module's path.
const module = "github.com/triagehq/triage"

// The smallest worker (testdata/minimal: one handler, Run) links at most
// maxMinimalDeps packages, maxOutsideDeps of them from outside the module,
// and neither the Prometheus client nor an OTLP exporter (those come only
// with workerprom and otlp) nor the demo handlers (`triage dev`'s).
func TestMinimalWorkerLinks(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "./testdata/minimal").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	for _, d := range deps {
		if strings.HasPrefix(d, "github.com/prometheus/") || strings.Contains(d, "otlptrace") || strings.HasPrefix(d, "google.golang.org/") || d == module+"/internal/handler/demo" {
			t.Errorf("a minimal worker links %s", d)
		}
	}
	outside := 0
	for _, d := range deps {
		if d != module && !strings.HasPrefix(d, module+"/") {
			outside++
		}
	}
	if len(deps) > maxMinimalDeps {
		t.Errorf("a minimal worker links %d packages; the bound is %d", len(deps), maxMinimalDeps)
	}
	if outside > maxOutsideDeps {
		t.Errorf("a minimal worker links %d packages from outside the module; the bound is %d", outside, maxOutsideDeps)
	}
	t.Logf("a minimal worker links %d packages (bound %d), %d from outside the module (bound %d)", len(deps), maxMinimalDeps, outside, maxOutsideDeps)
}
