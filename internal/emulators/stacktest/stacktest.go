// Package stacktest gives integration tests a real local AWS stack.
//
// Main starts the emulators once per test binary, unless the SDK's
// endpoint variables already point somewhere, LocalStack say (see
// emulators.EndpointsSet): then the tests use that instead, unchanged. New gives each test its own table and queues
// under a unique prefix, so tests never see each other's messages.
package stacktest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/blob"
	"github.com/triagehq/triage/internal/emulators"
	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triageconfig"
	"github.com/triagehq/triage/triagetype"
)

// Main runs a test binary's tests against the local stack and exits.
func Main(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if !emulators.EndpointsSet(os.Getenv) {
		root, err := emulators.FindRoot(".")
		if err != nil {
			fmt.Fprintln(os.Stderr, "stacktest:", err)
			return 1
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		emu, err := emulators.Start(ctx, root)
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, "stacktest: start emulators:", err)
			return 1
		}
		defer emu.Stop()
		// The process environment is how the SDK finds endpoints; setting it
		// here, before any test runs, is the same as a user exporting it.
		for k, v := range emu.Env() {
			os.Setenv(k, v)
		}
	}
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1"} {
		if os.Getenv(k) == "" {
			os.Setenv(k, v)
		}
	}
	return m.Run()
}

// Env is one test's bootstrapped resources.
type Env struct {
	Prefix    string
	AWS       aws.Config
	DynamoDB  *dynamodb.Client
	SQS       *sqs.Client
	S3        *s3.Client
	Spec      spec.Spec
	QueueURLs map[triagetype.Priority]string
	DLQURLs   map[triagetype.Priority]string
}

// New bootstraps a fresh table and queues for t.
func New(t testing.TB) *Env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		t.Fatalf("load AWS config: %v", err)
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	prefix := "t" + hex.EncodeToString(b)
	e := &Env{
		Prefix:   prefix,
		AWS:      cfg,
		DynamoDB: store.NewClient(cfg),
		SQS:      sqs.NewFromConfig(cfg),
		S3:       blob.NewClient(cfg),
		Spec:     spec.New(prefix),
	}
	res, err := emulators.Bootstrap(ctx, e.DynamoDB, e.SQS, e.S3, e.Spec)
	if err != nil {
		t.Fatalf("bootstrap: %v", err)
	}
	e.QueueURLs, e.DLQURLs = res.QueueURLs, res.DLQURLs
	return e
}

// Getenv returns a getenv for triageconfig.FromEnv that names this env's
// resources (through TRIAGE_PREFIX) and falls back to extra, then to the
// process environment.
func (e *Env) Getenv(extra map[string]string) func(string) string {
	return func(k string) string {
		if v, ok := extra[k]; ok {
			return v
		}
		if k == triageconfig.EnvPrefix {
			return e.Prefix
		}
		return os.Getenv(k)
	}
}

// App assembles a full app.App on this env's resources. extra sets
// configuration variables (triageconfig.Env*) for this app only.
func (e *Env) App(t testing.TB, extra map[string]string) *app.App {
	t.Helper()
	cfg, err := triageconfig.FromEnv(e.Getenv(extra))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, err := app.New(ctx, cfg, testLogger(t))
	if err != nil {
		t.Fatalf("app: %v", err)
	}
	return a
}

// testLogger writes JSON logs to the test log when TRIAGE_TEST_LOG is set,
// and nowhere otherwise.
func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("TRIAGE_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewJSONHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// TaskGetter reads a task (the store).
type TaskGetter interface {
	Get(ctx context.Context, id string) (*task.Task, error)
}

// WaitStatus polls until task id reaches status want, and fails t after timeout.
func WaitStatus(t testing.TB, s TaskGetter, id string, want triagetype.Status, timeout time.Duration) *task.Task {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last *task.Task
	for time.Now().Before(deadline) {
		tk, err := s.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if last = tk; tk.Status == want {
			return tk
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("task %s is %s after %v, want %s (error %+v)", id, last.Status, timeout, want, last.Error)
	return nil
}

// StatusCounts reads the tasks with these ids and counts them by status.
func StatusCounts(t testing.TB, s *store.Store, ids []string) map[triagetype.Status]int {
	t.Helper()
	ts, err := s.GetMany(context.Background(), ids)
	if err != nil {
		t.Fatal(err)
	}
	out := map[triagetype.Status]int{}
	for _, tk := range ts {
		out[tk.Status]++
	}
	return out
}

// RunCounters keeps a's /stats counters from the table's stream, as the
// Lambda trigger does in AWS, until the test ends.
func RunCounters(t testing.TB, a *app.App) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = a.CounterPoller().Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}
