package worker_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/api"
	"github.com/triagehq/triage/internal/app/apiapp"
	"github.com/triagehq/triage/internal/auth"
	"github.com/triagehq/triage/internal/emulators"
	"github.com/triagehq/triage/internal/emulators/stacktest"
)

// TestUserModule builds a user's program in a module of its own (it
// requires triage through a replace with this checkout, as a user of a
// released version would require it) and runs it against the emulators:
// one client type over HTTP and direct, two typed workers with middleware,
// long-running and through the Lambda handler, Snooze and Cancel
// (testdata/shop/main.go.txt). Only the public packages are importable
// from there, so this is the surface a user gets.
func TestUserModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module and runs a Lambda invocation (about a minute)")
	}
	env := stacktest.New(t)
	toks, err := auth.Parse("shop-token:submit+read")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(apiapp.Handler(env.App(t, nil), toks, api.Options{}))
	defer srv.Close()

	root, err := emulators.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeUserModule(t, root, dir)

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	bin := filepath.Join(dir, "shop")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	build.Dir = dir
	// Offline, as a user's CI with a warm cache: everything the program
	// needs is in the module cache once this repository's tests built.
	build.Env = append(os.Environ(), "GOPROXY=off", "GOSUMDB=off", "GOWORK=off", "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the user's module: %v\n%s", err, out)
	}
	run := exec.CommandContext(ctx, bin)
	run.Env = append(os.Environ(),
		"TRIAGE_PREFIX="+env.Prefix, "TRIAGE_LOG_LEVEL=warn",
		"SHOP_API_URL="+srv.URL, "SHOP_API_TOKEN=shop-token")
	out, err := run.CombinedOutput()
	t.Logf("the user's program said:\n%s", out)
	if err != nil {
		t.Fatalf("the user's program failed: %v", err)
	}
	for _, want := range []string{"ok run:", "ok lambda:", "ok middleware"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("no %q line", want)
		}
	}
}

// writeUserModule lays out example.com/shop in dir: the program, and a
// go.mod requiring triage through a replace with root. Its requirements
// are the repository's own, copied (as `go mod tidy` would settle them),
// and so is go.sum.
func writeUserModule(t *testing.T, root, dir string) {
	t.Helper()
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	var goLine, requires strings.Builder
	inBlock := false
	for _, line := range strings.Split(string(mod), "\n") {
		switch {
		case strings.HasPrefix(line, "go "):
			goLine.WriteString(line)
		case strings.HasPrefix(line, "require ("):
			inBlock = true
			requires.WriteString(line + "\n")
		case inBlock:
			requires.WriteString(line + "\n")
			inBlock = strings.TrimSpace(line) != ")"
		}
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(root, "worker", "testdata", "shop", "main.go.txt"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"go.mod": fmt.Sprintf("module example.com/shop\n\n%s\n\nrequire github.com/triagehq/triage v0.0.0\n\n%s\nreplace github.com/triagehq/triage => %s\n",
			goLine.String(), requires.String(), filepath.ToSlash(root)),
		"go.sum":  string(sum),
		"main.go": string(src),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
