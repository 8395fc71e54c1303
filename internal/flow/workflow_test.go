package flow_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/api"
	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/app/apiapp"
	"github.com/triagehq/triage/internal/auth"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/flow"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

func node(name string, after ...string) triagetype.WorkflowNode {
	return triagetype.WorkflowNode{Name: name, After: after, SubmitRequest: triagetype.SubmitRequest{
		Type: "node", Payload: json.RawMessage(fmt.Sprintf(`{"node":%q}`, name))}}
}

func withPolicy(n triagetype.WorkflowNode, policy string) triagetype.WorkflowNode {
	n.OnParentFailure = policy
	return n
}

func diamond(key string) *triagetype.WorkflowRequest {
	return &triagetype.WorkflowRequest{Name: "diamond", IdempotencyKey: key, Nodes: []triagetype.WorkflowNode{
		node("A"), node("B", "A"), node("C", "A"), node("D", "B", "C")}}
}

// waitWorkflow polls until workflow id is in state want.
func waitWorkflow(t *testing.T, a *app.App, id, want string, timeout time.Duration) *triagetype.Workflow {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		wf, err := a.Flow.Workflow(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if wf.State == want {
			return wf
		}
		if time.Now().After(deadline) {
			t.Fatalf("workflow %s is %s after %v, want %s: %+v", id, wf.State, timeout, want, wf)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitDone polls a workflow's or batch's progress (read) until done of
// its members are counted: members are counted from the table's stream,
// so progress lags their finishes by the stream's delay.
func waitDone(t *testing.T, done int, read func() (triagetype.BatchProgress, error)) triagetype.BatchProgress {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := read()
		if err != nil {
			t.Fatal(err)
		}
		if p.Done >= done || time.Now().After(deadline) {
			return p
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// workflowProgress reads workflow id's progress, for waitDone.
func workflowProgress(a *app.App, id string) func() (triagetype.BatchProgress, error) {
	return func() (triagetype.BatchProgress, error) {
		wf, err := a.Flow.Workflow(context.Background(), id)
		if err != nil {
			return triagetype.BatchProgress{}, err
		}
		return wf.Progress, nil
	}
}

func TestWorkflowDiamond(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	stacktest.RunCounters(t, a) // members are counted from the stream
	rec := newRecorder()
	consume(t, a, rec)
	out, err := a.Flow.SubmitWorkflow(context.Background(), diamond(""), task.KnownTypes{})
	if err != nil {
		t.Fatal(err)
	}
	if !out.Created || len(out.Workflow.Nodes) != 4 || out.Workflow.State != triagetype.WorkflowRunning {
		t.Fatalf("submit: %+v", out)
	}
	wf := waitWorkflow(t, a, out.Workflow.ID, triagetype.WorkflowCompleted, time.Minute)
	if p := wf.Progress; p.Total != 4 || p.Done != 4 || p.Completed != 4 {
		t.Fatalf("progress %+v, want 4 of 4 completed", p)
	}
	for _, n := range wf.Nodes {
		if n.Status != triagetype.Completed {
			t.Errorf("node %s is %s", n.Name, n.Status)
		}
	}
	order := rec.ran()
	pos := map[string]int{}
	for i, n := range order {
		pos[n] = i
	}
	if len(order) != 4 || pos["A"] > pos["B"] || pos["A"] > pos["C"] || pos["B"] > pos["D"] || pos["C"] > pos["D"] {
		t.Fatalf("ran %v", order)
	}
	seen := map[string]string{}
	for _, p := range rec.parents["D"] {
		seen[p.Node] = string(p.Result)
	}
	if seen["B"] != `{"node":"B"}` || seen["C"] != `{"node":"C"}` || len(seen) != 2 {
		t.Fatalf("D saw parents %v", seen)
	}
}

// TestWorkflowCrashMidSubmit: a submit stopped after every node was
// written but before the commit leaves nothing runnable, even with a
// consumer and the sweep running; the retry with the same idempotency key
// commits it and it runs once.
func TestWorkflowCrashMidSubmit(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	stacktest.RunCounters(t, a) // members are counted from the stream
	rec := newRecorder()
	consume(t, a, rec)
	ctx := context.Background()
	req := diamond("wf-crash-1")
	id, err := a.Flow.RecordOnly(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	sweeper := flow.New(a.Store, a.Enqueuer, flow.Options{SweepGrace: time.Nanosecond, ReleaseGrace: time.Nanosecond})
	if r, err := sweeper.Sweep(ctx); err != nil || r.Released != 0 {
		t.Fatalf("sweep of an uncommitted workflow: %+v, %v; want nothing released", r, err)
	}
	time.Sleep(2 * time.Second)
	wf, err := a.Flow.Workflow(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if wf.State != triagetype.WorkflowPending || len(wf.Nodes) != 4 {
		t.Fatalf("uncommitted workflow: %+v", wf)
	}
	for _, n := range wf.Nodes {
		if n.Status != triagetype.Waiting {
			t.Fatalf("node %s of an uncommitted workflow is %s", n.Name, n.Status)
		}
	}
	if got := rec.ran(); len(got) != 0 {
		t.Fatalf("nodes ran before the commit: %v", got)
	}
	// A different request under the same key is refused.
	other := diamond("wf-crash-1")
	other.Name = "other"
	if _, err := a.Flow.SubmitWorkflow(ctx, other, task.KnownTypes{}); !errors.Is(err, flow.ErrKeyReused) {
		t.Fatalf("other request, same key: %v, want ErrKeyReused", err)
	}
	out, err := a.Flow.SubmitWorkflow(ctx, req, task.KnownTypes{})
	if err != nil {
		t.Fatal(err)
	}
	if out.Created || out.Workflow.ID != id {
		t.Fatalf("retry: created %v, id %s; want the same workflow %s", out.Created, out.Workflow.ID, id)
	}
	waitWorkflow(t, a, id, triagetype.WorkflowCompleted, time.Minute)
	time.Sleep(time.Second)
	if got := rec.ran(); len(got) != 4 {
		t.Fatalf("ran %v, want each of the 4 nodes once", got)
	}
	// And once more: the completed workflow, nothing new.
	again, err := a.Flow.SubmitWorkflow(ctx, req, task.KnownTypes{})
	if err != nil || again.Created || again.Workflow.State != triagetype.WorkflowCompleted {
		t.Fatalf("third submit: %+v, %v", again, err)
	}
}

func TestWorkflowRefusals(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	toks, err := auth.Parse("adm:admin")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(apiapp.Handler(a, toks, api.Options{}))
	defer srv.Close()

	big := &triagetype.WorkflowRequest{}
	for i := range 2000 {
		big.Nodes = append(big.Nodes, node(fmt.Sprintf("n%d", i)))
	}
	chain := &triagetype.WorkflowRequest{Nodes: []triagetype.WorkflowNode{node("c0")}}
	for i := 1; i <= triagetype.MaxWorkflowDepth; i++ {
		chain.Nodes = append(chain.Nodes, node(fmt.Sprintf("c%d", i), fmt.Sprintf("c%d", i-1)))
	}
	for _, tc := range []struct {
		name  string
		req   *triagetype.WorkflowRequest
		field string
		names []string // node names the message must carry
	}{
		{"cycle", &triagetype.WorkflowRequest{Nodes: []triagetype.WorkflowNode{node("root"), node("a", "root", "c"), node("b", "a"), node("c", "b")}}, "nodes", []string{"a -> b -> c -> a"}},
		{"self", &triagetype.WorkflowRequest{Nodes: []triagetype.WorkflowNode{node("a", "a")}}, "nodes[0].after[0]", []string{"a"}},
		{"2000 nodes", big, "nodes", []string{"2000"}},
		{"missing", &triagetype.WorkflowRequest{Nodes: []triagetype.WorkflowNode{node("a"), node("b", "nope")}}, "nodes[1].after[0]", []string{"nope", "b"}},
		{"duplicate", &triagetype.WorkflowRequest{Nodes: []triagetype.WorkflowNode{node("a"), node("a")}}, "nodes", []string{"a"}},
		{"too deep", chain, "nodes", []string{"c0", "c100"}},
		{"a root's on_parent_failure", &triagetype.WorkflowRequest{Nodes: []triagetype.WorkflowNode{withPolicy(node("a"), "run")}}, "nodes[0].on_parent_failure", []string{"a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, _ := json.Marshal(tc.req)
			hr, _ := http.NewRequest("POST", srv.URL+"/api/v1/workflows", bytes.NewReader(body))
			hr.Header.Set("Authorization", "Bearer adm")
			resp, err := http.DefaultClient.Do(hr)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var e triagetype.ErrorBody
			_ = json.NewDecoder(resp.Body).Decode(&e)
			if resp.StatusCode != http.StatusBadRequest || e.Error.Field != tc.field {
				t.Fatalf("status %d, error %+v; want 400 naming %s", resp.StatusCode, e.Error, tc.field)
			}
			for _, n := range tc.names {
				if !strings.Contains(e.Error.Message, n) {
					t.Errorf("message %q does not name %q", e.Error.Message, n)
				}
			}
		})
	}
	// Nothing was written: no task exists.
	ts, _, err := a.Store.List(context.Background(), storeFilterAll(), 10, "")
	if err != nil || len(ts) != 0 {
		t.Fatalf("refused workflows left %d tasks (%v)", len(ts), err)
	}
}
