package emulators

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Emulators is a running pair of emulators. Stop ends exactly the processes
// Start began, by PID.
type Emulators struct {
	SQSEndpoint      string // http://127.0.0.1:<port>
	DynamoDBEndpoint string

	procs []*exec.Cmd
	data  *dataDir // DynamoDB Local's database folder; removed by Stop
	once  sync.Once
}

// Option changes how Start runs the emulators.
type Option func(*options)

type options struct {
	fullJIT bool
}

// FullJIT runs DynamoDB Local with the JVM's optimizing compiler (C2) as
// well as C1. By default it runs C1 only, which costs tests ~40% less CPU;
// a benchmark that measures a warm emulator's steady rate needs C2: on
// the 2-core machine C1 alone writes ~40% slower once warm (the bench's
// conditional-write ceiling 208/s against 340/s).
func FullJIT() Option { return func(o *options) { o.fullJIT = true } }

// Start installs the emulators if needed, starts both on free loopback
// ports and waits until each is listening.
func Start(ctx context.Context, root string, opts ...Option) (*Emulators, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	dir, err := Install(ctx, root)
	if err != nil {
		return nil, err
	}
	e := &Emulators{}
	sqsCmd := exec.Command("node", filepath.Join(dir, "sqs-loopback.mjs"), "0")
	sqsCmd.Dir = dir
	line, err := e.launch(ctx, sqsCmd, "LISTENING ")
	if err != nil {
		e.Stop()
		return nil, fmt.Errorf("start SQS emulator: %w", err)
	}
	e.SQSEndpoint = strings.TrimSpace(strings.TrimPrefix(line, "LISTENING "))

	// A file database, on tmpfs where there is one, instead of -inMemory:
	// the launcher can then index the stream records (see
	// DynamoDBLoopback.java and dataDir), and it reports "LISTENING
	// INDEXED" only once SQLite plans to use the indexes.
	if e.data, err = newDataDir(); err != nil {
		e.Stop()
		return nil, fmt.Errorf("start DynamoDB Local: %w", err)
	}
	// A port is free when freePort returns, but Java binds it a second or
	// more later, and another process (a test binary running beside this
	// one) can take it in between: a bind failure tries a new port.
	var port int
	for try := 1; ; try++ {
		if port, err = freePort(); err != nil {
			e.Stop()
			return nil, err
		}
		// -XX:TieredStopAtLevel=1 compiles with C1 only: an emulator
		// serves minutes, not days, and C2's compilations cost more CPU
		// than they return (measured on 2 cores: the store tests 27.6 →
		// 16.6 CPU seconds, the flow tests 80 → 46; startup 7.2 → 4.2).
		// FullJIT keeps C2 for the bench.
		var args []string
		if !o.fullJIT {
			args = append(args, "-XX:TieredStopAtLevel=1")
		}
		args = append(args,
			"-Djava.library.path="+filepath.Join(dir, dynamoLibDir, "DynamoDBLocal_lib"),
			"-Xmx512m",
			"-cp", filepath.Join(dir, "classes")+string(os.PathListSeparator)+classpath(dir),
			"DynamoDBLoopback",
			"-dbPath", e.data.path, "-sharedDb", "-disableTelemetry", "-port", fmt.Sprint(port))
		ddbCmd := exec.Command("java", args...)
		ddbCmd.Dir = dir
		_, err = e.launch(ctx, ddbCmd, "LISTENING INDEXED")
		if err == nil {
			break
		}
		if !errors.Is(err, errPortTaken) || try == bindTries {
			e.Stop()
			return nil, fmt.Errorf("start DynamoDB Local: %w", err)
		}
	}
	e.DynamoDBEndpoint = fmt.Sprintf("http://127.0.0.1:%d", port)
	return e, nil
}

// EndpointsSet reports whether the SDK's endpoint variables already point
// every service triage uses somewhere (AWS_ENDPOINT_URL for LocalStack's
// single port, or one variable per service): then triage dev and the tests
// use those endpoints and start no emulators.
func EndpointsSet(getenv func(string) string) bool {
	if getenv("AWS_ENDPOINT_URL") != "" {
		return true
	}
	for _, k := range []string{"AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_S3"} {
		if getenv(k) == "" {
			return false
		}
	}
	return true
}

