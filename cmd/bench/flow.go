package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/app/consumerapp"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Group 11: dependencies, batches and workflows (internal/flow). On one
// deployment with one consumer and the table's stream consumer (the
// counter poller, gathering records over the Lambda trigger's batching
// window as the trigger does in AWS): the DynamoDB write units
// per task of a plain task, a child of one parent and a batch member,
// each from submit to completion (the consumer's writes included, and the
// stream consumer's: the /stats counters of every task, and the counting
// of batch members and workflow nodes on their shards, with the batch's
// completion), each kind measured once the stream consumer has caught up
// with its records; and a 1,000-node fan-out/fan-in workflow's time
// against the same 1,000 tasks submitted flat, in the same run.

// FlowRun is group 11's figures.
type FlowRun struct {
	Tasks int `json:"tasks_per_kind"`
	// Write units per task (computed from the items written, as group 3).
	PlainWrites float64 `json:"plain_write_units"`
	ChildWrites float64 `json:"child_write_units"` // a child of one parent still pending at its submit, its edge and release included
	// HighChildWrites: ChildWrites for a high-priority child (high tasks
	// do not age, so no aging entry was ever theirs to save).
	HighChildWrites float64 `json:"high_child_write_units"`
	HighChildExtra  float64 `json:"high_child_extra_write_units"`
	// FanoutWrites: a child of one parent shared by all of them (one
	// parent, still pending, with Tasks children): the parent's mark is
	// paid once, the parent's own plain writes are spread over its
	// children.
	FanoutWrites float64 `json:"fanout_child_write_units"`
	FanoutExtra  float64 `json:"fanout_child_extra_write_units"`
	// ChildDoneWrites: a child submitted after its one parent completed
	// (queued at once, as a plain task).
	ChildDoneWrites float64 `json:"child_of_completed_write_units"`
	MemberWrites    float64 `json:"member_write_units"` // a batch member, its share of the batch and callback included
	// Extra over a plain task, and in dollars per million tasks at
	// on-demand's price per million write units (publicPrices).
	ChildExtra        float64 `json:"child_extra_write_units"`
	MemberExtra       float64 `json:"member_extra_write_units"`
	ChildExtraUSD     float64 `json:"child_extra_usd_per_million"`
	MemberExtraUSD    float64 `json:"member_extra_usd_per_million"`
	WorkflowNodes     int     `json:"workflow_nodes"`
	FlatSeconds       float64 `json:"flat_seconds"`
	WorkflowSeconds   float64 `json:"workflow_seconds"`
	WorkflowOverFlat  float64 `json:"workflow_over_flat"`
	WorkflowSubmitSec float64 `json:"workflow_submit_seconds"`
	// Where a workflow's time goes, in seconds from its submit: its root's
	// start, its last node's finish, and from there to its completion
	// (the stream's delay and the counters' batching window).
	WorkflowRootStartSec float64 `json:"workflow_root_start_seconds"`
	WorkflowLastNodeSec  float64 `json:"workflow_last_node_seconds"`
	WorkflowReportLagSec float64 `json:"workflow_report_lag_seconds"`
	// The flat run's: its submit's end, its first start and its last
	// task's finish, from its submit.
	FlatSubmitSec     float64 `json:"flat_submit_seconds"`
	FlatFirstStartSec float64 `json:"flat_first_start_seconds"`
	FlatLastDoneSec   float64 `json:"flat_last_done_seconds"`
	// WorkflowNodeWrites: the workflow's write units per node, from its
	// submit to its completion (its edges, gate, release and counting).
	WorkflowNodeWrites float64 `json:"workflow_node_write_units"`
}

