package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/triagehq/triage/internal/emulators"
)

// redoclyVersion pins the Redocly CLI that lints openapi.json: a release
// may add or change rules, so moving the pin is a change of its own. On
// npm, @redocly/cli is one self-contained package, so the pin fixes
// everything that runs.
const redoclyVersion = "2.77.0"

// redoclyDir is where the CLI is installed, under the repository root:
// ignored by git (.gitignore) and, being a dot-directory, never walked
// by `go ./...`.
const redoclyDir = ".redocly"

// TestOpenAPILint lints openapi.json with Redocly CLI's recommended rules
// (a linter no one here wrote; the tests above check the document against
// the server) and fails on any error or warning, and on any problem an
// ignore file would hide. The CLI is installed from npm into .redocly/ on
// first use; a machine without npm fails the test, saying so, rather than
// skipping it.
func TestOpenAPILint(t *testing.T) {
	root, err := emulators.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	bin := installRedocly(t, root)
	cmd := exec.CommandContext(t.Context(), bin, "lint", "--extends=recommended", "--format=json", filepath.Join("internal", "api", "openapi.json"))
	cmd.Dir = root
	// No telemetry and no update check: the CLI must not need the network.
	cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run() // exits non-zero on errors; the report says which
	var rep struct {
		Totals struct {
			Errors, Warnings, Ignored int
		}
		Version  string
		Problems []struct {
			RuleID   string `json:"ruleId"`
			Severity string
			Message  string
			Location []struct {
				Pointer string
				Start   struct{ Line, Col int }
			}
		}
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("redocly lint (%v) printed no JSON report: %v\nstdout: %s\nstderr: %s", runErr, err, stdout.Bytes(), stderr.Bytes())
	}
	if rep.Version != redoclyVersion {
		t.Errorf("linted by Redocly CLI %s, want the pinned %s", rep.Version, redoclyVersion)
	}
	for _, p := range rep.Problems {
		at := ""
		if len(p.Location) > 0 {
			at = fmt.Sprintf("%d:%d %s", p.Location[0].Start.Line, p.Location[0].Start.Col, p.Location[0].Pointer)
		}
		t.Errorf("openapi.json %s: %s %s: %s", at, p.Severity, p.RuleID, p.Message)
	}
	if n := rep.Totals.Errors + rep.Totals.Warnings + rep.Totals.Ignored; n > 0 || runErr != nil {
		t.Errorf("redocly lint: %d errors, %d warnings, %d ignored (exit: %v); want none", rep.Totals.Errors, rep.Totals.Warnings, rep.Totals.Ignored, runErr)
	}
}

// installRedocly returns the pinned Redocly CLI's executable under root,
// installing it from npm first unless it is there. The install goes to a
// fresh directory that replaces .redocly/ whole, with a stamp naming the
// version, so an interrupted install or another pin is installed again.
func installRedocly(t *testing.T, root string) string {
	t.Helper()
	dir := filepath.Join(root, redoclyDir)
	bin := filepath.Join(dir, "node_modules", ".bin", "redocly")
	stamp := "installed-@redocly-cli@" + redoclyVersion
	if _, err := os.Stat(filepath.Join(dir, stamp)); err == nil {
		return bin
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatalf("linting openapi.json needs npm (Node.js 20 or later) to install @redocly/cli@%s into %s: %v", redoclyVersion, dir, err)
	}
	tmp, err := os.MkdirTemp(root, redoclyDir+".tmp-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp) // gone once renamed; left by a failed install
	t.Logf("installing @redocly/cli@%s from npm into %s", redoclyVersion, dir)
	cmd := exec.CommandContext(t.Context(), npm, "install", "--prefix", tmp, "--no-audit", "--no-fund", "--no-save", "--no-package-lock", "@redocly/cli@"+redoclyVersion)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm install @redocly/cli@%s: %v\n%s", redoclyVersion, err, strings.TrimSpace(string(out)))
	}
	if err := os.WriteFile(filepath.Join(tmp, stamp), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		t.Fatal(err)
	}
	return bin
}
