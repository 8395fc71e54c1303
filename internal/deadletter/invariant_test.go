package deadletter_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/triagehq/triage/internal/devserver/devtest"
	"github.com/triagehq/triage/internal/emulators/stacktest"
)

func TestMain(m *testing.M) { stacktest.Main(m) }

// dev is a running `triage dev` on this test's own table and queues.
type dev struct {
	t    *testing.T
	base string
	env  *stacktest.Env
}

const token = "dev-test"

// startDev runs `triage dev` in process on env's resources; it stops when
// the test ends.
func startDev(t *testing.T, env *stacktest.Env) *dev {
	t.Helper()
	base := devtest.Start(t, map[string]string{"TRIAGE_ADDR": "127.0.0.1:0", "TRIAGE_TOKEN": token, "TRIAGE_PREFIX": env.Prefix})
	return &dev{t: t, base: base, env: env}
}

// call sends an API request with the admin token; it decodes the JSON
// answer into out (when not nil) and returns the status.
func (d *dev) call(method, path, body string, out any) int {
	d.t.Helper()
	return devtest.Call(d.t, d.base, token, method, path, body, out)
}

type taskView struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	// CompletedAt changes each time the task dies (the public task has
	// no version).
	CompletedAt string `json:"completed_at"`
}

func (d *dev) get(id string) taskView {
	d.t.Helper()
	var tv taskView
	if code := d.call("GET", "/api/v1/tasks/"+id, "", &tv); code != 200 {
		d.t.Fatalf("GET task %s: %d", id, code)
	}
	return tv
}

// dlqMessages is what the three DLQs hold, visible or not: SQS's own
// count, so a message a reader holds at the moment still counts.
func (d *dev) dlqMessages() int {
	d.t.Helper()
	n := 0
	for _, url := range d.env.DLQURLs {
		out, err := d.env.SQS.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
			QueueUrl: aws.String(url),
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages,
				types.QueueAttributeNameApproximateNumberOfMessagesNotVisible},
		})
		if err != nil {
			d.t.Fatalf("DLQ attributes: %v", err)
		}
		for _, v := range out.Attributes {
			k, _ := strconv.Atoi(v)
			n += k
		}
	}
	return n
}

