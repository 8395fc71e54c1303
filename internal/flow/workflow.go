package flow

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Workflows
//
// A workflow is submitted whole and is all-or-nothing: nothing of it can
// run until all of it is recorded. SubmitWorkflow validates the request
// (validate: no writes), then writes, in this order, each step idempotent:
//
//  1. the idempotency key (if given), naming the workflow id and the
//     request's hash: a retry with the key resumes the same workflow;
//  2. the head (a batch head of kind workflow, state pending) and its
//     counter shards, each shard's added count set to its nodes;
//  3. the node list pages, every edge, and every node as a waiting task
//     with deterministic ids (derived from the workflow id and the node's
//     name). A root waits on the gate wf:<id> (an entry in its waiting_on
//     set that is no task); other nodes on their parents;
//  4. the commit: the head is sealed and moves to running (one
//     conditional write), then its shards are sealed;
//  5. the roots' gates are resolved, which releases them.
//
// A crash before 4 leaves only waiting tasks that nothing releases: the
// gate is closed, a node's parents are nodes, and the sweep leaves the
// nodes of an uncommitted workflow alone (even one whose parent node was
// never written). A retry with the same idempotency key repeats 2-5,
// skipping what exists. One that never comes is cleaned up: the sweep
// abandons a workflow still pending after Options.AbandonAfter and cancels
// its nodes (abandon.go). A crash after 4 is finished by the promoter's
// sweep, which sees the gate open and resolves it, and seals the shards of
// a sealed head.
//
// Write units of a workflow of N nodes and E edges, beyond its nodes' own
// task writes: 1 per page of 100 nodes (a page is up to ~25 KB, so up to
// 25 units each), 2 per edge, about 1 per node for the gate, 3 per node
// for the waiting index and release (as any dependency), 1 head and 1 to
// 16 shards at creation, 2 at the commit, and the batch counting of its
// nodes (see batch.go).

// WorkflowShards is the counter shard count of a workflow of n nodes: one
// per 64 nodes, 1 to 16 (a 1,000-node fan-out finishing at 1,000 nodes a
// second puts 1,000/16 × 2 = 125 write units a second on a shard).
func WorkflowShards(n int) int { return min(16, max(1, (n+63)/64)) }

// WorkflowOutcome is the answer to a workflow submit.
type WorkflowOutcome struct {
	Workflow *triagetype.Workflow
	Created  bool // a new workflow (201), not an earlier one of the same key (200)
}

// ErrKeyReused means an idempotency key already names a workflow made
// from a different request (409).
var ErrKeyReused = errors.New("the idempotency key names a different workflow")

// SubmitWorkflow validates and records r, then releases its roots (see
// above). A refusal before anything was written is a *WorkflowError.
func (f *Flow) SubmitWorkflow(ctx context.Context, r *triagetype.WorkflowRequest, known task.KnownTypes) (*WorkflowOutcome, error) {
	p, err := validate(r, known)
	if err != nil {
		return nil, err
	}
	body, _ := json.Marshal(r)
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:16])
	now := f.store.Now().UTC()
	id := task.NewID(now)
	created := true
	if r.IdempotencyKey != "" {
		owner, ownerHash, err := f.store.ClaimWorkflowKey(ctx, r.IdempotencyKey, id, hash)
		if err != nil {
			return nil, err
		}
		if owner != id {
			if ownerHash != hash {
				return nil, fmt.Errorf("workflow %s: %w", owner, ErrKeyReused)
			}
			id, created = owner, false
		}
	}
	if !created {
		if h, err := f.store.Batch(ctx, id); err == nil && h.State != triagetype.WorkflowPending {
			wf, err := f.Workflow(ctx, id)
			return &WorkflowOutcome{Workflow: wf}, err
		}
	}
	if err := f.record(ctx, id, r, p, hash, now, created); err != nil {
		return nil, err
	}
	if err := f.commit(ctx, id, p); err != nil {
		return nil, err
	}
	wf, err := f.Workflow(ctx, id)
	return &WorkflowOutcome{Workflow: wf, Created: created}, err
}

// nodeID derives node i's task id from the workflow id and its name: the
// same on every retry, sortable with the workflow's creation time.
func nodeID(wfID, name string) string {
	w, _ := ulid.ParseStrict(wfID)
	h := sha256.Sum256([]byte(wfID + "\x00" + name))
	var entropy [10]byte
	copy(entropy[:], h[:10])
	var u ulid.ULID
	_ = u.SetTime(w.Time())
	_ = u.SetEntropy(entropy[:])
	return u.String()
}

