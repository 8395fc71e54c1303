package dispatcher

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3assets"
	"github.com/aws/jsii-runtime-go"
)

// RootModule is the module path of the repository whose functions/ the
// construct builds. FindRepoRoot looks for the go.mod that declares it.
const RootModule = "github.com/triagehq/triage"

// The stock functions' packages. They are built by import path, so `go
// build` finds them in this repository and in any module that requires
// RootModule (from the module cache, or a local replace).
const (
	// DefaultConsumerPackage is the stock consumer, the default of
	// Props.ConsumerPackage.
	DefaultConsumerPackage = RootModule + "/functions/consumer"
	apiPackage             = RootModule + "/functions/api"
	promoterPackage        = RootModule + "/functions/promoter"
	countersPackage        = RootModule + "/functions/counters"
)

// buildEnv cross-compiles a static binary for the arm64 Lambda runtime. It is
// part of the asset hash, so changing it redeploys the functions.
func buildEnv() []string {
	return []string{"GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0"}
}

// buildTags drops the RPC shim of aws-lambda-go, which provided.al2023 does
// not need. go list gets them too, since tags select files.
func buildTags() []string { return []string{"-tags", "lambda.norpc"} }

// buildFlags make the binary small and reproducible (-trimpath, no build id,
// no VCS stamp). They are part of the asset hash too.
func buildFlags() []string {
	return append(buildTags(), "-trimpath", "-buildvcs=false", "-ldflags=-s -w -buildid=")
}

// goBundler builds one function's bootstrap with the local Go toolchain. It
// implements awscdk.ILocalBundling, so synth needs no Docker.
type goBundler struct {
	root string    // module root, where `go build` runs
	pkg  string    // package to build, as `go build` takes it in root
	log  io.Writer // where the bootstrap size is reported
}

// TryBundle builds <outputDir>/bootstrap. It panics on failure because the
// interface can only answer true or false, and false would make the CDK fall
// back to Docker bundling with a placeholder image, which hides the compiler's
// message. jsii turns the panic into an exception, and the CDK reports it as
// "Failed to bundle asset <path>: <our error>".
func (b *goBundler) TryBundle(outputDir *string, _ *awscdk.BundlingOptions) *bool {
	if outputDir == nil {
		panic(errors.New("bundling: no output directory"))
	}
	if err := b.build(*outputDir); err != nil {
		panic(err)
	}
	return jsii.Bool(true)
}

// build runs `go build` in the module root and reports the binary size.
// It says which function it builds before it starts: on a cold cache the
// first build compiles the AWS SDK for arm64, minutes in which `make synth`
// would otherwise show nothing but the CDK's asset path.
func (b *goBundler) build(outputDir string) error {
	out := filepath.Join(outputDir, "bootstrap")
	args := append([]string{"build"}, buildFlags()...)
	args = append(args, "-o", out, b.pkg)
	fmt.Fprintf(b.log, "building %s for linux/arm64 (go %s)...\n", displayPackage(b.pkg), strings.Join(args[:len(args)-3], " "))
	cmd := exec.Command("go", args...)
	cmd.Dir = b.root
	cmd.Env = append(os.Environ(), buildEnv()...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", b.pkg, err, msg)
	}
	st, err := os.Stat(out)
	if err != nil {
		return fmt.Errorf("go build %s: %w", b.pkg, err)
	}
	fmt.Fprintf(b.log, "bundled %s: bootstrap %.1f MiB\n", displayPackage(b.pkg), float64(st.Size())/(1<<20))
	return nil
}

// displayPackage shortens pkg for the build log: the stock functions show as
// "functions/api", a package given relative to the root as "cmd/consumer".
func displayPackage(pkg string) string {
	if rest, ok := strings.CutPrefix(pkg, RootModule+"/"); ok {
		return rest
	}
	return strings.TrimPrefix(pkg, "./")
}