func measureFlow(ctx context.Context, cl clients, cnt *counter, tasks, nodes int) (FlowRun, error) {
	r := FlowRun{Tasks: tasks, WorkflowNodes: nodes}
	d, err := deploy(ctx, cl, "bench-flow")
	if err != nil {
		return r, err
	}
	defer func() { _ = d.teardown(context.WithoutCancel(ctx), cl) }()
	a := d.app
	reg, err := consumerapp.Handlers(a)
	if err != nil {
		return r, err
	}
	cctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		_ = consumerapp.New(a, reg, dispatch.Options{Concurrency: 16}, dispatch.Deps{}).Run(cctx)
		close(done)
	}()
	defer func() { stop(); <-done }()
	pctx, stopPoll := context.WithCancel(ctx)
	polled := make(chan struct{})
	poller := a.CounterPoller()
	poller.Window = spec.StreamBatchWindow // as the trigger gathers records in AWS
	go func() { _ = poller.Run(pctx); close(polled) }()
	defer func() { stopPoll(); <-polled }()
	// caughtUp waits until the stream consumer has counted n more
	// completed tasks (every task of the group completes).
	completed := int64(0)
	caughtUp := func(n int) error {
		completed += int64(n)
		deadline := time.Now().Add(2 * time.Minute)
		for {
			snap, err := a.Counters.Read(uncounted(ctx))
			if err != nil {
				return err
			}
			got := int64(0)
			for _, v := range snap.Tasks[triagetype.Completed] {
				got += v
			}
			if got >= completed {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("the stream consumer counted %d of %d completed tasks after 2 minutes", got, completed)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	noop := func(after ...string) *task.Task {
		rq := task.Request{Type: "noop", After: after}
		return rq.NewTask(time.Now().UTC(), 15*time.Minute)
	}
	submit := func(ts []*task.Task) ([]string, error) {
		var ids []string
		for start := 0; start < len(ts); start += 100 {
			for _, res := range a.Enqueuer.SubmitBatch(ctx, ts[start:min(start+100, len(ts))]) {
				if res.Err != nil {
					return nil, res.Err
				}
				ids = append(ids, res.Task.ID)
			}
		}
		return ids, nil
	}
	// wait polls the tasks not seen finished yet, so the polling's reads
	// (on the same emulator as the run) fall as the tasks finish.
	wait := func(ids []string) error {
		deadline := time.Now().Add(10 * time.Minute)
		pending := slices.Clone(ids)
		for {
			ts, err := a.Store.GetMany(uncounted(ctx), pending)
			if err != nil {
				return err
			}
			done := map[string]bool{}
			for _, t := range ts {
				done[t.ID] = t.Status.Terminal()
			}
			if pending = slices.DeleteFunc(pending, func(id string) bool { return done[id] }); len(pending) == 0 {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%d of %d tasks finished after 10 minutes", len(ids)-len(pending), len(ids))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	units := func(before counts) float64 {
		t := cnt.snapshot().since(before).total("DynamoDB")
		return t.WriteTable + t.WriteIndex
	}

	// Plain tasks.
	before := cnt.snapshot()
	ts := make([]*task.Task, tasks)
	for i := range ts {
		ts[i] = noop()
	}
	ids, err := submit(ts)
	if err == nil {
		err = wait(ids)
	}
	if err == nil {
		err = caughtUp(tasks)
	}
	if err != nil {
		return r, fmt.Errorf("plain: %w", err)
	}
	r.PlainWrites = units(before) / float64(tasks)

	// Parents and their children (one each): minus the parents' plain cost.
	// The parents start 10 s after their submit (an SQS delay: a plain
	// task's writes), so every child is linked while its parent is
	// pending: the general case, edge, mark, waiting and release.
	before = cnt.snapshot()
	parents := make([]*task.Task, tasks)
	for i := range parents {
		rq := task.Request{Type: "noop", DelaySeconds: ptrInt(10)}
		parents[i] = rq.NewTask(time.Now().UTC(), 15*time.Minute)
	}
	pids, err := submit(parents)
	if err != nil {
		return r, fmt.Errorf("parents: %w", err)
	}
	kids := make([]*task.Task, tasks)
	for i := range kids {
		kids[i] = noop(pids[i])
	}
	kids2, err := submit(kids)
	if err == nil {
		err = wait(append(pids, kids2...))
	}
	if err == nil {
		err = caughtUp(2 * tasks)
	}
	if err != nil {
		return r, fmt.Errorf("children: %w", err)
	}
	r.ChildWrites = units(before)/float64(tasks) - r.PlainWrites

	// The same with high-priority children.
	before = cnt.snapshot()
	for i := range parents {
		rq := task.Request{Type: "noop", DelaySeconds: ptrInt(10)}
		parents[i] = rq.NewTask(time.Now().UTC(), 15*time.Minute)
	}
	if pids, err = submit(parents); err != nil {
		return r, fmt.Errorf("parents: %w", err)
	}
	for i := range kids {
		rq := task.Request{Type: "noop", Priority: triagetype.High, After: []string{pids[i]}}
		kids[i] = rq.NewTask(time.Now().UTC(), 15*time.Minute)
	}
	kids2, err = submit(kids)
	if err == nil {
		err = wait(append(pids, kids2...))
	}
	if err == nil {
		err = caughtUp(2 * tasks)
	}
	if err != nil {
		return r, fmt.Errorf("high children: %w", err)
	}
	r.HighChildWrites = units(before)/float64(tasks) - r.PlainWrites
	r.HighChildExtra = r.HighChildWrites - r.PlainWrites

	// One pending parent and all its children: a fan-out.
	before = cnt.snapshot()
	rq := task.Request{Type: "noop", DelaySeconds: ptrInt(10)}
	fanPIDs, err := submit([]*task.Task{rq.NewTask(time.Now().UTC(), 15*time.Minute)})
	if err != nil {
		return r, fmt.Errorf("fan-out parent: %w", err)
	}
	for i := range kids {
		kids[i] = noop(fanPIDs[0])
	}
	kids2, err = submit(kids)
	if err == nil {
		err = wait(append(fanPIDs, kids2...))
	}
	if err == nil {
		err = caughtUp(1 + tasks)
	}
	if err != nil {
		return r, fmt.Errorf("fan-out children: %w", err)
	}
	r.FanoutWrites = (units(before) - r.PlainWrites) / float64(tasks)
	r.FanoutExtra = r.FanoutWrites - r.PlainWrites

	// Children of parents that completed before their submit.
	before = cnt.snapshot()
	for i := range parents {
		parents[i] = noop()
	}
	if pids, err = submit(parents); err == nil {
		err = wait(pids)
	}
	if err != nil {
		return r, fmt.Errorf("parents: %w", err)
	}
	for i := range kids {
		kids[i] = noop(pids[i])
	}
	if kids2, err = submit(kids); err == nil {
		err = wait(kids2)
	}
	if err == nil {
		err = caughtUp(2 * tasks)
	}
	if err != nil {
		return r, fmt.Errorf("children of completed parents: %w", err)
	}
	r.ChildDoneWrites = units(before)/float64(tasks) - r.PlainWrites

	// A batch of members with a callback.
	before = cnt.snapshot()
	h, err := a.Flow.CreateBatch(ctx, &triagetype.SubmitRequest{Type: "noop"}, task.KnownTypes{})
	if err != nil {
		return r, err
	}
	members := make([]*task.Task, tasks)
	for i := range members {
		rq := task.Request{Type: "noop", BatchID: h.ID}
		members[i] = rq.NewTask(time.Now().UTC(), 15*time.Minute)
	}
	mids, err := submit(members)
	if err == nil {
		err = a.Flow.Seal(ctx, h.ID)
	}
	if err == nil {
		err = wait(mids)
	}
	if err != nil {
		return r, fmt.Errorf("batch: %w", err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		b, err := a.Flow.Batch(uncounted(ctx), h.ID)
		if err != nil {
			return r, err
		}
		if b.State == triagetype.BatchCompleted {
			if err := wait([]string{b.CallbackID}); err != nil {
				return r, err
			}
			if err := caughtUp(tasks + 1); err != nil {
				return r, fmt.Errorf("batch: %w", err)
			}
			break
		}
		if time.Now().After(deadline) {
			return r, fmt.Errorf("batch %s did not complete", h.ID)
		}
	}
	r.MemberWrites = units(before) / float64(tasks)
	r.ChildExtra = r.ChildWrites - r.PlainWrites
	r.MemberExtra = r.MemberWrites - r.PlainWrites
	perUnit := publicPrices().DDBPerMillionWriteUnits // dollars a million units
	r.ChildExtraUSD = r.ChildExtra * perUnit
	r.MemberExtraUSD = r.MemberExtra * perUnit

	// The same nodes flat, then as a fan-out/fan-in workflow.
	flat := make([]*task.Task, nodes)
	for i := range flat {
		flat[i] = noop()
	}
	start := time.Now()
	fids, err := submit(flat)
	r.FlatSubmitSec = round(time.Since(start).Seconds(), 2)
	if err == nil {
		err = wait(fids)
	}
	if err != nil {
		return r, fmt.Errorf("flat: %w", err)
	}
	r.FlatSeconds = time.Since(start).Seconds()
	if r.FlatFirstStartSec, r.FlatLastDoneSec, err = timeline(ctx, a, fids, start); err != nil {
		return r, fmt.Errorf("flat: %w", err)
	}
	if err := caughtUp(nodes); err != nil {
		return r, fmt.Errorf("flat: %w", err)
	}
	wf := &triagetype.WorkflowRequest{Name: "fan"}
	wf.Nodes = append(wf.Nodes, triagetype.WorkflowNode{Name: "root", SubmitRequest: triagetype.SubmitRequest{Type: "noop"}})
	var mid []string
	for i := range nodes - 2 {
		name := fmt.Sprintf("m%d", i)
		mid = append(mid, name)
		wf.Nodes = append(wf.Nodes, triagetype.WorkflowNode{Name: name, After: []string{"root"}, SubmitRequest: triagetype.SubmitRequest{Type: "noop"}})
	}
	// The sink waits for at most 100 nodes (MaxParents): the last 100.
	wf.Nodes = append(wf.Nodes, triagetype.WorkflowNode{Name: "sink", After: mid[max(0, len(mid)-triagetype.MaxParents):], SubmitRequest: triagetype.SubmitRequest{Type: "noop"}})
	start = time.Now()
	before = cnt.snapshot()
	out, err := a.Flow.SubmitWorkflow(ctx, wf, task.KnownTypes{})
	if err != nil {
		return r, fmt.Errorf("workflow: %w", err)
	}
	r.WorkflowSubmitSec = time.Since(start).Seconds()
	for deadline := time.Now().Add(10 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		h, err := a.Store.Batch(uncounted(ctx), out.Workflow.ID)
		if err != nil {
			return r, err
		}
		if h.State == triagetype.WorkflowCompleted {
			break
		}
		if time.Now().After(deadline) {
			return r, fmt.Errorf("workflow %s did not complete in 10 minutes", out.Workflow.ID)
		}
	}
	r.WorkflowSeconds = time.Since(start).Seconds()
	r.WorkflowOverFlat = r.WorkflowSeconds / r.FlatSeconds
	wids := make([]string, 0, len(out.Workflow.Nodes))
	for _, n := range out.Workflow.Nodes {
		wids = append(wids, n.TaskID)
	}
	if r.WorkflowRootStartSec, r.WorkflowLastNodeSec, err = timeline(ctx, a, wids, start); err != nil {
		return r, fmt.Errorf("workflow: %w", err)
	}
	r.WorkflowReportLagSec = round(r.WorkflowSeconds-r.WorkflowLastNodeSec, 2)
	if err := caughtUp(nodes); err != nil {
		return r, fmt.Errorf("workflow: %w", err)
	}
	r.WorkflowNodeWrites = units(before) / float64(nodes)
	return r, nil
}

// timeline reads the tasks ids (not counted) and returns, in seconds from
// start, when the first of them started and the last finished.
func timeline(ctx context.Context, a *app.App, ids []string, start time.Time) (first, last float64, err error) {
	ts, err := a.Store.GetMany(uncounted(ctx), ids) // batch reads of 100, a few at a time
	if err != nil {
		return 0, 0, err
	}
	var f, l time.Time
	for _, t := range ts {
		if t.StartedAt != nil && (f.IsZero() || t.StartedAt.Before(f)) {
			f = *t.StartedAt
		}
		if t.CompletedAt != nil && t.CompletedAt.After(l) {
			l = *t.CompletedAt
		}
	}
	if f.IsZero() || l.IsZero() {
		return 0, 0, fmt.Errorf("none of %d tasks started or finished", len(ids))
	}
	return round(f.Sub(start).Seconds(), 2), round(l.Sub(start).Seconds(), 2), nil
}

func printFlow(w io.Writer, f *FlowRun) {
	if f == nil {
		return
	}
	fmt.Fprintf(w, "\n11. dependencies, batches, workflows (%d tasks per kind, one consumer at 16)\n", f.Tasks)
	fmt.Fprintf(w, "  write units per task: plain %.2f, child of one pending parent %.2f (+%.2f, +$%.2f per million; target +3), high-priority child of one pending parent %.2f (+%.2f), child in a fan-out of %d from one pending parent %.2f (+%.2f; target +3), child of a completed parent %.2f (+%.2f), batch member %.2f (+%.2f, +$%.2f per million; target +3)\n",
		f.PlainWrites, f.ChildWrites, f.ChildExtra, f.ChildExtraUSD, f.HighChildWrites, f.HighChildExtra, f.Tasks, f.FanoutWrites, f.FanoutExtra, f.ChildDoneWrites, f.ChildDoneWrites-f.PlainWrites, f.MemberWrites, f.MemberExtra, f.MemberExtraUSD)
	fmt.Fprintf(w, "  %d-node fan-out/fan-in workflow: %.1f s (submit %.1f s) against the same %d tasks flat: %.1f s (%.2fx; target 1.3x); %.2f write units per node (+%.2f over a plain task)\n",
		f.WorkflowNodes, f.WorkflowSeconds, f.WorkflowSubmitSec, f.WorkflowNodes, f.FlatSeconds, f.WorkflowOverFlat, f.WorkflowNodeWrites, f.WorkflowNodeWrites-f.PlainWrites)
	if f.WorkflowLastNodeSec > 0 {
		fmt.Fprintf(w, "    from each submit: the workflow's root started at %.1f s, its last node finished at %.1f s (%.2fx the flat run), and it was reported completed %.1f s later (stream delay and the counters' %s batching window, as in AWS); the flat tasks were submitted by %.1f s, the first started at %.1f s, the last finished at %.1f s\n",
			f.WorkflowRootStartSec, f.WorkflowLastNodeSec, f.WorkflowLastNodeSec/f.FlatSeconds, f.WorkflowReportLagSec, spec.StreamBatchWindow, f.FlatSubmitSec, f.FlatFirstStartSec, f.FlatLastDoneSec)
	}
}

func ptrInt(v int) *int { return &v }
