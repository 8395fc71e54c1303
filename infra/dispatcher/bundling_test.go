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
	// A library would build into a package archive, not an executable.
	if _, err := SourceHash(root, "./lib"); err == nil || !strings.Contains(err.Error(), "not a main package") {
		t.Errorf("library: err = %v, want not a main package", err)
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
	// One line before the build (what and how: stripped, trimmed), one after (the size).
	lines := strings.Split(strings.TrimSuffix(log.String(), "\n"), "\n")
	if len(lines) != 2 ||
		lines[0] != "building functions/b for linux/arm64 (go build -tags lambda.norpc -trimpath -buildvcs=false -ldflags=-s -w -buildid=)..." ||
		!strings.HasPrefix(lines[1], "bundled functions/b: bootstrap ") || !strings.HasSuffix(lines[1], " MiB") {
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

// userModules lays out a fake RootModule under triage/ and, beside it, a
// user module example.com/app that requires it through a local replace and
// has its own consumer, the shape of a user's project. Nothing is fetched.
func userModules() map[string]string {
	return map[string]string{
		"triage/go.mod":                  "module " + RootModule + "\n\ngo 1.22\n",
		"triage/functions/api/main.go":   "package main\n\nimport \"" + RootModule + "/lib\"\n\nfunc main() { println(lib.Name) }\n",
		"triage/lib/lib.go":              "package lib\n\nconst Name = \"v1\"\n",
		"app/go.mod":                     "module example.com/app\n\ngo 1.22\n\nrequire " + RootModule + " v0.0.0\n\nreplace " + RootModule + " => ../triage\n",
		"app/cmd/consumer/main.go":       "package main\n\nimport \"" + RootModule + "/lib\"\n\nfunc main() { println(\"mine\", lib.Name) }\n",
		"app/cmd/consumer/main_test.go":  "package main\n",
		"app/README.md":                  "docs\n",
		"triage/functions/api/README.md": "docs\n",
	}
}

// TestSourceHashFromUserModule hashes a stock function by import path and a
// user's consumer by relative path from a module that requires RootModule
// through a local replace: the replaced module's files count by content,
// the user's own sources only for the user's package, and the main module's
// go and godebug settings for both.
func TestSourceHashFromUserModule(t *testing.T) {
	files := userModules()
	const api, consumer = RootModule + "/functions/api", "./cmd/consumer"
	hashes := func(t *testing.T, files map[string]string) (apiHash, consumerHash string) {
		t.Helper()
		app := filepath.Join(writeModule(t, files), "app")
		var err error
		if apiHash, err = SourceHash(app, api); err != nil {
			t.Fatal(err)
		}
		if consumerHash, err = SourceHash(app, consumer); err != nil {
			t.Fatal(err)
		}
		return apiHash, consumerHash
	}
	baseAPI, baseConsumer := hashes(t, files)
	if baseAPI == baseConsumer {
		t.Fatal("api and consumer share a hash")
	}
	inTriage, err := SourceHash(filepath.Join(writeModule(t, files), "triage"), api)
	if err != nil {
		t.Fatal(err)
	}
	if inTriage == baseAPI {
		t.Error("the api hashes the same built in RootModule and in the user module, whose path and go.mod end up in the binary")
	}

	for _, c := range []struct {
		name, file, content    string
		changesAPI, changesOwn bool
	}{
		{"replaced module source", "triage/lib/lib.go", "package lib\n\nconst Name = \"v2\"\n", true, true},
		{"replaced module go.mod", "triage/go.mod", files["triage/go.mod"] + "\ngodebug panicnil=1\n", true, true},
		{"user consumer source", "app/cmd/consumer/main.go", files["app/cmd/consumer/main.go"] + "\n// c\n", false, true},
		{"user go.mod godebug", "app/go.mod", files["app/go.mod"] + "\ngodebug panicnil=1\n", true, true},
		{"user go.mod comment", "app/go.mod", files["app/go.mod"] + "\n// c\n", false, true},
		{"user test file", "app/cmd/consumer/main_test.go", "package main\n\nvar T = 1\n", false, false},
		{"user docs", "app/README.md", "other\n", false, false},
		{"replaced module docs", "triage/functions/api/README.md", "other\n", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			edited := map[string]string{}
			for k, v := range files {
				edited[k] = v
			}
			edited[c.file] = c.content
			a, own := hashes(t, edited)
			if changed := a != baseAPI; changed != c.changesAPI {
				t.Errorf("api hash changed = %v, want %v", changed, c.changesAPI)
			}
			if changed := own != baseConsumer; changed != c.changesOwn {
				t.Errorf("consumer hash changed = %v, want %v", changed, c.changesOwn)
			}
		})
	}

	t.Run("replaced module elsewhere", func(t *testing.T) {
		// The replace directive changes, and binaries record it.
		moved := map[string]string{}
		for k, v := range files {
			if rest, ok := strings.CutPrefix(k, "triage/"); ok {
				k = "src/vendored/triage/" + rest
			}
			moved[k] = v
		}
		moved["app/go.mod"] = strings.Replace(files["app/go.mod"], "=> ../triage", "=> ../src/vendored/triage", 1)
		a, own := hashes(t, moved)
		if a == baseAPI || own == baseConsumer {
			t.Errorf("hash ignores the replace directive: api changed %v, consumer changed %v", a != baseAPI, own != baseConsumer)
		}
	})
	t.Run("user module moved", func(t *testing.T) {
		// With an absolute replace, two copies of the user module at
		// different depths read the same files under the same go.mod.
		triage := writeModule(t, nil)
		app := writeModule(t, nil)
		abs := map[string]string{}
		for k, v := range files {
			if rest, ok := strings.CutPrefix(k, "triage/"); ok {
				abs[filepath.Join(triage, rest)] = v
				continue
			}
			if k == "app/go.mod" {
				v = strings.Replace(v, "=> ../triage", "=> "+filepath.ToSlash(triage), 1)
			}
			rest := strings.TrimPrefix(k, "app/")
			abs[filepath.Join(app, "near", rest)] = v
			abs[filepath.Join(app, "far", "away", "from", "it", rest)] = v
		}
		for path, content := range abs {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, pkg := range []string{api, consumer} {
			near, err := SourceHash(filepath.Join(app, "near"), pkg)
			if err != nil {
				t.Fatal(err)
			}
			far, err := SourceHash(filepath.Join(app, "far", "away", "from", "it"), pkg)
			if err != nil {
				t.Fatal(err)
			}
			if near != far {
				t.Errorf("%s: hash depends on where the user module is checked out", pkg)
			}
		}
	})
	t.Run("location independent", func(t *testing.T) {
		// The same projects one directory deeper: names are import paths,
		// not locations.
		nested := map[string]string{}
		for k, v := range files {
			nested["deeper/"+k] = v
		}
		root := writeModule(t, nested)
		for pkg, want := range map[string]string{api: baseAPI, consumer: baseConsumer} {
			got, err := SourceHash(filepath.Join(root, "deeper", "app"), pkg)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("%s: hash depends on where the modules are checked out", pkg)
			}
		}
	})
}

func TestCheckSourceRoot(t *testing.T) {
	root := writeModule(t, userModules())
	for _, dir := range []string{"triage", "app"} {
		if err := checkSourceRoot(filepath.Join(root, dir)); err != nil {
			t.Errorf("%s: %v", dir, err)
		}
	}
	other := writeModule(t, map[string]string{"go.mod": "module example.com/other\n\ngo 1.22\n"})
	if err := checkSourceRoot(other); err == nil || !strings.Contains(err.Error(), RootModule) {
		t.Errorf("module without %s: err = %v, want one naming it", RootModule, err)
	}
}

func TestDisplayPackage(t *testing.T) {
	for pkg, want := range map[string]string{
		RootModule + "/functions/api": "functions/api",
		DefaultConsumerPackage:        "functions/consumer",
		"./cmd/consumer":              "cmd/consumer",
		"example.com/app/cmd/worker":  "example.com/app/cmd/worker",
	} {
		if got := displayPackage(pkg); got != want {
			t.Errorf("displayPackage(%q) = %q, want %q", pkg, got, want)
		}
	}
}
