package dispatcher

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeModule writes files (path -> content) under a new temporary module
// root and returns it.
func writeModule(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// sampleModule is a tiny root module with two functions sharing a library
// package that embeds a file, plus files no build reads.
func sampleModule() map[string]string {
	return map[string]string{
		"go.mod":                  "module " + RootModule + "\n\ngo 1.22\n",
		"functions/a/main.go":     "package main\n\nimport \"" + RootModule + "/lib\"\n\nfunc main() { println(lib.Page) }\n",
		"functions/b/main.go":     "package main\n\nfunc main() { println(\"b\") }\n",
		"lib/lib.go":              "package lib\n\nimport _ \"embed\"\n\n//go:embed page.html\nvar Page string\n",
		"lib/page.html":           "<p>v1</p>\n",
		"lib/lib_test.go":         "package lib\n",
		"lib/other_linux_386.go":  "package lib\n", // excluded by GOARCH=arm64
		"README.md":               "docs\n",
		"infra/x.go":              "package infra\n",
		"cdk.out/asset.x/garbage": "x",
	}
}

func TestSourceHash(t *testing.T) {
	files := sampleModule()
	root := writeModule(t, files)
	base, err := SourceHash(root, "./functions/a")
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := SourceHash(root, "./functions/a"); again != base {
		t.Fatalf("hash not stable: %s then %s", base, again)
	}
	if b, _ := SourceHash(root, "./functions/b"); b == base {
		t.Error("two functions share a hash")
	}

	for _, c := range []struct {
		file    string
		content string
		changes bool
	}{
		{"lib/lib.go", files["lib/lib.go"] + "\nvar X = 1\n", true},
		{"lib/page.html", "<p>v2</p>\n", true}, // embedded
		{"functions/a/main.go", files["functions/a/main.go"] + "\n// c\n", true},
		{"go.mod", files["go.mod"] + "\ngodebug panicnil=1\n", true},
		{"lib/lib_test.go", "package lib\n\nvar T = 1\n", false},
		{"lib/other_linux_386.go", "package lib\n\nvar Y = 1\n", false},
		{"README.md", "other docs\n", false},
		{"infra/x.go", "package infra\n\nvar Z = 1\n", false},
		{"functions/b/main.go", "package main\n\nfunc main() {}\n", false},
		{"cdk.out/asset.x/garbage", "y", false},
	} {
		t.Run(c.file, func(t *testing.T) {
			root := writeModule(t, files)
			if err := os.WriteFile(filepath.Join(root, c.file), []byte(c.content), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := SourceHash(root, "./functions/a")
			if err != nil {
				t.Fatal(err)
			}
			if changed := got != base; changed != c.changes {
				t.Errorf("editing %s: hash changed = %v, want %v", c.file, changed, c.changes)
			}
		})
	}
}

func TestSourceHashMissingPackage(t *testing.T) {
	root := writeModule(t, sampleModule())
	if _, err := SourceHash(root, "./functions/nope"); err == nil || !strings.Contains(err.Error(), "functions/nope") {
		t.Errorf("err = %v, want one naming the package", err)
	}
}

func TestGoBundlerBuildsArm64Bootstrap(t *testing.T) {
	root := writeModule(t, sampleModule())
	out := t.TempDir()
	var log bytes.Buffer
	b := &goBundler{root: root, pkg: "./functions/b", log: &log}
	if ok := b.TryBundle(&out, nil); ok == nil || !*ok {
		t.Fatal("TryBundle did not report success")
	}
	bin, err := os.ReadFile(filepath.Join(out, "bootstrap"))
	if err != nil {
		t.Fatal(err)
	}
	// ELF header: class 64-bit, little endian, machine EM_AARCH64 (183).
	if len(bin) < 20 || string(bin[1:4]) != "ELF" || bin[4] != 2 || bin[18] != 183 {
		t.Errorf("bootstrap is not a 64-bit arm64 ELF binary")
	}
	if !strings.HasPrefix(log.String(), "bundled functions/b: bootstrap ") || !strings.HasSuffix(log.String(), " MiB\n") {
		t.Errorf("log = %q", log.String())
	}
}

func TestGoBundlerFailureNamesPackage(t *testing.T) {
	files := sampleModule()
	files["functions/b/main.go"] = "package main\n\nfunc main() { undefined() }\n"
	root := writeModule(t, files)
	out := t.TempDir()
	defer func() {
		r := recover()
		err, ok := r.(error)
		if !ok || !strings.Contains(err.Error(), "go build ./functions/b") || !strings.Contains(err.Error(), "undefined") {
			t.Errorf("panic = %v, want the compiler's error for functions/b", r)
		}
	}()
	(&goBundler{root: root, pkg: "./functions/b", log: &bytes.Buffer{}}).TryBundle(&out, nil)
}

func TestFindRepoRoot(t *testing.T) {
	root := writeModule(t, map[string]string{
		"go.mod":          "module " + RootModule + "\n",
		"infra/go.mod":    "module " + RootModule + "/infra\n",
		"infra/sub/x.txt": "",
	})
	got, err := FindRepoRoot(filepath.Join(root, "infra", "sub"))
	if err != nil {
		t.Fatal(err)
	}
	if got != root {
		t.Errorf("FindRepoRoot = %s, want %s", got, root)
	}
	if _, err := FindRepoRoot(t.TempDir()); err == nil {
		t.Error("found a root outside any module")
	}
}
