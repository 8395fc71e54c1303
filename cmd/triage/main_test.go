package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// built is the CLI binary the tests that run it as a user would share:
// one `go build` per test binary instead of one per test (each link of
// the CLI takes 10 to 30 s on a loaded 2-core machine).
var built struct {
	once sync.Once
	dir  string
	path string
	err  error
	out  []byte
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// buildCLI builds the CLI from the checkout at root, once per test
// binary, and returns the binary's path. Its directory holds nothing else,
// so it can go on a PATH.
func buildCLI(t *testing.T, root string) string {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "triage-cli-"); built.err != nil {
			return
		}
		built.path = filepath.Join(built.dir, "triage")
		build := exec.Command("go", "build", "-o", built.path, "./cmd/triage")
		build.Dir = root
		built.out, built.err = build.CombinedOutput()
	})
	if built.err != nil {
		t.Fatalf("build: %v\n%s", built.err, built.out)
	}
	return built.path
}

// goCache is the build cache of the go command running the tests. A test
// that moves XDG_CACHE_HOME (to keep `triage dev`'s state apart) passes
// it on, or a `go build` in a transcript starts from a cold cache and
// compiles every dependency again (minutes on 2 cores), which is not what
// a user with a warm cache sees.
var goCache = sync.OnceValue(func() string {
	out, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
})
