package worker_test

import (
	"os/exec"
	"strings"
	"testing"
)

// maxMinimalDeps is the most packages from outside this module (the
// standard library and third parties) the smallest worker program may link
// (issue 24: a lean worker). All told it linked 562 packages with the OTLP
// exporter and the Prometheus client linked by default, 445 with the
// exporter opt-in (package otlp), 396 with the Prometheus client opt-in too
// (package workerprom). With dependencies, batches, schedules and keys it
// links 401, of which 372 come from outside the module.
// triage's own packages are not counted: splitting one for clarity must not
// trip a bound that is about what a worker drags in.
const maxMinimalDeps = 380

// module is this module's path, whose packages the bound leaves out.
const module = "github.com/triagehq/triage"

// The smallest worker (testdata/minimal: one handler, Run) links at most
// maxMinimalDeps packages from outside the module, and neither the Prometheus client nor an OTLP
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
	outside := 0
	for _, d := range deps {
		if d != module && !strings.HasPrefix(d, module+"/") {
			outside++
		}
	}
	if outside > maxMinimalDeps {
		t.Errorf("a minimal worker links %d packages from outside the module; the bound is %d", outside, maxMinimalDeps)
	}
	t.Logf("a minimal worker links %d packages, %d from outside the module (bound %d)", len(deps), outside, maxMinimalDeps)
}
