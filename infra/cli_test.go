package main

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/triagehq/triage/infra/dispatcher"
)

// `make synth` as a user runs it: the real pinned CDK CLI, from a copy of
// the repository's tracked files (no cdk.out, no build output), writing a
// template with the table, six queues and the functions. The in-process
// synth the other tests use never runs the CLI, which passes the app paths
// relative to the directory the CLI runs in.
func TestMakeSynthFromCleanCopy(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the CDK CLI")
	}
	root, err := dispatcher.FindRepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	// The pinned CLI, installed by the Makefile target that `make synth` uses.
	if out, err := exec.Command("make", "-C", root, ".cdk/node_modules/.bin/cdk").CombinedOutput(); err != nil {
		t.Fatalf("install the CDK CLI: %v\n%s", err, out)
	}
	clone := t.TempDir()
	files, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
		if err := copyFile(filepath.Join(root, f), filepath.Join(clone, f)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	// Reuse the installed CLI rather than install it again.
	if err := os.Symlink(filepath.Join(root, ".cdk"), filepath.Join(clone, ".cdk")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("make", "synth")
	cmd.Dir = clone
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make synth in a clean copy: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(clone, "cdk.out", StackName+".template.json"))
	if err != nil {
		t.Fatalf("no template where the CLI looks for it: %v", err)
	}
	var tpl struct {
		Resources map[string]struct{ Type string }
	}
	if err := json.Unmarshal(b, &tpl); err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, r := range tpl.Resources {
		count[r.Type]++
	}
	if count["AWS::DynamoDB::Table"] != 1 || count["AWS::SQS::Queue"] != 6 || count["AWS::Lambda::Function"] < 3 {
		t.Fatalf("template resources: %v", count)
	}
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
