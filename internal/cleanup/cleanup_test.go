package cleanup_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/app/promoterapp"
	"github.com/triagehq/triage/internal/cleanup"
	"github.com/triagehq/triage/internal/deadletter"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/enqueue"
	"github.com/triagehq/triage/internal/promote"
	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triageconfig"
	"github.com/triagehq/triage/triagetype"
)

// The crash test runs the runner in a child process (this test binary,
// re-executed) and SIGKILLs it mid-job.
const childEnv = "TRIAGE_TEST_CLEANUP_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		runChild()
		return
	}
	stacktest.Main(m)
}

// runChild runs the promoter, whose cleanup runner has a short lease so a
// successor takes over soon after a kill, until its job is done.
func runChild() {
	fail := func(err error) { fmt.Fprintln(os.Stderr, err); os.Exit(2) }
	cfg, err := triageconfig.FromEnv(os.Getenv)
	if err != nil {
		fail(err)
	}
	ctx := context.Background()
	a, err := app.New(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		fail(err)
	}
	r := cleanup.NewRunner(a.Store, cleanup.Options{
		Owner: "child-" + strconv.Itoa(os.Getpid()), Lease: 3 * time.Second,
		Copies: deadletter.New(a.Queues, a.Store, a.Enqueuer),
	})
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		for ctx.Err() == nil {
			if j, err := a.Store.ActiveCleanup(ctx); err == nil && j == nil {
				cancel() // done
			}
			time.Sleep(500 * time.Millisecond)
		}
	}()
	_ = promoterapp.New(a, promote.Options{Cleanup: r}).Run(ctx, time.Second)
}

// finished is a task that finished at done in status s (with an attempt,
// as a consumer leaves one).
func finished(s triagetype.Status, created, done time.Time) *task.Task {
	r := task.Request{Type: "echo", Priority: "low"}
	t := r.NewTask(created, 15*time.Minute)
	t.Status, t.Attempts, t.Version, t.DispatchVersion = s, 1, 3, 1
	t.StartedAt, t.CompletedAt, t.WaitingSince = &created, &done, done
	return t
}

