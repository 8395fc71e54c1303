package enqueue_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/api"
	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/app/apiapp"
	"github.com/triagehq/triage/internal/app/consumerapp"
	"github.com/triagehq/triage/internal/auth"
	"github.com/triagehq/triage/internal/deadletter"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/enqueue"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/handler/demo"
	"github.com/triagehq/triage/internal/handler/ledger"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triageconfig"
	"github.com/triagehq/triage/triagetype"
)

// The crash tests run the real API in a child process (this test binary,
// re-executed) whose store hangs before its (N+1)th record write, after
// the messages went out; the parent kills it there with SIGKILL.
const (
	childAPIEnv     = "TRIAGE_TEST_CHILD_API"
	childCreatesEnv = "TRIAGE_TEST_CHILD_CREATES"
	crashToken      = "crash-test-token"
)

func runChildAPI() {
	fail := func(err error) { fmt.Fprintln(os.Stderr, err); os.Exit(2) }
	cfg, err := triageconfig.FromEnv(os.Getenv)
	if err != nil {
		fail(err)
	}
	a, err := app.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		fail(err)
	}
	n, _ := strconv.Atoi(os.Getenv(childCreatesEnv))
	enq := enqueue.New(&hangingStore{Store: a.Store, left: n}, a.Queues)
	toks, _ := auth.Parse("")
	toks.Add(crashToken, auth.Admin)
	srv := api.New(api.Deps{Store: a.Store, Enqueuer: enq, Queues: a.Queues, Controls: a.Controls, DLQ: deadletter.New(a.Queues, a.Store, enq), Tokens: toks}, api.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail(err)
	}
	fmt.Println("LISTENING", ln.Addr())
	fail(http.Serve(ln, srv))
}

// hangingStore lets `left` records be written, then hangs the next write
// forever and, once the allowed writes (which a batch makes side by side)
// have all landed, says so on stdout: the moment after the send and
// before the record that the parent kills the process in.
type hangingStore struct {
	*store.Store
	mu      sync.Mutex
	left    int
	written sync.WaitGroup
}

func (h *hangingStore) Create(ctx context.Context, t *task.Task) (*task.Task, bool, error) {
	h.mu.Lock()
	if h.left == 0 {
		h.mu.Unlock()
		h.written.Wait()
		fmt.Println("HANGING", t.ID)
		select {}
	}
	h.left--
	h.written.Add(1)
	h.mu.Unlock()
	defer h.written.Done()
	return h.Store.Create(ctx, t)
}

// crashSubmit starts the child API allowing `creates` record writes, POSTs
// body to path, and SIGKILLs the child once it hangs before a record
// write. The request gets no answer.
func crashSubmit(t *testing.T, env *stacktest.Env, creates int, path, body string) {
	t.Helper()
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childAPIEnv+"=1", childCreatesEnv+"="+strconv.Itoa(creates), "TRIAGE_PREFIX="+env.Prefix)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	child.Stderr = &stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func(prefix string) string {
		select {
		case l, ok := <-lines:
			if !ok || !strings.HasPrefix(l, prefix) {
				t.Fatalf("child said %q (want %s...); stderr: %s", l, prefix, stderr.String())
			}
			return strings.TrimPrefix(l, prefix)
		case <-time.After(60 * time.Second):
			t.Fatalf("child never said %s; stderr: %s", prefix, stderr.String())
		}
		return ""
	}
	addr := next("LISTENING ")
	answered := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+crashToken)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			err = fmt.Errorf("the request was answered %s", resp.Status)
		}
		answered <- err
	}()
	next("HANGING ")
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	if err := <-answered; err == nil || strings.Contains(err.Error(), "answered") {
		t.Fatalf("the killed submit: %v; want no answer", err)
	}
}

