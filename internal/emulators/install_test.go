package emulators

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestFindRoot(t *testing.T) {
	base := t.TempDir()
	mk := func(dir, goMod string) string {
		d := filepath.Join(base, dir)
		if err := os.MkdirAll(filepath.Join(d, sourceDir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, sourceDir, "package.json"), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
		if goMod != "" {
			if err := os.WriteFile(filepath.Join(d, "go.mod"), []byte(goMod), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.MkdirAll(filepath.Join(d, "deep", "er"), 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	checkout := mk("checkout", "// triage\nmodule github.com/triagehq/triage\n\ngo 1.26\n")
	other := mk("other", "module example.com/other\n")
	noMod := mk("nomod", "")
	tests := []struct {
		name, from, want string
	}{
		{"checkout root", checkout, checkout},
		{"inside a checkout", filepath.Join(checkout, "deep", "er"), checkout},
		{"another project with such a folder", filepath.Join(other, "deep"), ""},
		{"no go.mod", noMod, ""},
		{"nothing above", t.TempDir(), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FindRoot(tt.from)
			if tt.want == "" {
				if !errors.Is(err, ErrNoCheckout) {
					t.Fatalf("FindRoot = %q, %v; want ErrNoCheckout", got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("FindRoot = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	// This package's own checkout is found from here.
	root, err := FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, sourceDir, "install.go")); err != nil {
		t.Fatalf("FindRoot(.) = %q, which does not hold this package: %v", root, err)
	}
}

func TestInstallDir(t *testing.T) {
	if got, err := InstallDir("/src/triage"); err != nil || got != "/src/triage/.emulators" {
		t.Errorf("InstallDir(checkout) = %q, %v", got, err)
	}
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	got, err := InstallDir("")
	if err != nil {
		t.Fatal(err)
	}
	stamp, err := sourceStamp()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(cache, "triage", "emulators-"+stamp[:12]); got != want {
		t.Errorf("InstallDir(\"\") = %q, want %q", got, want)
	}
	if Installed("") {
		t.Errorf("Installed reports an install in an empty cache")
	}
	// A complete install is one whose stamp matches the sources.
	if err := os.MkdirAll(got, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(got, stampFile), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if Installed("") {
		t.Errorf("Installed accepts a stale stamp")
	}
	if err := os.WriteFile(filepath.Join(got, stampFile), []byte(stamp), 0o644); err != nil {
		t.Fatal(err)
	}
	if !Installed("") {
		t.Errorf("Installed rejects a matching stamp")
	}
}

// TestEmbeddedSources checks that the install is made from every embedded
// file and only from them, and that they are the files in this folder.
func TestEmbeddedSources(t *testing.T) {
	var embedded []string
	err := fs.WalkDir(sources, ".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			embedded = append(embedded, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(embedded) != len(installFiles) {
		t.Errorf("embedded %v, installFiles %v: each must be in both", embedded, installFiles)
	}
	for _, f := range installFiles {
		b, err := sources.ReadFile(f)
		if err != nil {
			t.Fatalf("%s not embedded: %v", f, err)
		}
		disk, err := os.ReadFile(f)
		if err != nil || string(disk) != string(b) {
			t.Errorf("embedded %s differs from the file here (%v)", f, err)
		}
	}
	if stamp, err := sourceStamp(); err != nil || len(stamp) != 64 {
		t.Errorf("sourceStamp = %q, %v; want a hex SHA-256", stamp, err)
	}
}
