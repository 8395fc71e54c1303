package docs

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// reRow is a row of layout.md's tables: its first cell names a package
// by its folder, in backticks (`.` for the root package).
var reRow = regexp.MustCompile("^\\|\\s*`([^`]+)`")

// layoutPackages reads the packages layout.md lists, in order.
func layoutPackages(t *testing.T, root string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", "layout.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if m := reRow.FindStringSubmatch(line); m != nil {
			out = append(out, m[1])
		}
	}
	return out
}

// goCommand is the go command: go test puts its toolchain's bin first on
// the tests' PATH.
func goCommand() string { return "go" }

// rootPackages is `go list ./...` of the root module, as folders relative
// to the root ("." for the root package).
func rootPackages(t *testing.T, root string) []string {
	t.Helper()
	cmd := exec.Command(goCommand(), "list", "-f", "{{.Dir}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list ./...: %v\n%s", err, stderr)
	}
	var pkgs []string
	for _, dir := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, filepath.ToSlash(rel))
	}
	return pkgs
}

// infraPackages are the folders under infra/ (a module of its own, whose
// `go list` would download the CDK) holding Go files, as the go command
// sees them: testdata and folders starting with . or _ are skipped.
func infraPackages(t *testing.T, root string) []string {
	t.Helper()
	var pkgs []string
	infra := filepath.Join(root, "infra")
	err := filepath.WalkDir(infra, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != infra && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "node_modules" || name == "cdk.out") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(d.Name(), ".go") {
			rel, err := filepath.Rel(root, filepath.Dir(path))
			if err != nil {
				return err
			}
			if rel = filepath.ToSlash(rel); !slices.Contains(pkgs, rel) {
				pkgs = append(pkgs, rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) == 0 {
		t.Fatal("no Go packages under infra/")
	}
	return pkgs
}

// docs/layout.md lists every package of the root module (`go list ./...`)
// and of infra/, each once, and no package that does not exist.
func TestLayoutListsEveryPackage(t *testing.T) {
	root := repoRoot(t)
	listed := layoutPackages(t, root)
	have := append(rootPackages(t, root), infraPackages(t, root)...)

	seen := map[string]bool{}
	for _, p := range listed {
		if seen[p] {
			t.Errorf("layout.md lists %s twice", p)
		}
		seen[p] = true
		if !slices.Contains(have, p) {
			t.Errorf("layout.md lists %s, which is no package (moved or removed? take its row out or rename it)", p)
		}
	}
	for _, p := range have {
		if !seen[p] {
			t.Errorf("layout.md does not list the package %s: add a row with one line on what it is for", p)
		}
	}
}