// goCode returns the Lambda code of the package pkg (an import path, or a
// path relative to root such as "./cmd/consumer"),
// built by goBundler. The asset hash is computed from exactly the inputs of
// the build (see SourceHash), so it is the same on every synth of the same
// sources and changes whenever the binary could.
func goCode(root, pkg string, log io.Writer) (awslambda.Code, error) {
	hash, err := SourceHash(root, pkg)
	if err != nil {
		return nil, err
	}
	return awslambda.Code_FromAsset(jsii.String(root), &awss3assets.AssetOptions{
		AssetHashType: awscdk.AssetHashType_CUSTOM,
		AssetHash:     jsii.String(hash),
		Bundling: &awscdk.BundlingOptions{
			// Required by the API but never used: local bundling always
			// succeeds or fails loudly before the CDK would try Docker.
			Image: awscdk.DockerImage_FromRegistry(jsii.String("none")),
			Local: &goBundler{root: root, pkg: pkg, log: log},
			// Not run (no Docker); it documents the build and, because the
			// CDK mixes the bundling options into a custom hash, keeps the
			// three functions' hashes apart even for identical sources.
			Command: jsii.Strings(append(append([]string{"go", "build"}, buildFlags()...), "-o", "/asset-output/bootstrap", pkg)...),
		},
	}), nil
}

// listedPackage is the part of `go list -json` output SourceHash reads.
type listedPackage struct {
	ImportPath string
	Name       string
	Dir        string
	Standard   bool
	DepOnly    bool // false for pkg itself
	Module     *struct {
		Path    string
		Version string
		Main    bool
		GoMod   string // its go.mod: the go line and godebug settings change the binary
		Replace *struct {
			Path    string
			Version string
		}
	}
	GoFiles, CgoFiles, CFiles, CXXFiles, MFiles, HFiles, SFiles, SysoFiles, EmbedFiles []string
}