// record is steps 2 and 3; fresh says id is new (not a retry's).
func (f *Flow) record(ctx context.Context, id string, r *triagetype.WorkflowRequest, p *plan, hash string, now time.Time, fresh bool) error {
	n := len(p.nodes)
	shards := WorkflowShards(n)
	created := time.UnixMilli(int64(mustULID(id).Time())).UTC()
	ids := make([]string, n)
	for i, nd := range p.nodes {
		ids[i] = nodeID(id, nd.Name)
	}
	added := make([]int, shards)
	ts := make([]*task.Task, n)
	recs := make([]store.WorkflowNodeRecord, n)
	for i, nd := range p.nodes {
		req := task.Request(nd.SubmitRequest)
		req.After = nil
		t := req.NewTask(created, f.opt.DirectWindow)
		t.ID = ids[i]
		if nd.TraceID == "" {
			t.TraceID = id
		}
		t.Status, t.DispatchVersion, t.EnqueuedAt = triagetype.Waiting, task.NoMessage, nil
		t.OnParentFailure, _ = triagetype.ParseParentPolicy(nd.OnParentFailure)
		t.WorkflowID, t.Node, t.BatchID = id, nd.Name, id
		t.BatchShard = store.Shard(t.ID, shards)
		t.HasChildren = len(p.children[i]) > 0
		added[t.BatchShard]++
		for _, pi := range p.parents[i] {
			t.After = append(t.After, ids[pi])
		}
		t.WaitingOn = append([]string(nil), t.After...)
		if len(t.After) == 0 {
			t.WaitingOn = []string{gatePrefix + id}
		} else {
			t.EdgeParent = t.After[0] // no edge item: its waiting entry is one
		}
		ts[i] = t
		recs[i] = store.WorkflowNodeRecord{Name: nd.Name, TaskID: t.ID, Type: t.Type, After: nd.After}
	}
	head := &store.BatchHead{ID: id, Kind: "workflow", State: triagetype.WorkflowPending, Shards: shards, CreatedAt: created,
		Name: r.Name, Nodes: n, RequestHash: hash}
	if err := f.store.CreateBatch(ctx, head, added); err != nil && !errors.Is(err, store.ErrBatchExists) {
		return err
	}
	if err := f.store.PutWorkflowNodes(ctx, id, recs); err != nil {
		return err
	}
	// Every further parent's edge before any node: 25 to a request, not
	// one each. (A node's first parent finds it through its own waiting
	// entry, which no parent can walk before the commit.)
	var edges []store.Edge
	for _, t := range ts {
		for _, parent := range t.After[min(1, len(t.After)):] {
			edges = append(edges, store.Edge{Parent: parent, Child: t.ID})
		}
	}
	if err := f.store.PutEdgeBatch(ctx, edges); err != nil {
		return err
	}
	if fresh {
		// No node of a new workflow can exist yet: batch puts, not one
		// conditional put each.
		return f.store.CreateFresh(ctx, ts)
	}
	// A retry: nodes written before (and maybe cancelled by hand since)
	// must not be overwritten.
	errs := make([]error, n)
	parallel(n, 32, func(i int) {
		if _, _, err := f.store.Create(ctx, ts[i]); err != nil {
			errs[i] = fmt.Errorf("record node %s: %w", p.nodes[i].Name, err)
		}
	})
	return errors.Join(errs...)
}

func mustULID(id string) ulid.ULID {
	u, _ := ulid.ParseStrict(id)
	return u
}

// commit is steps 4 and 5.
func (f *Flow) commit(ctx context.Context, id string, p *plan) error {
	h, err := f.store.SealHead(ctx, id, triagetype.WorkflowRunning)
	if err != nil {
		return err
	}
	if h.State == triagetype.WorkflowAbandoned {
		// The sweep abandoned it first: it never runs. Every node this
		// submit wrote is written by now, so cancelling them here leaves
		// none waiting for the next sweep (abandon.go).
		f.cancelNodes(ctx, h)
		return nil
	}
	f.sealShards(ctx, h)
	f.walkHeld(ctx, h)
	parallel(len(p.roots), 16, func(i int) {
		f.take(ctx, nodeID(id, p.nodes[p.roots[i]].Name), gatePrefix+id)
	})
	return nil
}

// Nodes finished before the commit
//
// Nothing of an uncommitted workflow may run, yet a waiting node can be
// cancelled by hand (or moved by a parent's policy) while its workflow is
// pending. Its walk would then apply its children's policies early, and a
// child whose policy is run would be released by a workflow that was never
// committed. So a workflow node that finishes without ever having been
// released (EnqueuedAt unset: every node that ran was released, and a node
// is released only after its workflow's commit) asks its workflow's head
// first (walkNow):
//
//   - sealed (committed): it walks its children now, as any task does;
//   - abandoned: it does not; the abandonment cancels every waiting node
//     itself, children before parents, so none of them runs;
//   - pending: it records itself on the head (HoldFinished: a conditional
//     ADD to the head's held set, refused once the head is sealed or
//     abandoned) and does not walk. The commit's SealHead returns the head
//     with its held set, and the commit walks those nodes (walkHeld): their
//     children's policies apply then, with the workflow committed. If the
//     hold is refused, the head changed under it: it reads it again.
//
// The head item orders the hold against the commit and the abandonment, so
// each early finish is walked exactly by the commit, by itself after the
// commit, or by nobody (abandoned). A crash between a node's finish and its
// hold is repaired by the sweep once the workflow is committed (it applies
// every finished parent of a committed workflow's waiting nodes) or by the
// abandonment. Cost: one strongly consistent head read (1 RCU) per node
// that finishes unreleased (cancels and their cascades, not completions),
// plus the hold's write (about 1 unit) before the commit.