// Env returns the SDK's standard endpoint variables for these emulators
// (DynamoDB Local serves the table's stream on its own endpoint), plus the
// static credentials and region they accept.
func (e *Emulators) Env() map[string]string {
	return map[string]string{
		"AWS_ENDPOINT_URL_SQS":              e.SQSEndpoint,
		"AWS_ENDPOINT_URL_S3":               e.SQSEndpoint, // fauxqs serves S3 on the same port
		"AWS_ENDPOINT_URL_DYNAMODB":         e.DynamoDBEndpoint,
		"AWS_ENDPOINT_URL_DYNAMODB_STREAMS": e.DynamoDBEndpoint,
		"AWS_ACCESS_KEY_ID":                 "test",
		"AWS_SECRET_ACCESS_KEY":             "test",
		"AWS_REGION":                        "us-east-1",
	}
}

// launch starts cmd and waits for a stdout line starting with ready.
func (e *Emulators) launch(ctx context.Context, cmd *exec.Cmd, ready string) (string, error) {
	// Pdeathsig ends the emulator if the process that started it dies, so a
	// killed test run leaves nothing behind.
	// Setpgid keeps them out of the terminal's process group: Ctrl-C goes
	// to triage alone, which drains its running tasks while the emulators
	// still answer, and then stops them itself.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	stderr := &limitedWriter{n: 8 << 10}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return "", err
	}
	e.procs = append(e.procs, cmd)
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if l := sc.Text(); strings.HasPrefix(l, ready) {
				lines <- l
				break
			}
		}
		close(lines)
		io.Copy(io.Discard, stdout) //nolint:errcheck // drain so the child never blocks
	}()
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	select {
	case l, ok := <-lines:
		if !ok {
			// stdout closed: the process is exiting. Wait for it (a few
			// seconds at most), which also waits for its stderr to be
			// copied, before reading stderr.
			exited := make(chan struct{})
			go func() { _ = cmd.Wait(); close(exited) }()
			select {
			case <-exited:
				e.procs = e.procs[:len(e.procs)-1] // nothing left for Stop to end
			case <-time.After(5 * time.Second):
			}
			err := errExited
			if strings.Contains(stderr.String(), "Address already in use") {
				err = errPortTaken
			}
			return "", fmt.Errorf("%s %w: %s", cmd.Path, err, stderr.String())
		}
		return l, nil
	case <-ctx.Done():
		return "", fmt.Errorf("%s not ready: %w: %s", cmd.Path, ctx.Err(), stderr.String())
	}
}

// DataDir is DynamoDB Local's database folder ("" before Start made it).
func (e *Emulators) DataDir() string {
	if e.data == nil {
		return ""
	}
	return e.data.path
}

// Stop ends the emulators (SIGTERM, then SIGKILL after 5 s) and removes
// DynamoDB Local's database folder.
func (e *Emulators) Stop() {
	e.once.Do(func() {
		defer e.data.remove()
		for _, c := range e.procs {
			if c.Process == nil {
				continue
			}
			_ = c.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = c.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				_ = c.Process.Kill()
				<-done
			}
		}
	})
}

// limitedWriter keeps the first n bytes written to it; safe to read while
// a process's output is still being copied in.
type limitedWriter struct {
	mu sync.Mutex
	b  strings.Builder
	n  int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n > 0 {
		k := min(len(p), l.n)
		l.n -= k
		l.b.Write(p[:k])
	}
	return len(p), nil
}

// String is what was kept so far.
func (l *limitedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var (
	errNoPort    = errors.New("no free loopback port")
	errExited    = errors.New("exited before it was ready")
	errPortTaken = errors.New("exited before it was ready: its port was taken")
)

// bindTries is how many ports Start offers DynamoDB Local before it gives
// up; each try that fails on a taken port costs about a second.
const bindTries = 5

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("%w: %v", errNoPort, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
