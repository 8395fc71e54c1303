package waiting_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/app/consumerapp"
	"github.com/triagehq/triage/internal/control"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/metrics"
	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// The tests below take a key's concurrency slot the way a consumer does
// (Decide under the claim's token, the claim, Started, Release) from two
// processes' controls on one table, and look at the slot item itself.

// concurrencyLimit sets a concurrency limit of n on key (of type typ, or
// of every type when typ is "").
func concurrencyLimit(t *testing.T, c *control.Controls, typ, key string, n int) {
	t.Helper()
	if _, err := c.SetKeyControls(context.Background(), typ, key, nil, nil, ptr(n)); err != nil {
		t.Fatal(err)
	}
}

// slotTask submits one task of key with a timeout of secs and returns it
// as recorded.
func slotTask(t *testing.T, a *app.App, key string, secs int) *task.Task {
	t.Helper()
	r := task.Request{Type: "work", Key: key, TimeoutSeconds: &secs}
	tk := r.NewTask(time.Now().UTC(), 15*time.Minute)
	res := a.Enqueuer.SubmitBatch(context.Background(), []*task.Task{tk})
	if res[0].Err != nil {
		t.Fatalf("submit: %v", res[0].Err)
	}
	got, err := a.Store.Get(context.Background(), tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// decide asks c whether tk's next run may start, as a consumer does
// before its claim: under the token the claim will write.
func decide(t *testing.T, c *control.Controls, tk *task.Task) (control.Decision, string) {
	t.Helper()
	tc := *tk
	tc.ProgressToken = task.NewProgressToken()
	d, err := c.Decide(context.Background(), &tc)
	if err != nil {
		t.Fatal(err)
	}
	return d, tc.ProgressToken
}

// claimRun writes tk's claim under token, as the consumer's claim does.
func claimRun(t *testing.T, a *app.App, tk *task.Task, token string) *task.Task {
	t.Helper()
	now := time.Now().UTC()
	got, err := a.Store.Transition(context.Background(), tk, triagetype.Executing, func(n *task.Task) {
		n.Attempts++
		n.WorkerID = "gone"
		until := now.Add(time.Duration(tk.TimeoutSeconds) * time.Second)
		n.LeaseUntil, n.StartedAt = &until, &now
		n.ProgressToken = token
	})
	if err != nil {
		t.Fatalf("claim %s: %v", tk.ID, err)
	}
	return got
}

// slotHolder reads the holder named by slot item pk ("" when none).
func slotHolder(t *testing.T, a *app.App, pk string) string {
	t.Helper()
	out, err := a.DynamoDB.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(a.Store.Table()), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{spec.AttrPK: &types.AttributeValueMemberS{Value: pk}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := out.Item["holder"].(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

// TestSlotPassesOnWithoutAWrite: with a key limit of 1, another process
// is refused while the holder's claim is on its way and while it runs,
// and is admitted as soon as the holder's record says the run ended,
// which its end did not write to the slot. A run that never started
// writes its slot free.
func TestSlotPassesOnWithoutAWrite(t *testing.T) {
	env := stacktest.New(t)
	a1, a2 := env.App(t, nil), env.App(t, nil)
	ctx := context.Background()
	concurrencyLimit(t, a1.Controls, "", "solo", 1)
	const slot = "CONC#key#solo#0"
	x, y := slotTask(t, a1, "solo", 60), slotTask(t, a1, "solo", 60)

	d1, token := decide(t, a1.Controls, x)
	if d1.Release == nil || d1.Started == nil {
		t.Fatalf("first task refused (%s) with the key's slot free", d1.Why)
	}
	if d, _ := decide(t, a2.Controls, y); d.Release != nil || d.Why != metrics.PutOffConcurrency {
		t.Fatalf("another process was admitted (%q) while the holder's claim was on its way", d.Why)
	}
	running := claimRun(t, a1, x, token)
	d1.Started()
	if d, _ := decide(t, a2.Controls, y); d.Release != nil {
		t.Fatal("another process was admitted while the holder ran")
	}
	if _, err := a1.Store.Transition(ctx, running, triagetype.Completed, func(n *task.Task) {
		now := time.Now().UTC()
		n.CompletedAt = &now
	}); err != nil {
		t.Fatal(err)
	}
	d1.Release()
	if h := slotHolder(t, a1, slot); h != x.ID {
		t.Fatalf("after the run's end the slot names %q, want %s still (the end writes nothing)", h, x.ID)
	}
	d2, _ := decide(t, a2.Controls, y)
	if d2.Release == nil {
		t.Fatalf("another process was refused (%s) after the holder completed", d2.Why)
	}
	if h := slotHolder(t, a1, slot); h != y.ID {
		t.Fatalf("the slot names %q after the takeover, want %s", h, y.ID)
	}
	// y's claim is never written (lost to another consumer, say): its
	// release writes the slot free, and the next task may start at once.
	d2.Release()
	if h := slotHolder(t, a1, slot); h != "" {
		t.Fatalf("a run that never started left the slot to %q", h)
	}
	if d, _ := decide(t, a1.Controls, y); d.Release == nil {
		t.Fatalf("refused (%s) after the slot was written free", d.Why)
	}
}

// TestAbandonedRunsSlotReturnsAfterItsLease: a run whose consumer died
// (claimed, never ended, nothing released: what a SIGKILL leaves) holds
// its key's slot until the slot's lease ends (the task's timeout, 1 s
// here, plus 30 s), then another process takes it.
func TestAbandonedRunsSlotReturnsAfterItsLease(t *testing.T) {
	env := stacktest.New(t)
	a1, a2 := env.App(t, nil), env.App(t, nil)
	concurrencyLimit(t, a1.Controls, "", "solo", 1)
	x, y := slotTask(t, a1, "solo", 1), slotTask(t, a1, "solo", 1)
	taken := time.Now()
	d1, token := decide(t, a1.Controls, x)
	if d1.Release == nil {
		t.Fatalf("first task refused (%s)", d1.Why)
	}
	claimRun(t, a1, x, token)
	d1.Started() // and then the process is gone: no end, no release
	lease := 31 * time.Second
	var admitted time.Time
	for deadline := taken.Add(lease + 20*time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
		before := time.Now()
		if d, _ := decide(t, a2.Controls, y); d.Release != nil {
			admitted = before
			break
		}
	}
	switch {
	case admitted.IsZero():
		t.Fatalf("the abandoned slot did not come back within its lease (%v) + 20 s", lease)
	case admitted.Sub(taken) < lease-time.Second:
		t.Fatalf("another process took the slot %v after it was taken, before its lease of %v ran out, while its run was executing", admitted.Sub(taken), lease)
	}
	t.Logf("abandoned slot taken over %.1f s after it was taken (lease %v)", time.Since(taken).Seconds(), lease)
}

// TestNextKeyedTaskStartsPromptly: with a key limit of 1 and two
// consumers, a finished task's slot goes to the next task at once,
// whichever consumer receives it: never two running, and each start
// follows the previous end by well under a slot lease (the task's
// timeout of 300 s plus 30 s).
func TestNextKeyedTaskStartsPromptly(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	concurrencyLimit(t, a.Controls, "", "solo", 1)
	type span struct {
		consumer   int
		start, end time.Time
	}
	var mu sync.Mutex
	var spans []span
	for i := range 2 {
		ca := env.App(t, nil)
		h := handler.Func(func(ctx context.Context, req handler.Request) (json.RawMessage, error) {
			s := span{consumer: i, start: time.Now()}
			time.Sleep(300 * time.Millisecond)
			s.end = time.Now()
			mu.Lock()
			spans = append(spans, s)
			mu.Unlock()
			return nil, nil
		})
		opt := stacktest.FastDispatch()
		opt.Concurrency = 4
		stacktest.Run(t, consumerapp.New(ca, stacktest.Registry("work", h), opt, dispatch.Deps{WorkerID: fmt.Sprintf("consumer-%d", i)}))
	}
	const n = 16
	ids := submitKeyed(t, a, "work", "solo", n)
	for _, id := range ids {
		stacktest.WaitStatus(t, a.Store, id, triagetype.Completed, 3*time.Minute)
	}
	mu.Lock()
	defer mu.Unlock()
	sort.Slice(spans, func(i, j int) bool { return spans[i].start.Before(spans[j].start) })
	var gaps []time.Duration
	per := [2]int{}
	for i, s := range spans {
		per[s.consumer]++
		if i == 0 {
			continue
		}
		prev := spans[i-1]
		if s.start.Before(prev.end) {
			t.Errorf("two tasks of the key ran at once (limit 1): %v to %v and %v to %v", prev.start, prev.end, s.start, s.end)
		}
		gaps = append(gaps, s.start.Sub(prev.end))
	}
	sort.Slice(gaps, func(i, j int) bool { return gaps[i] < gaps[j] })
	t.Logf("%d runs (consumer 0: %d, consumer 1: %d); end to next start: median %v, max %v", len(spans), per[0], per[1], gaps[len(gaps)/2].Round(time.Millisecond), gaps[len(gaps)-1].Round(time.Millisecond))
	if len(spans) != n {
		t.Fatalf("%d runs of %d tasks", len(spans), n)
	}
	if per[0] == 0 || per[1] == 0 {
		t.Errorf("one consumer ran every task (%v): the slot never passed between processes", per)
	}
	// A slot left to its lease would keep the next start 330 s away.
	if max := gaps[len(gaps)-1]; max > 5*time.Second {
		t.Errorf("a start came %v after the previous end", max)
	}
}

// TestFinishedRunsSlotsPassOnInEveryScope: a run holds a slot of its
// key's limit and one of its (type, key) limit under one token; once it
// completes, the next task of that type and key, in another process, is
// admitted and takes both over (taking over the first must not mark the
// run's other slot as taken already).
func TestFinishedRunsSlotsPassOnInEveryScope(t *testing.T) {
	env := stacktest.New(t)
	a1, a2 := env.App(t, nil), env.App(t, nil)
	ctx := context.Background()
	concurrencyLimit(t, a1.Controls, "", "both", 1)
	concurrencyLimit(t, a1.Controls, "work", "both", 1)
	ts := []*task.Task{slotTask(t, a1, "both", 60), slotTask(t, a1, "both", 60), slotTask(t, a1, "both", 60)}
	// Each task in turn runs and completes, alternating processes; each
	// is admitted only once the one before completed.
	for i, tk := range ts {
		c := []*control.Controls{a1.Controls, a2.Controls}[i%2]
		d, token := decide(t, c, tk)
		if d.Release == nil {
			t.Fatalf("task %d refused (%s, scope %s) after the one before completed", i, d.Why, d.Scope)
		}
		running := claimRun(t, a1, tk, token)
		d.Started()
		for _, pk := range []string{"CONC#key#both#0", "CONC#tk#work#both#0"} {
			if h := slotHolder(t, a1, pk); h != tk.ID {
				t.Fatalf("task %d runs, and slot %s names %q", i, pk, h)
			}
		}
		if _, err := a1.Store.Transition(ctx, running, triagetype.Completed, func(n *task.Task) {
			now := time.Now().UTC()
			n.CompletedAt = &now
		}); err != nil {
			t.Fatal(err)
		}
		d.Release()
	}
}