// walkNow reports whether t, a node of workflow t.WorkflowID that finished
// without being released, may walk its children now (see above).
func (f *Flow) walkNow(ctx context.Context, t *task.Task) bool {
	for range 5 {
		h, err := f.store.Batch(ctx, t.WorkflowID)
		if err != nil {
			f.log.Warn("could not read a finished node's workflow; the sweep resolves its children once it is committed", "workflow_id", t.WorkflowID, "task_id", t.ID, "error", err)
			return false
		}
		switch {
		case h.Sealed:
			return true
		case h.State == triagetype.WorkflowAbandoned:
			return false
		}
		held, err := f.store.HoldFinished(ctx, t.WorkflowID, t.ID)
		if err != nil {
			f.log.Warn("could not hold a node finished before its workflow's commit; the sweep resolves its children once it is committed", "workflow_id", t.WorkflowID, "task_id", t.ID, "error", err)
			return false
		}
		if held {
			return false // the commit walks it
		}
	}
	return false
}

// walkHeld walks the children of the nodes of committed workflow h that
// finished before its commit (h.Held, from its SealHead).
func (f *Flow) walkHeld(ctx context.Context, h *store.BatchHead) {
	if len(h.Held) == 0 {
		return
	}
	ts, err := f.store.GetManyConsistent(ctx, h.Held)
	if err != nil {
		f.log.Warn("could not read the nodes finished before a workflow's commit; the sweep resolves their children", "workflow_id", h.ID, "error", err)
		return
	}
	for _, t := range ts {
		if t.Status.Terminal() && t.HasChildren {
			f.walk(ctx, t)
		}
	}
}

// gateOpen reports whether the workflow gate entry (gatePrefix + workflow
// id) is open: its workflow was committed.
func (f *Flow) gateOpen(ctx context.Context, entry string) bool {
	h, err := f.store.Batch(ctx, entry[len(gatePrefix):])
	return err == nil && h.Sealed
}

// Workflow reads workflow id with every node's status: the head, its node
// list (one batch read of up to 10 pages) and its node tasks (batch reads
// of 100): about N/2 + 12 read units for N nodes of up to 4 KB.
func (f *Flow) Workflow(ctx context.Context, id string) (*triagetype.Workflow, error) {
	h, err := f.store.Batch(ctx, id)
	if err != nil {
		return nil, err
	}
	if h.Kind != "workflow" {
		return nil, fmt.Errorf("workflow %s: %w", id, store.ErrBatchNotFound)
	}
	prog, err := f.progress(ctx, h)
	if err != nil {
		return nil, err
	}
	wf := &triagetype.Workflow{ID: id, Name: h.Name, State: h.State, CreatedAt: h.CreatedAt, Progress: prog}
	recs, err := f.store.WorkflowNodes(ctx, id, h.Nodes)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(recs))
	for i, r := range recs {
		ids[i] = r.TaskID
	}
	ts, err := f.store.GetMany(ctx, ids)
	if err != nil {
		return nil, err
	}
	status := make(map[string]triagetype.Status, len(ts))
	for _, t := range ts {
		status[t.ID] = t.Status
	}
	for _, r := range recs {
		n := triagetype.WorkflowNodeStatus{Name: r.Name, TaskID: r.TaskID, Type: r.Type, After: r.After, Status: status[r.TaskID]}
		if n.Status == "" {
			unwritten(wf, &n)
		}
		wf.Nodes = append(wf.Nodes, n)
	}
	return wf, nil
}

// unwritten fills in node n of wf, whose task does not exist. Before the
// commit (pending, abandoned) that is a node its submit never wrote: it
// waits for its workflow's commit as the written ones do, or, abandoned,
// it never runs and counts as cancelled, so an abandoned workflow's
// progress reaches done = total. In a committed workflow every node was
// written before the commit, so a missing one finished and was deleted by
// retention: its status is unknown and stays empty.
func unwritten(wf *triagetype.Workflow, n *triagetype.WorkflowNodeStatus) {
	switch wf.State {
	case triagetype.WorkflowPending:
		n.Status, n.Unwritten = triagetype.Waiting, true
	case triagetype.WorkflowAbandoned:
		n.Status, n.Unwritten = triagetype.Cancelled, true
		wf.Progress.Done++
		wf.Progress.Cancelled++
	}
}

// derivedID is a deterministic task id for what batch id makes once (its
// callback): the batch's time, and entropy from its id and salt.
func derivedID(id, salt string) string {
	w := mustULID(id)
	h := sha256.Sum256([]byte(id + "\x00" + salt))
	var u ulid.ULID
	_ = u.SetTime(w.Time())
	_ = u.SetEntropy(h[:10])
	return u.String()
}
