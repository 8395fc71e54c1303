package dispatcher_test

import (
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"

	"github.com/triagehq/triage/infra/dispatcher"
)

// s3Key is the asset key of fn's code, "<asset hash>.zip".
func (f *fixture) s3Key(t *testing.T, fn awslambda.Function) string {
	t.Helper()
	code, _ := f.resources[f.id(fn)].Properties["Code"].(map[string]any)
	key, ok := code["S3Key"].(string)
	if !ok || !strings.HasSuffix(key, ".zip") {
		t.Fatalf("%s: S3Key %v, want \"<hash>.zip\"", *fn.Node().Path(), code["S3Key"])
	}
	return key
}

// TestConsumerPackage swaps the consumer's package for another main package
// of this module: the consumer's asset changes, the API's and the
// promoter's stay exactly those of the default stack, and the consumer
// function keeps its configuration. No bundling: asset hashes are computed
// from the sources either way.
func TestConsumerPackage(t *testing.T) {
	def := stackUnderTest(t)
	const other = "./cmd/triage" // any main package stands in for a custom consumer here
	f, err := synth(filepath.Join(env.outDir, "consumer-package"), false, &dispatcher.Props{ConsumerPackage: other, PhysicalNames: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, was := f.s3Key(t, f.d.Consumer), def.s3Key(t, def.d.Consumer); got == was {
		t.Errorf("consumer asset %s is the default consumer's", got)
	}
	for name, fns := range map[string][2]awslambda.Function{"api": {f.d.API, def.d.API}, "promoter": {f.d.Promoter, def.d.Promoter}} {
		if got, was := f.s3Key(t, fns[0]), def.s3Key(t, fns[1]); got != was {
			t.Errorf("%s asset changed with ConsumerPackage: %s, was %s", name, got, was)
		}
	}
	props := func(f *fixture) map[string]any { return f.resources[f.id(f.d.Consumer)].Properties }
	for _, k := range []string{"Environment", "Handler", "Runtime", "Architectures", "MemorySize", "Timeout", "FunctionName"} {
		equalJSON(t, "consumer "+k, props(f)[k], props(def)[k])
	}

	// The same at the level of SourceHash: the stock consumer by import path
	// and the other package hash apart.
	stock, err := dispatcher.SourceHash(env.root, dispatcher.DefaultConsumerPackage)
	if err != nil {
		t.Fatal(err)
	}
	mine, err := dispatcher.SourceHash(env.root, other)
	if err != nil {
		t.Fatal(err)
	}
	if stock == mine {
		t.Error("SourceHash does not tell the consumer packages apart")
	}
}

// userConsumerMarker is the task type the user module's consumer handles; as
// a string constant it lands in the binary, which tells that consumer apart
// from the stock one.
const userConsumerMarker = "infra-test-user-module-handler"

// userModule writes, in a new temporary directory, a user's module
// example.com/app that requires RootModule through a replace with this
// repository (as a user would with a released version) and holds a consumer
// main built on the worker package, with the requirements `go mod tidy`
// would give it. It returns the module root.
//
// The go commands of the calling test run offline: GOPROXY=off (nothing can
// be fetched), GOSUMDB=off (checksums come from the copied go.sum), GOWORK=off and
// GOTOOLCHAIN=local. Every module needed is in the module cache once the
// shared synth has built the stock functions of this repository.
func userModule(t *testing.T) string {
	t.Helper()
	for k, v := range map[string]string{"GOPROXY": "off", "GOSUMDB": "off", "GOWORK": "off", "GOTOOLCHAIN": "local"} {
		t.Setenv(k, v)
	}
	rootMod, err := os.ReadFile(filepath.Join(env.root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := ""
	for _, line := range strings.Split(string(rootMod), "\n") {
		if strings.HasPrefix(line, "go ") {
			goLine = strings.TrimSpace(line)
		}
	}
	if goLine == "" {
		t.Fatal("no go directive in the repository's go.mod")
	}
	sum, err := os.ReadFile(filepath.Join(env.root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// The user's requirements are the repository's own (as `go mod tidy`
	// would settle them), copied rather than computed: tidy considers every
	// build tag and so may want modules no linux build has put in the
	// cache, which offline it cannot fetch.
	var requires strings.Builder
	inBlock := false
	for _, line := range strings.Split(string(rootMod), "\n") {
		switch {
		case strings.HasPrefix(line, "require ("):
			inBlock = true
			requires.WriteString(line + "\n")
		case inBlock:
			requires.WriteString(line + "\n")
			inBlock = strings.TrimSpace(line) != ")"
		case strings.HasPrefix(line, "require "):
			requires.WriteString(line + "\n")
		}
	}
	files := map[string]string{
		"go.mod": fmt.Sprintf("module example.com/app\n\n%s\n\nrequire %s v0.0.0\n\n%s\nreplace %s => %s\n",
			goLine, dispatcher.RootModule, requires.String(), dispatcher.RootModule, filepath.ToSlash(env.root)),
		"go.sum": string(sum),
		"cmd/consumer/main.go": `// Command consumer is a user's consumer function with a Go handler.
package main

import (
	"context"

	"github.com/triagehq/triage/worker"
)

func main() {
	w := worker.New(worker.Options{})
	w.Handle("` + userConsumerMarker + `", func(ctx context.Context, t *worker.Task) (any, error) {
		var in struct {
			Name string ` + "`json:\"name\"`" + `
		}
		if err := t.Decode(&in); err != nil {
			return nil, worker.Permanent(err)
		}
		return map[string]string{"hello": in.Name}, nil
	})
	w.StartLambda()
}
`,
	}
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestUserModuleConsumer deploys a user's own consumer from the user's own
// module: the construct, given SourceRoot = that module and ConsumerPackage
// "./cmd/consumer", bundles all three functions there, offline. The stock
// API and promoter build by import path from the required triage module,
// the consumer from the user's package, each as a static linux/arm64 ELF.
func TestUserModuleConsumer(t *testing.T) {
	def := stackUnderTest(t) // also fills the module cache and the build cache
	root := userModule(t)
	var log bytes.Buffer
	out := filepath.Join(env.outDir, "user-module")
	f, err := synth(out, true, &dispatcher.Props{SourceRoot: root, ConsumerPackage: "./cmd/consumer", BuildLog: &log})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("build log:\n%s", log.String())
	for _, pkg := range []string{"functions/api", "cmd/consumer", "functions/promoter"} {
		if !strings.Contains(log.String(), "bundled "+pkg+": bootstrap ") {
			t.Errorf("build log has no line for %s", pkg)
		}
	}

	for _, c := range []struct {
		name        string
		fn          awslambda.Function
		path, mod   string // the main package and its module, from the binary's build info
		userHandler bool
	}{
		{"api", f.d.API, dispatcher.RootModule + "/functions/api", dispatcher.RootModule, false},
		{"consumer", f.d.Consumer, "example.com/app/cmd/consumer", "example.com/app", true},
		{"promoter", f.d.Promoter, dispatcher.RootModule + "/functions/promoter", dispatcher.RootModule, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			bin := filepath.Join(out, "asset."+strings.TrimSuffix(f.s3Key(t, c.fn), ".zip"), "bootstrap")
			checkStaticArm64(t, bin)
			info, err := buildinfo.ReadFile(bin)
			if err != nil {
				t.Fatal(err)
			}
			if info.Path != c.path || info.Main.Path != c.mod {
				t.Errorf("built %s of module %s, want %s of %s", info.Path, info.Main.Path, c.path, c.mod)
			}
			if c.userHandler {
				// The user's consumer requires triage through the replace.
				found := false
				for _, d := range info.Deps {
					found = found || (d.Path == dispatcher.RootModule && d.Replace != nil)
				}
				if !found {
					t.Errorf("consumer does not depend on the replaced %s: %v", dispatcher.RootModule, info.Deps)
				}
			}
			b, err := os.ReadFile(bin)
			if err != nil {
				t.Fatal(err)
			}
			if has := bytes.Contains(b, []byte(userConsumerMarker)); has != c.userHandler {
				t.Errorf("binary contains the user's handler = %v, want %v", has, c.userHandler)
			}
		})
	}
	if f.s3Key(t, f.d.Consumer) == def.s3Key(t, def.d.Consumer) {
		t.Error("the user's consumer has the stock consumer's asset")
	}
}

// checkStaticArm64 asserts that path is a statically linked 64-bit arm64
// Linux executable: ELF class 64, machine AArch64, no interpreter, no
// dynamic section.
func checkStaticArm64(t *testing.T, path string) {
	t.Helper()
	e, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.Class != elf.ELFCLASS64 || e.Machine != elf.EM_AARCH64 || e.Type != elf.ET_EXEC || e.OSABI != elf.ELFOSABI_NONE {
		t.Errorf("%s: class %v, machine %v, type %v, ABI %v; want a 64-bit AArch64 executable", path, e.Class, e.Machine, e.Type, e.OSABI)
	}
	for _, p := range e.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("%s: has %v, want a static binary", path, p.Type)
		}
	}
}