// SourceHash fingerprints everything `go build` reads to produce pkg's
// binary when run in the module at root (pkg must be a main package): the Go version, the build
// settings, the main module's path, go version and godebug settings (they
// shape every binary built in it, even of a package from another module),
// the files of every package it depends on that is built from local files
// (packages of the main module or of a module replaced by a directory),
// including embedded files and their module's go.mod, the replacement
// directory as written in go.mod (the binary records it), and the version of
// every other module it uses (the module cache is immutable).
//
// It asks `go list -deps` rather than walking the tree, so tests, docs,
// infra/ and cdk.out never change a function's hash, while a change to any
// source the function imports always does. Files are named by import path,
// not by location, so the hash does not depend on where the module or a
// locally replaced module is checked out.
func SourceHash(root, pkg string) (string, error) {
	goEnv, err := goOutput(root, "env", "GOVERSION", "GOWORK")
	if err != nil {
		return "", err
	}
	goVersion, goWork, _ := strings.Cut(goEnv, "\n")
	goWork = strings.TrimSpace(goWork)
	mainMod, err := goOutput(root, "mod", "edit", "-json")
	if err != nil {
		return "", err
	}
	var mod struct {
		Module  struct{ Path string }
		Go      string
		GoDebug []struct{ Key, Value string }
	}
	if err := json.Unmarshal([]byte(mainMod), &mod); err != nil {
		return "", fmt.Errorf("go mod edit -json (in %s): decode: %w", root, err)
	}
	args := append([]string{"list", "-deps", "-json"}, buildTags()...)
	listing, err := goOutput(root, append(args, pkg)...)
	if err != nil {
		return "", err
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(strings.NewReader(listing))
	for dec.More() {
		var p listedPackage
		if err := dec.Decode(&p); err != nil {
			return "", fmt.Errorf("go list %s: decode: %w", pkg, err)
		}
		if !p.DepOnly && p.Name != "main" {
			// go build -o would write a package archive as the bootstrap.
			return "", fmt.Errorf("%s is package %s, not a main package (a command)", pkg, p.Name)
		}
		pkgs = append(pkgs, p)
	}
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].ImportPath < pkgs[j].ImportPath })

	h := sha256.New()
	fmt.Fprintf(h, "go %s\nenv %q\nflags %q\npkg %s\n", strings.TrimSpace(goVersion), buildEnv(), buildFlags(), pkg)
	fmt.Fprintf(h, "main %s go %s godebug %q\n", mod.Module.Path, mod.Go, mod.GoDebug)
	if goWork != "" && goWork != "off" {
		if err := hashFile(h, "go.work", goWork); err != nil {
			return "", err
		}
	}
	modules := map[string]bool{}
	for _, p := range pkgs {
		switch {
		case p.Standard || p.Module == nil:
			// Fixed by the Go version above.
		case p.Module.Main || (p.Module.Replace != nil && p.Module.Replace.Version == ""):
			if err := hashPackageFiles(h, p); err != nil {
				return "", err
			}
			if m := p.Module; !modules[m.Path] {
				modules[m.Path] = true
				if m.Replace != nil {
					// The binary's build info records the replacement as
					// written in go.mod.
					fmt.Fprintf(h, "replace %s %s => %s\n", m.Path, m.Version, m.Replace.Path)
				}
				if m.GoMod != "" {
					if err := hashFile(h, m.Path+"/go.mod", m.GoMod); err != nil {
						return "", err
					}
				}
			}
		default:
			m := p.Module
			v := m.Version
			if m.Replace != nil {
				v = m.Replace.Path + "@" + m.Replace.Version
			}
			fmt.Fprintf(h, "dep %s %s@%s\n", p.ImportPath, m.Path, v)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// hashPackageFiles adds the name (import path and file name) and content of
// each file of p that the compiler or go:embed reads.
func hashPackageFiles(h io.Writer, p listedPackage) error {
	var files []string
	for _, list := range [][]string{p.GoFiles, p.CgoFiles, p.CFiles, p.CXXFiles, p.MFiles, p.HFiles, p.SFiles, p.SysoFiles, p.EmbedFiles} {
		files = append(files, list...)
	}
	sort.Strings(files)
	for _, f := range files {
		if err := hashFile(h, p.ImportPath+"/"+filepath.ToSlash(f), filepath.Join(p.Dir, f)); err != nil {
			return fmt.Errorf("package %s: %w", p.ImportPath, err)
		}
	}
	return nil
}

// hashFile adds name, which says what the file is independently of where it
// is checked out, and the digest of the content of the file at path.
func hashFile(h io.Writer, name, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	fmt.Fprintf(h, "file %s %x\n", name, sha256.Sum256(b))
	return nil
}

// checkSourceRoot verifies that the module at root can build the stock
// functions by import path: it is RootModule or its build list includes it.
func checkSourceRoot(root string) error {
	if _, err := goOutput(root, "list", "-m", "-f", "{{.Path}}", RootModule); err != nil {
		return fmt.Errorf("SourceRoot %s: must be a module that is or requires %s: %w", root, RootModule, err)
	}
	return nil
}

// goOutput runs the go command in dir with the build environment and returns
// its standard output.
func goOutput(dir string, args ...string) (string, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), buildEnv()...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go %s (in %s): %w: %s", strings.Join(args, " "), dir, err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// FindRepoRoot returns the nearest directory at or above start whose go.mod
// declares RootModule. The CDK app runs from infra/ (cdk.json says
// `cd infra && go run .`) and tests run from infra/dispatcher, so neither can
// assume the working directory is the root.
func FindRepoRoot(start string) (string, error) {
	dir, err := filepath.Abs(start)
	if err != nil {
		return "", fmt.Errorf("find repository root: %w", err)
	}
	for {
		if isRootModule(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("find repository root: no go.mod declaring module %s at or above %s", RootModule, start)
		}
		dir = parent
	}
}

// isRootModule reports whether the go.mod at path declares RootModule.
func isRootModule(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`) == RootModule
		}
	}
	return false
}
