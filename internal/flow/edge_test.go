package flow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/flow"
	"github.com/triagehq/triage/internal/promote"
	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// rawItem reads the item with key pk as DynamoDB holds it (nil if none).
func rawItem(t *testing.T, env *stacktest.Env, a *app.App, pk string) map[string]types.AttributeValue {
	t.Helper()
	out, err := env.DynamoDB.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: &a.Config.Table, ConsistentRead: ptr(true),
		Key: map[string]types.AttributeValue{spec.AttrPK: &types.AttributeValueMemberS{Value: pk}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

func ptr[T any](v T) *T { return &v }

func attr(it map[string]types.AttributeValue, k string) string {
	if v, ok := it[k].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// dueKey is the by-due entry of task id: its partition and sort key.
func dueKey(t *testing.T, env *stacktest.Env, a *app.App, id string) (string, string) {
	t.Helper()
	it := rawItem(t, env, a, spec.TaskKeyPrefix+id)
	return attr(it, spec.AttrDuePK), attr(it, spec.AttrDueSK)
}

// finish runs task id to completed through s: through the app's store
// its walk follows; through a store with no OnFinish hook (bare) the
// terminal write lands and no walk follows, as when the writer crashes
// right after it.
func finish(t *testing.T, s *store.Store, id string) *task.Task {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	cur, err := s.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := s.Transition(ctx, cur, triagetype.Executing, func(n *task.Task) { n.Attempts = 1; n.StartedAt = &now })
	if err != nil {
		t.Fatal(err)
	}
	done, err := s.Transition(ctx, ex, triagetype.Completed, func(n *task.Task) { n.CompletedAt = &now; n.Result = json.RawMessage(`1`) })
	if err != nil {
		t.Fatal(err)
	}
	return done
}

// TestEdgeKeyLayoutCrashAndOldLayout: a child of two pending parents is
// found by its first parent through its own waiting entry (no edge item)
// and by its second through an edge item. The first parent completes
// with no walk (a crash) and the second with its walk: the child still
// waits, and the sweep releases it once. Children recorded in the layout
// before edge keys (an edge item per parent, a waiting entry sorted by
// time) are released by a walk and, after a crash, by the sweep.
func TestEdgeKeyLayoutCrashAndOldLayout(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	ctx := context.Background()
	shards := a.Store.Shards()
	bare := store.New(env.DynamoDB, a.Config.Table, store.WithShards(shards))

	P1 := submit(t, a, "P1", "")
	P2 := submit(t, a, "P2", "")
	C := submit(t, a, "C", "", P1.ID, P2.ID)
	pk, sk := dueKey(t, env, a, C.ID)
	if want := fmt.Sprintf("waiting#%d", store.Shard(P1.ID, shards)); pk != want || !strings.HasPrefix(sk, P1.ID+"#") {
		t.Fatalf("child's entry %s / %s, want %s / %s#…", pk, sk, want, P1.ID)
	}
	if it := rawItem(t, env, a, "EDGE#"+P1.ID+"#"+C.ID); it != nil {
		t.Fatalf("an edge item for the first parent: %v", it)
	}
	if it := rawItem(t, env, a, "EDGE#"+P2.ID+"#"+C.ID); it == nil {
		t.Fatal("no edge item for the second parent")
	}

	// Old layout: O waits on P3 (walked) and O2 on P4 (crash), each with
	// an edge item and a time-sorted waiting entry.
	P3 := submit(t, a, "P3", "")
	P4 := submit(t, a, "P4", "")
	old := func(node, parent string) *task.Task {
		r := task.Request{Type: "node", Payload: json.RawMessage(fmt.Sprintf(`{"node":%q}`, node)), After: []string{parent}}
		o := r.NewTask(time.Now().UTC(), 15*time.Minute)
		o.Status, o.DispatchVersion, o.EnqueuedAt = triagetype.Waiting, task.NoMessage, nil
		o.WaitingOn = []string{parent}
		if _, err := bare.MarkParent(ctx, parent); err != nil {
			t.Fatal(err)
		}
		if err := bare.PutEdges(ctx, o.ID, []string{parent}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := bare.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		if pk, sk := dueKey(t, env, a, o.ID); pk != fmt.Sprintf("waiting#%d", store.Shard(o.ID, shards)) || strings.Count(sk, "#") != 1 {
			t.Fatalf("old-layout entry %s / %s", pk, sk)
		}
		return o
	}
	O, O2 := old("O", P3.ID), old("O2", P4.ID)

	finish(t, bare, P1.ID)
	finish(t, bare, P4.ID)
	// P2 and P3 complete with their walks: P3's sends O its release
	// message and writes nothing, so O is still waiting on P3.
	finish(t, a.Store, P2.ID)
	finish(t, a.Store, P3.ID)
	if o, _ := a.Store.Get(ctx, O.ID); o.Status != triagetype.Waiting || len(o.WaitingOn) != 1 || o.WaitingOn[0] != P3.ID {
		t.Fatalf("O is %s waiting on %v after its release message, want waiting on %s", o.Status, o.WaitingOn, P3.ID)
	}
	if c, _ := a.Store.Get(ctx, C.ID); c.Status != triagetype.Waiting || len(c.WaitingOn) != 1 || c.WaitingOn[0] != P1.ID {
		t.Fatalf("C is %s waiting on %v, want waiting on %s alone", c.Status, c.WaitingOn, P1.ID)
	}
	if o2, _ := a.Store.Get(ctx, O2.ID); o2.Status != triagetype.Waiting {
		t.Fatalf("O2 is %s before the sweep, want waiting", o2.Status)
	}

	f := flow.New(a.Store, a.Enqueuer, flow.Options{SweepGrace: time.Nanosecond, ReleaseGrace: time.Nanosecond})
	r, err := f.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// With no release grace the sweep releases O by a write too: its
	// release message is stale then, and O runs once all the same.
	if r.Released != 3 || r.Resolved != 3 {
		t.Fatalf("sweep: %+v, want 3 resolved and 3 released (C, O and O2)", r)
	}
	c := stacktest.WaitStatus(t, a.Store, C.ID, triagetype.Queued, time.Second)
	stacktest.WaitStatus(t, a.Store, O2.ID, triagetype.Queued, time.Second)
	// The released child keeps its entry until its claim.
	if pk2, sk2 := dueKey(t, env, a, C.ID); pk2 != pk || sk2 != sk {
		t.Fatalf("released child's entry %s / %s, want it kept (%s / %s)", pk2, sk2, pk, sk)
	}
	if r, err := f.Sweep(ctx); err != nil || r.Released != 0 || r.Resolved != 0 || len(r.Parked) != 1 || r.Parked[0].ID != C.ID {
		t.Fatalf("second sweep: %+v, %v; want nothing but C parked", r, err)
	}
	p1, _ := a.Store.Get(ctx, P1.ID)
	f.Finished(ctx, p1) // the late walk
	if after, _ := a.Store.Get(ctx, C.ID); after.Version != c.Version || after.DispatchVersion != c.DispatchVersion {
		t.Fatalf("the late walk moved the child again: version %d -> %d", c.Version, after.Version)
	}

	rec := newRecorder()
	consume(t, a, rec)
	for _, id := range []string{C.ID, O.ID, O2.ID} {
		stacktest.WaitStatus(t, a.Store, id, triagetype.Completed, time.Minute)
		if pk, _ := dueKey(t, env, a, id); pk != "" {
			t.Fatalf("completed task %s still has a by-due entry in %s", id, pk)
		}
	}
	time.Sleep(time.Second)
	n := map[string]int{}
	for _, x := range rec.ran() {
		n[x]++
	}
	if n["C"] != 1 || n["O"] != 1 || n["O2"] != 1 {
		t.Fatalf("runs %v, want C, O and O2 once each", n)
	}
}

// TestReleasedChildAges: a low child released by its parent's walk is
// sent its message and stays waiting; once the release grace passed, the
// sweep releases it with a write, and it stays queued in its parent's
// waiting partition (the release changes no index key); the flow sweep
// finds it and the promoter promotes it once its wait passed the aging
// threshold. A claim takes it out of the index, and
// a retry puts it in its own class, not back in the waiting partition.
func TestReleasedChildAges(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	ctx := context.Background()

	P := submit(t, a, "P", "")
	r := task.Request{Type: "node", Priority: triagetype.Low, Payload: json.RawMessage(`{"node":"C"}`), After: []string{P.ID}}
	res := a.Enqueuer.SubmitBatch(ctx, []*task.Task{r.NewTask(time.Now().UTC(), 15*time.Minute)})[0]
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	C := res.Task
	pk, sk := dueKey(t, env, a, C.ID)
	finish(t, a.Store, P.ID)
	// Released by its message alone, it is waiting until claimed, or until
	// the sweep releases it with a write once the release grace passed
	// (no grace here, and no consumer): then queued and parked.
	if c, _ := a.Store.Get(ctx, C.ID); c.Status != triagetype.Waiting {
		t.Fatalf("child released by message is %s, want waiting", c.Status)
	}
	// Below the threshold: nothing. Past it: promoted to medium, once.
	fl := flow.New(a.Store, a.Enqueuer, flow.Options{SweepGrace: time.Nanosecond, ReleaseGrace: time.Nanosecond})
	rep, err := promote.New(a.Store, a.Enqueuer, a.Queues, promote.Options{Flow: fl, LowAfter: time.Hour, MediumAfter: time.Hour}).RunOnce(ctx)
	if err != nil || rep.Promoted[triagetype.Medium] != 0 {
		t.Fatalf("run below the threshold: %+v, %v; want no promotion", rep, err)
	}
	c := stacktest.WaitStatus(t, a.Store, C.ID, triagetype.Queued, 5*time.Second)
	if pk2, sk2 := dueKey(t, env, a, C.ID); pk2 != pk || sk2 != sk || !c.Tracked || !store.Parked(c) {
		t.Fatalf("released child: entry %s / %s (was %s / %s), tracked %v, parked %v", pk2, sk2, pk, sk, c.Tracked, store.Parked(c))
	}
	time.Sleep(20 * time.Millisecond)
	pr := promote.New(a.Store, a.Enqueuer, a.Queues, promote.Options{Flow: fl, LowAfter: 10 * time.Millisecond, MediumAfter: time.Hour})
	if rep, err = pr.RunOnce(ctx); err != nil || rep.Promoted[triagetype.Medium] != 1 {
		t.Fatalf("run past the threshold: %+v, %v; want 1 promoted to medium", rep, err)
	}
	m, err := a.Store.Get(ctx, C.ID)
	if err != nil {
		t.Fatal(err)
	}
	if m.EffectivePriority != triagetype.Medium || len(m.Promotions) != 1 || store.Parked(m) {
		t.Fatalf("promoted child: priority %s, promotions %v, parked %v", m.EffectivePriority, m.Promotions, store.Parked(m))
	}
	if pk3, _ := dueKey(t, env, a, C.ID); pk3 != fmt.Sprintf("queued-medium#%d", store.Shard(C.ID, a.Store.Shards())) {
		t.Fatalf("promoted child's entry in %q, want its aging class", pk3)
	}

	// A parked child claimed, retried, re-queued: out of the index, then in
	// retrying's class, then in its aging class.
	Q := submit(t, a, "Q", "")
	D := submit(t, a, "D", "", Q.ID)
	finish(t, a.Store, Q.ID)
	if _, err := fl.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	d := stacktest.WaitStatus(t, a.Store, D.ID, triagetype.Queued, 5*time.Second)
	cl, err := a.Store.Claim(ctx, store.Claim{ID: d.ID, DispatchVersion: d.DispatchVersion, Type: d.Type, Key: d.Key,
		TimeoutSeconds: d.TimeoutSeconds, WorkerID: "w", LeaseUntil: now.Add(time.Minute), ProgressToken: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	if pk, _ := dueKey(t, env, a, d.ID); pk != "" || cl.EdgeParent != "" {
		t.Fatalf("claimed child: entry in %q, edge parent %q; want neither", pk, cl.EdgeParent)
	}
	at := now.Add(time.Hour)
	rt, err := a.Store.Transition(ctx, cl, triagetype.Retrying, func(n *task.Task) { n.RetryAt = &at; n.DispatchVersion = task.NoMessage })
	if err != nil {
		t.Fatal(err)
	}
	if pk, _ := dueKey(t, env, a, d.ID); !strings.HasPrefix(pk, "retrying#") {
		t.Fatalf("retrying child's entry in %q", pk)
	}
	if _, err := a.Store.Transition(ctx, rt, triagetype.Queued, nil); err != nil {
		t.Fatal(err)
	}
	if pk, _ := dueKey(t, env, a, d.ID); pk != fmt.Sprintf("queued-medium#%d", store.Shard(d.ID, a.Store.Shards())) {
		t.Fatalf("re-queued child's entry in %q, want its aging class", pk)
	}
}