// fill writes ts with BatchWriteItem, each item built by the store's own
// builder: the test's setup, not a submit's path.
func fill(t *testing.T, env *stacktest.Env, a *app.App, ts []*task.Task) {
	t.Helper()
	ctx := context.Background()
	// DynamoDB Local slows every write to a table with a stream by the
	// stream records it holds; the fill needs none.
	if _, err := env.DynamoDB.UpdateTable(ctx, &dynamodb.UpdateTableInput{
		TableName: aws.String(env.Spec.Table.Name), StreamSpecification: &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(false)},
	}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for start := w * 25; start < len(ts); start += 8 * 25 {
				var reqs []ddbtypes.WriteRequest
				for _, tk := range ts[start:min(start+25, len(ts))] {
					item, err := a.Store.Item(tk)
					if err != nil {
						errs <- err
						return
					}
					reqs = append(reqs, ddbtypes.WriteRequest{PutRequest: &ddbtypes.PutRequest{Item: item}})
				}
				items := map[string][]ddbtypes.WriteRequest{env.Spec.Table.Name: reqs}
				for try := 0; len(items) > 0 && len(items[env.Spec.Table.Name]) > 0; try++ {
					if try > 20 {
						errs <- errors.New("items left unprocessed")
						return
					}
					out, err := env.DynamoDB.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: items})
					if err != nil {
						errs <- err
						return
					}
					items = out.UnprocessedItems
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// taskCounts counts the task items left in the table by status and by
// whether they finished before cut (a test's scan, not the product's).
func taskCounts(t *testing.T, env *stacktest.Env, a *app.App, cut time.Time) (old, kept int) {
	t.Helper()
	p := dynamodb.NewScanPaginator(env.DynamoDB, &dynamodb.ScanInput{TableName: aws.String(env.Spec.Table.Name)})
	var ids []string
	for p.HasMorePages() {
		out, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range out.Items {
			pk, _ := it[spec.AttrPK].(*ddbtypes.AttributeValueMemberS)
			if pk != nil && len(pk.Value) > len(spec.TaskKeyPrefix) && pk.Value[:len(spec.TaskKeyPrefix)] == spec.TaskKeyPrefix {
				ids = append(ids, pk.Value[len(spec.TaskKeyPrefix):])
			}
		}
	}
	ts, err := a.Store.GetMany(context.Background(), ids)
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range ts {
		if tk.Status.Terminal() && tk.CompletedAt != nil && tk.CompletedAt.Before(cut) {
			old++
		} else {
			kept++
		}
	}
	return old, kept
}

// A cleanup of 2,000 finished tasks (TRIAGE_TEST_CLEANUP_TASKS sets it;
// 5,000 passed too) is a job: Start answers at once; the
// promoter in another process works through it and is SIGKILLed midway;
// a second promoter takes over once the first's lease has passed, resumes
// from the saved cursor and finishes. No task finished before the cut is
// left (nor a DLQ copy of a dead one); every task that finished after it,
// or has not finished, is.
func TestCleanupJobSurvivesKill(t *testing.T) {
	n := 2000
	if v, err := strconv.Atoi(os.Getenv("TRIAGE_TEST_CLEANUP_TASKS")); err == nil && v > 0 {
		n = v
	}
	env := stacktest.New(t)
	a := env.App(t, nil)
	ctx := context.Background()
	now := time.Now().UTC()
	cut := now.Add(-30 * time.Minute)
	var ts, dead []*task.Task
	for i := range n {
		s := triagetype.Completed
		switch i % 10 {
		case 1:
			s = triagetype.DeadLetter
		case 2:
			s = triagetype.Cancelled
		}
		created := now.Add(-2*time.Hour + time.Duration(i)*time.Millisecond)
		tk := finished(s, created, created.Add(time.Second))
		ts = append(ts, tk)
		if s == triagetype.DeadLetter && len(dead) < 20 {
			dead = append(dead, tk)
		}
	}
	const late, waiting = 100, 50
	for i := range late { // finished after the cut
		created := now.Add(-time.Hour + time.Duration(i)*time.Millisecond)
		ts = append(ts, finished(triagetype.Completed, created, now.Add(-time.Minute)))
	}
	for i := range waiting { // created before the cut, not finished
		r := task.Request{Type: "echo", Priority: "low"}
		ts = append(ts, r.NewTask(now.Add(-2*time.Hour-time.Duration(i)*time.Millisecond), 15*time.Minute))
	}
	fill(t, env, a, ts)
	for _, tk := range dead { // their DLQ copies, as a consumer leaves them
		if err := a.Queues.SendDLQ(ctx, tk.EffectivePriority, enqueue.Body(tk, tk.Version), "test: failed"); err != nil {
			t.Fatal(err)
		}
	}

	started := time.Now()
	job, err := cleanup.Start(ctx, a.Store, cut)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Start answered in %v (job %s)", time.Since(started), job.ID)
	var running *store.CleanupRunningError
	if _, err := cleanup.Start(ctx, a.Store, now); !errors.As(err, &running) || running.Job.ID != job.ID || !errors.Is(err, store.ErrCleanupRunning) {
		t.Fatalf("a second Start: %v; want ErrCleanupRunning naming %s", err, job.ID)
	}

	child := func() *exec.Cmd {
		c := exec.Command(os.Args[0], "-test.run=^$")
		c.Env = append(os.Environ(), childEnv+"=1", triageconfig.EnvPrefix+"="+env.Prefix)
		c.Stderr = os.Stderr
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
		return c
	}
	read := func() *store.CleanupJob {
		j, err := a.Store.CleanupJob(ctx, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	first := child()
	deadline := time.Now().Add(5 * time.Minute)
	for read().Deleted < int64(n/4) {
		if time.Now().After(deadline) {
			t.Fatalf("the first runner deleted %d of %d in 5 min", read().Deleted, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	atKill := read()
	if atKill.State == store.CleanupDone {
		t.Fatalf("the job was done before the kill (%d deleted); the test needs more tasks", atKill.Deleted)
	}
	t.Logf("killed the first runner at %d deleted (cursor %+v)", atKill.Deleted, atKill.Cursor)
	second := child()
	var j *store.CleanupJob
	for j = read(); j.State != store.CleanupDone; j = read() {
		if time.Now().After(deadline) {
			t.Fatalf("the job is %s with %d deleted after 5 min", j.State, j.Deleted)
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = second.Wait()
	took := time.Since(started)
	t.Logf("done: %d deleted, %d read, %d page errors, in %v (%.0f a second, the takeover's lease wait included)",
		j.Deleted, j.Read, j.Errors, took, float64(j.Deleted)/took.Seconds())
	// A page cut short by the kill may have deleted tasks it never counted:
	// up to a page (the child's runner reads cleanup.DefaultPage entries a
	// page; 106 were uncounted once in CI).
	if j.Deleted > int64(n) || j.Deleted < int64(n-cleanup.DefaultPage) {
		t.Fatalf("job counts %d deleted; want %d (less at most one uncounted page of %d)", j.Deleted, n, cleanup.DefaultPage)
	}
	old, kept := taskCounts(t, env, a, cut)
	if old != 0 || kept != late+waiting {
		t.Fatalf("left %d tasks finished before the cut and %d others; want 0 and %d", old, kept, late+waiting)
	}
	for _, p := range triagetype.Priorities() {
		if d, err := a.Queues.Depth(ctx, p); err != nil || d.DLQ != 0 {
			t.Fatalf("%s DLQ %+v %v; want the dead tasks' copies gone", p, d, err)
		}
	}
	if again, err := a.Store.ActiveCleanup(ctx); err != nil || again != nil {
		t.Fatalf("active cleanup after done: %+v %v; want none", again, err)
	}
	if _, err := cleanup.Start(ctx, a.Store, now); err != nil {
		t.Fatalf("a new cleanup after the first finished: %v", err)
	}
}
