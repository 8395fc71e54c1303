package main

import (
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/triagehq/triage/infra/dispatcher"
	"github.com/triagehq/triage/internal/spec"
)

// `make synth` as a user runs it on a fresh clone: the real pinned CDK CLI,
// run by the Makefile in a copy of the repository's tracked files (no
// cdk.out, no build output). The CLI runs in the root and hands the app
// (which cdk.json runs in infra/) paths relative to the root: CDK_OUTDIR,
// CDK_PERF_COUNTERS_FILE, CDK_ERROR_FILE. The in-process synth of the other
// tests never runs the CLI, so only this test sees those paths. It checks
// that the template is where the CLI reads it, names the spec's table and
// queues, and that the app wrote nothing outside cdk.out.
//
// It reuses the checkout's installed CLI (installed here by `make cdk-cli`
// when missing), the Go module and build caches and the jsii cache, so a
// warm run costs one synth (about 15 s on 2 cores).
func TestMakeSynthFromCleanCopy(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the CDK CLI run")
	}
	root, err := dispatcher.FindRepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		t.Skipf("not a git checkout (%v): the clean copy is made of the tracked files", err)
	}
	if out, err := makeIn(root, "cdk-cli"); err != nil {
		t.Fatalf("make cdk-cli (installs the pinned CDK CLI): %v\n%s", err, out)
	}
	clone, tracked := cleanCopy(t, root)

	if out, err := makeIn(clone, "synth"); err != nil {
		t.Fatalf("make synth in a clean copy: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(clone, "cdk.out", StackName+".template.json"))
	if err != nil {
		t.Fatalf("no template where the CLI reads it: %v", err)
	}
	var tpl struct {
		Resources map[string]struct {
			Type       string
			Properties map[string]any
		}
	}
	if err := json.Unmarshal(b, &tpl); err != nil {
		t.Fatalf("template: %v", err)
	}
	names := map[string][]string{} // resource type -> literal names
	for _, r := range tpl.Resources {
		for _, key := range []string{"TableName", "QueueName", "FunctionName"} {
			if n, ok := r.Properties[key].(string); ok {
				names[r.Type] = append(names[r.Type], n)
			}
		}
	}
	s := spec.New("")
	want := map[string][]string{"AWS::DynamoDB::Table": {s.Table.Name}}
	for _, q := range s.Queues {
		want["AWS::SQS::Queue"] = append(want["AWS::SQS::Queue"], q.Name, q.DLQName)
	}
	for typ, w := range want {
		got := slices.Sorted(slices.Values(names[typ]))
		if w = slices.Sorted(slices.Values(w)); !slices.Equal(got, w) {
			t.Errorf("%s names = %v, want %v", typ, got, w)
		}
	}
	if n := len(names["AWS::Lambda::Function"]); n < 3 {
		t.Errorf("%d named functions, want at least the api, consumer and promoter", n)
	}

	// Every relative path the CLI passed resolved at the root: nothing new
	// in the copy but cdk.out (and the .cdk link made above).
	err = filepath.WalkDir(clone, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(clone, path)
		if rel == "cdk.out" || rel == ".cdk" {
			return fs.SkipDir
		}
		if !d.IsDir() && !tracked[filepath.ToSlash(rel)] {
			t.Errorf("make synth wrote %s, outside cdk.out", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// deploy-local gets as far as needing LocalStack (none here: the
	// endpoint is a closed port) and says how to start it.
	cmd := exec.Command("make", "deploy-local")
	cmd.Dir, cmd.Env = clone, append(userEnv(), "AWS_ENDPOINT_URL=http://127.0.0.1:9")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "needs LocalStack") || !strings.Contains(string(out), "docker compose") {
		t.Errorf("make deploy-local without LocalStack: err=%v, want a failure saying how to start LocalStack:\n%s", err, out)
	}
}

// makeIn runs `make target` in dir as a user would, outside any make.
func makeIn(dir, target string) ([]byte, error) {
	cmd := exec.Command("make", target)
	cmd.Dir, cmd.Env = dir, userEnv()
	return cmd.CombinedOutput()
}

// userEnv is the test's environment without what an enclosing `make test`
// exports (its flags and job server), which a user's shell would not have.
func userEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return name == "MAKEFLAGS" || name == "MFLAGS" || name == "MAKELEVEL"
	})
}

// cleanCopy copies root's tracked files, as they are in the working tree,
// into a temporary directory: what a fresh clone of this checkout (with its
// uncommitted edits) holds. The checkout's .cdk is linked in, so the copy
// uses the installed CLI instead of installing it again. It returns the
// copy and its tracked paths (slash-separated).
func cleanCopy(t *testing.T, root string) (string, map[string]bool) {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	clone := t.TempDir()
	tracked := map[string]bool{}
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		err := copyFile(filepath.Join(root, f), filepath.Join(clone, f))
		switch {
		case err == nil:
			tracked[f] = true
		case !os.IsNotExist(err): // a tracked file deleted in the working tree is skipped
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(root, ".cdk"), filepath.Join(clone, ".cdk")); err != nil {
		t.Fatal(err)
	}
	return clone, tracked
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil || st.IsDir() {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, st.Mode())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