// post sends body to the in-process API and decodes the answer into v.
func post(t *testing.T, url, body string, wantStatus int, v any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+crashToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != wantStatus {
		t.Fatalf("POST %s: %s %s", url, resp.Status, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

// After a crash between the message send and the record write, nothing
// accepted is lost and nothing runs twice: the re-submit (same idempotency
// keys) gets the tasks that were recorded and creates the rest, every task
// completes exactly once, and each message the crash orphaned goes to the
// DLQ with a reason instead of running.
func TestKillBetweenSendAndRecord(t *testing.T) {
	tests := []struct {
		name    string
		path    string
		tasks   int
		creates int // records written before the crash
	}{
		{name: "single submit", path: "/api/v1/tasks", tasks: 1, creates: 0},
		{name: "batch of 20, killed after 7 records", path: "/api/v1/tasks/batch", tasks: 20, creates: 7},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := stacktest.New(t)
			a := env.App(t, nil)
			var reqs []string
			for i := range tc.tasks {
				reqs = append(reqs, fmt.Sprintf(`{"type":"echo","priority":"high","payload":{"n":%d},"idempotency_key":"crash-%d"}`, i, i))
			}
			body := reqs[0]
			if tc.tasks > 1 {
				body = `{"tasks":[` + strings.Join(reqs, ",") + `]}`
			}
			crashSubmit(t, env, tc.creates, tc.path, body)

			toks, _ := auth.Parse("")
			toks.Add(crashToken, auth.Admin)
			srv := httptest.NewServer(apiapp.Handler(a, toks, api.Options{}))
			t.Cleanup(srv.Close)
			var ids []string
			created := 0
			if tc.tasks == 1 {
				var tk task.Task
				post(t, srv.URL+tc.path, body, http.StatusCreated, &tk)
				ids, created = []string{tk.ID}, 1
			} else {
				var res struct{ Results []api.BatchItem }
				post(t, srv.URL+tc.path, body, http.StatusOK, &res)
				for _, it := range res.Results {
					if it.Task == nil || (it.Status != http.StatusCreated && it.Status != http.StatusOK) {
						t.Fatalf("item %d: %+v", it.Index, it)
					}
					if it.Status == http.StatusCreated {
						created++
					}
					ids = append(ids, it.Task.ID)
				}
			}
			if want := tc.tasks - tc.creates; created != want {
				t.Fatalf("re-submit created %d tasks, want %d (the %d recorded before the crash come back as they are)", created, want, tc.creates)
			}

			l := ledger.New(handler.Func(demo.Echo))
			reg := handler.NewRegistry()
			reg.Register("echo", l)
			c := consumerapp.New(a, reg, dispatch.Options{PollWait: time.Second, Lease: 5 * time.Second, OrphanAfter: 2 * time.Second}, dispatch.Deps{})
			ctx, cancel := context.WithCancel(context.Background())
			stopped := make(chan struct{})
			go func() { _ = c.Run(ctx); close(stopped) }()
			t.Cleanup(func() { cancel(); <-stopped })
			for _, id := range ids {
				stacktest.WaitStatus(t, a.Store, id, triagetype.Completed, 30*time.Second)
			}
			orphans := tc.tasks - tc.creates
			deadline := time.Now().Add(30 * time.Second)
			for c.Counts().NoTask < int64(orphans) && time.Now().Before(deadline) {
				time.Sleep(200 * time.Millisecond)
			}
			if got := c.Counts(); got.NoTask != int64(orphans) {
				t.Fatalf("counts %+v: want %d orphaned messages dead-lettered", got, orphans)
			}
			runs := l.Runs()
			if len(runs) != tc.tasks {
				t.Fatalf("%d tasks ran, want %d", len(runs), tc.tasks)
			}
			for _, id := range ids {
				if runs[id] != 1 {
					t.Fatalf("task %s ran %d times", id, runs[id])
				}
			}
			msgs, err := a.Queues.ReceiveDLQ(context.Background(), triagetype.High, 10, time.Second, time.Minute)
			if err != nil || len(msgs) == 0 || !strings.Contains(msgs[0].Reason, "never recorded the task") {
				t.Fatalf("DLQ: %+v, %v; want the orphaned messages with their reason", msgs, err)
			}
		})
	}
}
