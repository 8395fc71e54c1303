package flow

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Abandoned workflows
//
// A workflow submit that crashed before its commit leaves waiting nodes
// that nothing releases (workflow.go). A retry with the idempotency key
// completes it; the rule for one that never comes: the sweep, meeting a
// node of a workflow still pending DefaultAbandonAfter after its submit
// began, abandons the workflow (AbandonHead: pending -> abandoned, one
// conditional write that a late commit's SealHead refuses, so the
// workflow is committed or abandoned, never both) and cancels its waiting
// nodes, children before parents. No node of an abandoned workflow walks
// its children (walkNow in workflow.go), so none with on_parent_failure
// run is released by a cancelled parent. A pass that fails to cancel a
// node stops there and the next pass goes on.
//
// A retry racing the abandonment is decided on the head, both ways: its
// commit's SealHead either comes first (AbandonHead is then refused: the
// workflow runs, every node) or finds the head abandoned (the workflow
// never runs). In the second case the retry may have written nodes after
// the sweep's cancel pass read them; the refused commit cancels the
// workflow's waiting nodes itself, after its own writes, so when the
// retry's submit returns no node of the abandoned workflow is left
// waiting (TestRetryRacingAbandonment interleaves both ways).
//
// Until then the sweep leaves an uncommitted workflow's nodes alone: it
// neither opens their gate nor treats a parent node that was never
// written as gone (which would cancel, dead-letter or, under policy run,
// release the child of a half-written workflow).
//
// Cost: the sweep reads the head of each workflow among a page of
// waiting tasks (one strongly consistent read per workflow per page, 1
// RCU). An abandonment is a head write, a read of the node list (1 to 10
// pages), a consistent read of the nodes (N/2 RCU for N nodes of up to 4
// KB) and one cancel per waiting node (a task transition, counted on its
// shard from the stream as any finish): done once per abandoned workflow.

// DefaultAbandonAfter is how long a workflow may stay uncommitted before
// the sweep abandons it: far longer than a client's retries of one submit
// (the API's own timeout is 29 s), short enough that a crash's leftovers
// do not linger in the waiting index.
const DefaultAbandonAfter = time.Hour

// committed splits waiting tasks ts: it returns those the sweep may act
// on (tasks of no workflow, and nodes of committed ones), abandons the
// workflows whose nodes it met pending past AbandonAfter, and cancels the
// nodes of abandoned ones. It returns how many workflows it abandoned.
func (f *Flow) committed(ctx context.Context, ts []*task.Task) (keep []*task.Task, abandoned int) {
	heads := map[string]*store.BatchHead{}
	for _, t := range ts {
		if t.WorkflowID == "" {
			keep = append(keep, t)
			continue
		}
		h, seen := heads[t.WorkflowID]
		if !seen {
			var err error
			if h, err = f.store.Batch(ctx, t.WorkflowID); err != nil {
				if !errors.Is(err, store.ErrBatchNotFound) {
					f.log.Warn("sweep could not read a workflow", "workflow_id", t.WorkflowID, "error", err)
				}
				h = nil
			}
			heads[t.WorkflowID] = h
		}
		if h != nil && h.Sealed {
			keep = append(keep, t)
		}
	}
	cut := f.store.Now().Add(-f.opt.AbandonAfter)
	for id, h := range heads {
		switch {
		case h == nil || h.Sealed:
		case h.State == triagetype.WorkflowPending && h.CreatedAt.Before(cut):
			ok, err := f.store.AbandonHead(ctx, id)
			if err != nil {
				f.log.Warn("could not abandon a workflow; the next sweep will", "workflow_id", id, "error", err)
				continue
			}
			if ok {
				abandoned++
				f.log.Warn("abandoned a workflow its submit never committed", "workflow_id", id, "pending_since", h.CreatedAt)
				f.cancelNodes(ctx, h)
			}
		case h.State == triagetype.WorkflowAbandoned:
			f.cancelNodes(ctx, h)
		}
	}
	return keep, abandoned
}

// cancelNodes cancels the waiting nodes of abandoned workflow h, each
// after every node below it (deepest first).
func (f *Flow) cancelNodes(ctx context.Context, h *store.BatchHead) {
	recs, err := f.store.WorkflowNodes(ctx, h.ID, h.Nodes)
	if err != nil {
		f.log.Warn("could not read an abandoned workflow's nodes; the next sweep will", "workflow_id", h.ID, "error", err)
		return
	}
	ids := make([]string, len(recs))
	for i, r := range recs {
		ids[i] = r.TaskID
	}
	ts, err := f.store.GetManyConsistent(ctx, ids)
	if err != nil {
		f.log.Warn("could not read an abandoned workflow's nodes; the next sweep will", "workflow_id", h.ID, "error", err)
		return
	}
	byID := make(map[string]*task.Task, len(ts))
	for _, t := range ts {
		byID[t.ID] = t
	}
	reason := fmt.Sprintf("workflow %s was never committed: its submit stopped and was not completed within %v", h.ID, f.opt.AbandonAfter)
	for _, i := range deepestFirst(recs) {
		if err := f.cancelNode(ctx, byID[recs[i].TaskID], reason); err != nil {
			// Stop: the nodes above it wait for the next pass, so none is
			// cancelled while a node below it still waits.
			f.log.Warn("could not cancel a node of an abandoned workflow; the next sweep will", "workflow_id", h.ID, "task_id", recs[i].TaskID, "error", err)
			return
		}
	}
}

// cancelNode cancels t, a node of an abandoned workflow, if it waits. A
// conflict (another pass cancelling it too: the sweep and a late commit
// both cancel, or a parent resolved meanwhile) reads it again, so two
// passes at once do not stop each other.
func (f *Flow) cancelNode(ctx context.Context, t *task.Task, reason string) error {
	for range 5 {
		if t == nil || t.Status != triagetype.Waiting {
			return nil
		}
		now := f.store.Now()
		_, err := f.store.Transition(ctx, t, triagetype.Cancelled, func(n *task.Task) {
			n.Error = task.NewError(reason, false)
			n.CompletedAt = &now
		})
		if !errors.Is(err, store.ErrConflict) {
			return err
		}
		if t, err = f.store.Get(ctx, t.ID); err != nil {
			return err
		}
	}
	return fmt.Errorf("cancel node %s: %w (it kept changing)", t.ID, store.ErrConflict)
}

// deepestFirst orders workflow nodes so that every node comes before each
// of its parents: by depth (the longest chain of parents above it),
// deepest first. The nodes were validated acyclic at submit; a name they
// do not list counts as a root.
func deepestFirst(recs []store.WorkflowNodeRecord) []int {
	index := make(map[string]int, len(recs))
	for i, r := range recs {
		index[r.Name] = i
	}
	depth := make([]int, len(recs))
	done := make([]bool, len(recs))
	var walk func(i int, guard int) int
	walk = func(i, guard int) int {
		if done[i] || guard > len(recs) {
			return depth[i]
		}
		d := 0
		for _, a := range recs[i].After {
			if p, ok := index[a]; ok {
				d = max(d, walk(p, guard+1)+1)
			}
		}
		depth[i], done[i] = d, true
		return d
	}
	order := make([]int, len(recs))
	for i := range recs {
		walk(i, 0)
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return depth[order[a]] > depth[order[b]] })
	return order
}