// settle waits until every task in ids has left the states it passes
// through (none is queued, executing or retrying) and those in moved
// have died again since the completed_at given, then returns how many are dead.
func (d *dev) settle(ids []string, moved map[string]string) int {
	d.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		dead, busy := 0, ""
		for _, id := range ids {
			tv := d.get(id)
			switch {
			case tv.Status == "dead_letter" && (moved[id] == "" || tv.CompletedAt != moved[id]):
				dead++
			case tv.Status == "dead_letter", tv.Status == "queued", tv.Status == "executing", tv.Status == "retrying":
				busy = fmt.Sprintf("%s %s (%s)", id, tv.Status, tv.CompletedAt)
			}
		}
		if busy == "" {
			return dead
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("tasks did not settle in 60 s: %s", busy)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkDepth holds the invariant: once the tasks have settled, the DLQs
// hold exactly as many messages as there are dead tasks, and keep holding
// that many (a second copy would stay: the bug this guards against did
// not correct itself in minutes). /stats, which the dashboard shows, must
// come to agree too.
func (d *dev) checkDepth(step string, dead int) {
	d.t.Helper()
	// A task is recorded dead before its message reaches the DLQ: on a
	// loaded machine the send can trail the record by seconds. Wait for
	// the count to agree, then hold it: an extra copy never goes away.
	deadline := time.Now().Add(20 * time.Second)
	for got := d.dlqMessages(); got != dead; got = d.dlqMessages() {
		if time.Now().After(deadline) {
			d.t.Fatalf("%s: the DLQs hold %d messages for %d dead tasks after 20 s", step, got, dead)
		}
		time.Sleep(250 * time.Millisecond)
	}
	for i := range 6 {
		if got := d.dlqMessages(); got != dead {
			d.t.Fatalf("%s: the DLQs hold %d messages for %d dead tasks (read %d after they agreed)", step, got, dead, i)
		}
		time.Sleep(250 * time.Millisecond)
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		var st struct {
			Queues map[string]struct {
				DLQDepth int `json:"dlq_depth"`
			} `json:"queues"`
			Statuses map[string]int `json:"statuses"`
		}
		d.call("GET", "/api/v1/stats", "", &st)
		depth := 0
		for _, q := range st.Queues {
			depth += q.DLQDepth
		}
		if depth == dead && st.Statuses["dead_letter"] == dead {
			d.t.Logf("%s: %d dead tasks, DLQ depth %d, /stats agrees", step, dead, depth)
			return
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("%s: /stats shows DLQ depth %d and %d dead tasks, want %d and %d", step, depth, st.Statuses["dead_letter"], dead, dead)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// TestDLQHoldsOneMessagePerDeadTask is issue 21's over-count: after a
// retry of one task and a replay of them all, 11 DLQ messages stood for 10
// dead tasks, because a retry left the task's old copy in the DLQ and its
// next failure added a second. It retries, replays, retries again,
// replays two by selection, deletes one, purges one and cleans up the
// rest, and after each step the DLQs hold exactly one message per dead
// task. A cancelled task
// cannot be retried (409).
func TestDLQHoldsOneMessagePerDeadTask(t *testing.T) {
	env := stacktest.New(t)
	d := startDev(t, env)

	var ids []string
	for i, p := range []string{"high", "medium", "low", "low", "medium"} {
		var tv taskView
		body := fmt.Sprintf(`{"type":"fail","priority":%q,"payload":{"times":1000,"permanent":true,"message":"bad input %d"}}`, p, i)
		if code := d.call("POST", "/api/v1/tasks", body, &tv); code != 201 {
			t.Fatalf("submit: %d", code)
		}
		ids = append(ids, tv.ID)
	}
	versions := func() map[string]string {
		m := map[string]string{}
		for _, id := range ids {
			m[id] = d.get(id).CompletedAt
		}
		return m
	}
	dead := d.settle(ids, nil)
	if dead != 5 {
		t.Fatalf("%d of 5 tasks dead", dead)
	}
	d.checkDepth("dead-lettered", 5)

	retry := func(step, id string) {
		t.Helper()
		before := versions()
		if code := d.call("POST", "/api/v1/tasks/"+id+"/retry", "", nil); code != 200 {
			t.Fatalf("%s: retry %s: %d", step, id, code)
		}
		d.checkDepth(step, d.settle(ids, map[string]string{id: before[id]}))
	}
	retry("retry", ids[0])

	before := versions()
	var rr struct{ Replayed, Skipped int }
	if code := d.call("POST", "/api/v1/dlq/replay", `{"type":"fail"}`, &rr); code != 200 || rr.Replayed != 5 {
		t.Fatalf("replay --type fail: %d %+v, want 5 replayed", code, rr)
	}
	d.checkDepth("replay all", d.settle(ids, before))

	retry("retry again", ids[0])
	retry("retry another", ids[2])

	before = versions()
	sel := fmt.Sprintf(`{"task_ids":[%q,%q]}`, ids[1], ids[3])
	if code := d.call("POST", "/api/v1/dlq/replay", sel, &rr); code != 200 || rr.Replayed != 2 {
		t.Fatalf("replay selected: %d %+v, want 2 replayed", code, rr)
	}
	d.checkDepth("replay selected", d.settle(ids, map[string]string{ids[1]: before[ids[1]], ids[3]: before[ids[3]]}))

	if code := d.call("DELETE", "/api/v1/tasks/"+ids[4], "", nil); code != 204 {
		t.Fatalf("delete a dead task: %d", code)
	}
	ids = ids[:4]
	d.checkDepth("delete", d.settle(ids, nil))

	if code := d.call("POST", "/api/v1/dlq/purge", fmt.Sprintf(`{"task_ids":[%q]}`, ids[3]), nil); code != 400 {
		t.Fatalf("purge without confirm: %d, want 400", code)
	}
	var pr struct{ Purged int }
	if code := d.call("POST", "/api/v1/dlq/purge", fmt.Sprintf(`{"task_ids":[%q],"confirm":true}`, ids[3]), &pr); code != 200 || pr.Purged != 1 {
		t.Fatalf("purge one: %d %+v", code, pr)
	}
	if code := d.call("GET", "/api/v1/tasks/"+ids[3], "", nil); code != 404 {
		t.Fatalf("a purged task answers %d, want 404", code)
	}
	ids = ids[:3]
	d.checkDepth("purge", d.settle(ids, nil))

	// A cleanup of finished tasks takes the dead ones' DLQ copies with
	// them (it used to leave them for the next replay: 3 messages for no
	// dead task).
	cut := time.Now().Add(2 * time.Second).UTC().Format(time.RFC3339)
	var cr struct {
		ID      string
		State   string
		Deleted int
	}
	if code := d.call("DELETE", "/api/v1/tasks?older_than="+cut, "", &cr); code != 202 || cr.ID == "" {
		t.Fatalf("cleanup: %d %+v, want 202 with a job", code, cr)
	}
	// The dev server's promoter does the job.
	for deadline := time.Now().Add(2 * time.Minute); cr.State != "done"; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("cleanup %+v not done in 2 min", cr)
		}
		if code := d.call("GET", "/api/v1/cleanups/"+cr.ID, "", &cr); code != 200 {
			t.Fatalf("cleanup status: %d", code)
		}
	}
	if cr.Deleted != len(ids) {
		t.Fatalf("cleanup %+v, want the %d dead tasks deleted", cr, len(ids))
	}
	for _, id := range ids {
		if code := d.call("GET", "/api/v1/tasks/"+id, "", nil); code != 404 {
			t.Fatalf("a cleaned-up task answers %d, want 404", code)
		}
	}
	d.checkDepth("cleanup", 0)

	// A cancelled task is finished, not failed: retry is refused.
	var sleeper taskView
	d.call("POST", "/api/v1/tasks", `{"type":"sleep","payload":{"ms":60000},"delay_seconds":600}`, &sleeper)
	if code := d.call("POST", "/api/v1/tasks/"+sleeper.ID+"/cancel", "", nil); code != 200 {
		t.Fatalf("cancel: %d", code)
	}
	if code := d.call("POST", "/api/v1/tasks/"+sleeper.ID+"/retry", "", nil); code != 409 {
		t.Fatalf("retry of a cancelled task: %d, want 409", code)
	}
}
