package dispatcher_test

import (
	"archive/zip"
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
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

// testVersion is the version at which the local module proxy of userModule
// serves this checkout's two modules.
const testVersion = "v0.1.0-test"

// userModule writes, in a new temporary directory, a user's module
// example.com/app as the README describes it: it requires RootModule and
// RootModule/infra, both at testVersion, with no replace directive and no
// go.work, and holds a consumer main built on the worker package. It
// returns the module root.
//
// The two modules come from a local module proxy (a GOPROXY directory made
// of this checkout's files, standing in for proxy.golang.org), so the user
// module gets them the way it gets any published module: downloaded into
// the module cache, checked against its go.sum. Every other module comes
// from this machine's module cache (its download directory is a proxy as
// well), so nothing is fetched from the network. The go commands of the
// calling test use a module cache of their own (nothing is added to the
// real one), GOSUMDB=off (the test versions are in no checksum database),
// GOWORK=off and GOTOOLCHAIN=local. The shared synth must have run: it puts
// in the module cache every module the stock functions need; userModule
// adds the go.mod files of both modules' graphs.
func userModule(t *testing.T) string {
	t.Helper()
	realCache := goOutput(t, env.root, "env", "GOMODCACHE")
	// The user module's go.mod is new, so resolving it walks the whole
	// module graph of both modules, the go.mod files of versions no build
	// here uses included (github.com/go-logr/stdr, a go 1.16 module, still
	// names logr v1.2.2). Loading each module's graph once with this
	// machine's settings puts those go.mod files in the module cache (a
	// fresh machine's cache has only what its builds fetched).
	goOutput(t, env.root, "list", "-m", "all")
	goOutput(t, filepath.Join(env.root, "infra"), "list", "-m", "all")
	proxy := t.TempDir()
	inInfra := func(rel string) bool { return rel == "infra" || strings.HasPrefix(rel, "infra/") }
	publish(t, proxy, dispatcher.RootModule, env.root, func(rel string) bool { return !inInfra(rel) })
	publish(t, proxy, dispatcher.RootModule+"/infra", filepath.Join(env.root, "infra"), nil)
	for k, v := range map[string]string{
		"GOPROXY":     fileURL(proxy) + "," + fileURL(filepath.Join(realCache, "cache", "download")),
		"GOMODCACHE":  filepath.Join(t.TempDir(), "modcache"),
		"GOFLAGS":     strings.TrimSpace(os.Getenv("GOFLAGS") + " -modcacherw"), // so the temporary directory can be removed
		"GOSUMDB":     "off",
		"GOWORK":      "off",
		"GOTOOLCHAIN": "local",
	} {
		t.Setenv(k, v)
	}

	goLine := ""
	rootMod, err := os.ReadFile(filepath.Join(env.root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(rootMod), "\n") {
		if strings.HasPrefix(line, "go ") {
			goLine = strings.TrimSpace(line)
		}
	}
	if goLine == "" {
		t.Fatal("no go directive in the repository's go.mod")
	}
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": fmt.Sprintf("module example.com/app\n\n%s\n\nrequire (\n\t%s %s\n\t%s/infra %s\n)\n",
			goLine, dispatcher.RootModule, testVersion, dispatcher.RootModule, testVersion),
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
	// What `go mod tidy` does for the packages the construct builds there,
	// without tidy's look at every build tag and every dependency's tests,
	// which would want modules no build here has put in the module cache:
	// record the requirements and checksums of the linux/arm64 builds of
	// the four functions' packages (the user's consumer among them). After
	// it, `go build` works with the default -mod=readonly, as the
	// construct runs it.
	goOutput(t, dir, "list", "-mod=mod", "-deps", "-tags", "lambda.norpc", "./cmd/consumer",
		dispatcher.RootModule+"/functions/api", dispatcher.RootModule+"/functions/promoter", dispatcher.RootModule+"/functions/counters")
	// The module graph, the CDK's side included, resolves from the proxy
	// alone: no replace and no workspace anywhere.
	for _, m := range []string{dispatcher.RootModule, dispatcher.RootModule + "/infra"} {
		if got := goOutput(t, dir, "list", "-m", "-f", "{{.Version}} {{.Replace}}", m); got != testVersion+" <nil>" {
			t.Fatalf("%s in the user module: %q, want %s from the proxy", m, got, testVersion)
		}
	}
	return dir
}

// publish writes module path at testVersion into the GOPROXY directory
// proxy, made of the files of this checkout under dir that git tracks or
// would track (not ignored), as they are in the working tree, and for which
// keep (nil: all) says yes, by their slash-separated path relative to dir.
func publish(t *testing.T, proxy, path, dir string, keep func(rel string) bool) {
	t.Helper()
	out, err := exec.Command("git", "-C", dir, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Skipf("not a git checkout (%v): the module proxy is made of the files git tracks", err)
	}
	at := filepath.Join(proxy, filepath.FromSlash(path), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		t.Fatal(err)
	}
	zf, err := os.Create(filepath.Join(at, testVersion+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	defer zf.Close()
	zw := zip.NewWriter(zf)
	for _, rel := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if rel == "" || (keep != nil && !keep(rel)) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
		if os.IsNotExist(err) {
			continue // tracked, deleted in the working tree
		}
		if err != nil {
			t.Fatal(err)
		}
		w, err := zw.Create(path + "@" + testVersion + "/" + rel)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	goMod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string][]byte{
		testVersion + ".mod":  goMod,
		testVersion + ".info": []byte(`{"Version":"` + testVersion + `","Time":"2026-01-01T00:00:00Z"}`),
		"list":                []byte(testVersion + "\n"),
	} {
		if err := os.WriteFile(filepath.Join(at, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// fileURL is the file:// URL of a local directory, as GOPROXY takes it.
func fileURL(dir string) string {
	p := filepath.ToSlash(dir)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // a Windows drive letter
	}
	return "file://" + p
}

// goOutput runs the go command in dir and returns its trimmed output.
func goOutput(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go %s (in %s): %v\n%s", strings.Join(args, " "), dir, err, stderr)
	}
	return strings.TrimSpace(string(out))
}

// TestUserModuleConsumer deploys a user's own consumer from the user's own
// module, which gets triage and its CDK module as published modules (see
// userModule): the construct, given SourceRoot = that module and
// ConsumerPackage "./cmd/consumer", bundles all four functions there,
// offline. The stock API, promoter and counters build by import path from
// the required triage module in the module cache, the consumer from the
// user's package, each as a static linux/arm64 ELF.
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
	for _, pkg := range []string{"functions/api", "cmd/consumer", "functions/promoter", "functions/counters"} {
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
		{"counters", f.d.Counters, dispatcher.RootModule + "/functions/counters", dispatcher.RootModule, false},
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
				// The user's consumer uses the published triage, from the
				// module cache: no replace.
				found := false
				for _, d := range info.Deps {
					found = found || (d.Path == dispatcher.RootModule && d.Version == testVersion && d.Replace == nil)
				}
				if !found {
					t.Errorf("consumer does not depend on %s@%s: %v", dispatcher.RootModule, testVersion, info.Deps)
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

// TestUserModuleWorkspace is local development of a user's module against
// a checkout of triage: a go.work next to the user's go.mod uses the
// checkout's two modules instead of the published ones, with no change to
// the user's go.mod (no replace). The construct then hashes and builds the
// stock functions from the checkout's files.
func TestUserModuleWorkspace(t *testing.T) {
	stackUnderTest(t)
	root := userModule(t)
	props := &dispatcher.Props{SourceRoot: root, ConsumerPackage: "./cmd/consumer"}
	published, err := synth(filepath.Join(env.outDir, "user-published"), false, props)
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(root, "go.work")
	content := fmt.Sprintf("go %s\n\nuse (\n\t.\n\t%s\n\t%s\n)\n", goOutput(t, root, "list", "-m", "-f", "{{.GoVersion}}"),
		filepath.ToSlash(env.root), filepath.ToSlash(filepath.Join(env.root, "infra")))
	if err := os.WriteFile(work, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOWORK", work)

	for m, dir := range map[string]string{dispatcher.RootModule: env.root, dispatcher.RootModule + "/infra": filepath.Join(env.root, "infra")} {
		if got := goOutput(t, root, "list", "-m", "-f", "{{.Dir}}", m); got != dir {
			t.Errorf("%s comes from %s, want the checkout's %s", m, got, dir)
		}
	}
	local, err := synth(filepath.Join(env.outDir, "user-workspace"), false, props)
	if err != nil {
		t.Fatal(err)
	}
	for name, fns := range map[string][2]awslambda.Function{"api": {local.d.API, published.d.API}, "consumer": {local.d.Consumer, published.d.Consumer}} {
		if local.s3Key(t, fns[0]) == published.s3Key(t, fns[1]) {
			t.Errorf("%s: the same asset built from the checkout and from the published module", name)
		}
	}
}
