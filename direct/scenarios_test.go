package direct_test

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/internal/cleanup"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/triagetype"
)

// scenarios are what both transports must answer alike (TestTransportsAgree),
// in order: a scenario may rely on the state its deployment's earlier ones
// left.
var scenarios = []scenario{
	// Submits and reads.
	{name: "submit", want: []string{`"status":"queued"`, `"priority":"high"`, `"timeout_seconds":2`, `"max_attempts":5`, `"payload":{"x":1}`, `"same":true`}, do: func(r *run) (any, error) {
		key := "same-" + r.tag
		tk, created, err := r.c.Submit(r.ctx, "echo", map[string]int{"x": 1}, triage.WithPriority(triage.High), triage.WithIdempotencyKey(key),
			triage.WithMaxAttempts(5), triage.WithTimeout(1500*time.Millisecond), triage.WithTraceID("trace-"+r.tag))
		if err != nil || !created {
			return created, err
		}
		again, created, err := r.other.Submit(r.ctx, "echo", nil, triage.WithPriority(triage.Low), triage.WithIdempotencyKey(key))
		if err != nil {
			return nil, err
		}
		read, err := r.c.Get(r.ctx, tk.ID)
		same := !created && again.ID == tk.ID && again.Priority == triage.High && sameJSON(read, tk)
		return map[string]any{"task": tk, "same": same}, err
	}},
	{name: "submit due in an hour", want: []string{`"status":"scheduled"`}, do: submit("echo", nil, triage.WithRunAt(time.Now().Add(time.Hour)))},
	{name: "large payload", want: []string{`"size":20491`, `"read":true`, `"listed":true`}, do: func(r *run) (any, error) {
		big := map[string]string{"blob": strings.Repeat("p", 20<<10)}
		tk, _, err := r.c.Submit(r.ctx, "echo", big)
		if err != nil {
			return nil, err
		}
		got, err := r.other.Get(r.ctx, tk.ID)
		if err != nil {
			return nil, err
		}
		page, err := r.c.List(r.ctx, triage.ListParams{Limit: 1})
		listed := err == nil && page.Tasks[0].ID == tk.ID && len(page.Tasks[0].Payload) <= 4 && page.Tasks[0].PayloadSize == tk.PayloadSize
		return map[string]any{"size": tk.PayloadSize, "read": len(got.Payload) == tk.PayloadSize, "listed": listed}, err
	}},
	{name: "batch submit", want: []string{`"status":201`, `"field":"tasks[1].priority"`, `"field":"tasks[3].run_at"`, `"status":413`, `"again":false`}, do: func(r *run) (any, error) {
		ok, err := triage.NewRequest("echo", json.RawMessage(`{"n":1}`), triage.WithIdempotencyKey("batch-"+r.tag))
		if err != nil {
			return nil, err
		}
		late := triage.SubmitRequest{Type: "echo", RunAt: new(time.Now().Add(time.Minute)), DelaySeconds: new(60)}
		big := triage.SubmitRequest{Type: "echo", Payload: json.RawMessage(`"` + strings.Repeat("a", triage.MaxPayloadBytes) + `"`)}
		res, err := r.c.SubmitBatch(r.ctx, []triage.SubmitRequest{ok, {Type: "echo", Priority: "urgent"}, ok, late, big})
		if err != nil {
			return nil, err
		}
		_, again, err := r.other.Submit(r.ctx, "echo", nil, triage.WithIdempotencyKey("batch-"+r.tag))
		return map[string]any{"results": res, "again": again, "first": res[2].Task.ID == res[0].Task.ID}, err
	}},
	{name: "typed submit", want: []string{`"type":"greeting"`, `"field":"tasks[1].priority"`, `"again":false`}, do: func(r *run) (any, error) {
		tk, _, err := r.c.SubmitArgs(r.ctx, greeting{Name: r.tag}, triage.WithIdempotencyKey("typed-"+r.tag))
		if err != nil {
			return nil, err
		}
		_, again, err := r.other.SubmitArgs(r.ctx, greeting{Name: "other"}, triage.WithIdempotencyKey("typed-"+r.tag))
		if err != nil {
			return nil, err
		}
		res, err := r.c.SubmitArgsBatch(r.ctx, []triage.ArgsItem{{Args: greeting{Name: "a"}}, {Args: greeting{Name: "b"}, Opts: []triage.SubmitOption{triage.WithPriority("urgent")}}})
		return map[string]any{"task": tk, "again": again, "batch": res}, err
	}},
	{name: "list, cancel, delete, clean up", want: []string{`"pages":[2,3]`, `"gone":404`, `"second_start":409`, `"cleaned":true`}, do: func(r *run) (any, error) {
		typ := "life-" + r.tag
		var ids []string
		for range 3 {
			tk, _, err := r.other.Submit(r.ctx, typ, nil)
			if err != nil {
				return nil, err
			}
			ids = append(ids, tk.ID)
		}
		page, err := r.c.List(r.ctx, triage.ListParams{Type: typ, Limit: 2})
		if err != nil {
			return nil, err
		}
		var all int
		err = r.c.ListAll(r.ctx, triage.ListParams{Type: typ, Status: triage.Queued, Limit: 2}, func(*triage.Task) error { all++; return nil })
		if err != nil {
			return nil, err
		}
		cancelled, err := r.c.Cancel(r.ctx, ids[0])
		if err == nil {
			err = r.c.Delete(r.ctx, ids[0])
		}
		if err != nil {
			return nil, err
		}
		_, gone := r.other.Get(r.ctx, ids[0])
		if _, err := r.c.Cancel(r.ctx, ids[1]); err != nil {
			return nil, err
		}
		job, err := r.c.StartCleanup(r.ctx, time.Now().Add(time.Minute))
		if err != nil {
			return nil, err
		}
		_, busy := r.other.StartCleanup(r.ctx, time.Now()) // one runs at a time
		st := store.New(r.d.env.DynamoDB, r.d.env.Spec.Table.Name)
		if _, err := cleanup.NewRunner(st, cleanup.Options{Owner: r.tag}).Run(r.ctx, time.Minute); err != nil {
			return nil, err
		}
		done, err := r.other.GetCleanup(r.ctx, job.ID)
		_, left := r.other.Get(r.ctx, ids[1])
		return map[string]any{"pages": []int{len(page.Tasks), all}, "cancelled": cancelled, "gone": status(gone), "second_start": status(busy),
			"cleaned": job.State == triagetype.CleanupRunning && done.State == triagetype.CleanupDone && done.Deleted >= 1 && status(left) == 404}, err
	}},
	{name: "controls", want: []string{`{"paused":false},{"type":"echo","paused":true,"rate_limit_per_second":2.5,"max_concurrency":3}`}, do: func(r *run) (any, error) {
		for _, call := range []func() (*triagetype.ControlSettings, error){
			func() (*triagetype.ControlSettings, error) { return r.c.PauseType(r.ctx, "echo") },
			func() (*triagetype.ControlSettings, error) {
				return r.other.SetLimits(r.ctx, "echo", triagetype.LimitsRequest{RateLimitPerSecond: 2.5, MaxConcurrency: 3})
			},
			func() (*triagetype.ControlSettings, error) { return r.c.PauseType(r.ctx, "") },
			func() (*triagetype.ControlSettings, error) { return r.other.ResumeType(r.ctx, "") },
		} {
			if _, err := call(); err != nil {
				return nil, err
			}
		}
		return value(r.c.ListControls(r.ctx))
	}},
	{name: "key controls", want: []string{`"key":"k-<tr>"`, `"paused":true`}, do: func(r *run) (any, error) {
		return value(r.c.SetKeyControls(r.ctx, "k-"+r.tag, triagetype.KeyControlsRequest{Paused: new(true)}))
	}},
	{name: "key controls: weight of a type", want: fails(400, "weight"), do: func(r *run) (any, error) {
		return value(r.c.SetKeyControls(r.ctx, "k", triagetype.KeyControlsRequest{Type: "echo", Weight: new(2)}))
	}},

	// Refusals, field by field.
	{name: "unknown priority", env: "types", want: fails(400, "priority"), do: submit("echo", nil, triage.WithPriority("urgent"))},
	{name: "no type", env: "types", want: fails(400, "type"), do: submit("", nil)},
	{name: "type with #", env: "types", want: fails(400, "type"), do: submit("a#b", nil)},
	{name: "type the deployment does not run", env: "types", want: append(fails(400, "type"), "TRIAGE_TYPES"), do: submit("resize", nil)},
	{name: "payload not JSON", env: "types", want: fails(400, "payload"), do: submit("echo", json.RawMessage(`{nope`))},
	{name: "payload too large", env: "types", want: fails(413, "payload"), do: submit("echo", json.RawMessage(`"`+strings.Repeat("a", triage.MaxPayloadBytes)+`"`))},
	{name: "max attempts 0", env: "types", want: fails(400, "max_attempts"), do: submit("echo", nil, triage.WithMaxAttempts(0))},
	{name: "timeout over 12 h", env: "types", want: fails(400, "timeout_seconds"), do: submit("echo", nil, triage.WithTimeout(13*time.Hour))},
	{name: "negative delay", env: "types", want: fails(400, "delay_seconds"), do: submit("echo", nil, triage.WithDelay(-time.Second))},
	{name: "trace id with a space", env: "types", want: fails(400, "trace_id"), do: submit("echo", nil, triage.WithTraceID("a b"))},
	{name: "bad key", env: "types", want: fails(400, "key"), do: submit("echo", nil, triage.WithKey("a#b"))},
	{name: "empty batch", env: "types", want: fails(400, "tasks"), do: func(r *run) (any, error) { return value(r.c.SubmitBatch(r.ctx, nil)) }},
	{name: "batch over the limit", env: "types", want: fails(400, "tasks"), do: func(r *run) (any, error) {
		return value(r.c.SubmitBatch(r.ctx, make([]triage.SubmitRequest, triage.MaxBatch+1)))
	}},
	{name: "get a malformed id", env: "types", want: fails(400, "id"), do: func(r *run) (any, error) { return value(r.c.Get(r.ctx, "not-an-id")) }},
	{name: "get an unknown task", env: "types", want: fails(404, "id"), do: func(r *run) (any, error) { return value(r.c.Get(r.ctx, unknownID)) }},
	{name: "cancel an unknown task", env: "types", want: fails(404, "id"), do: func(r *run) (any, error) { return value(r.c.Cancel(r.ctx, unknownID)) }},
	{name: "cancel a cancelled task", env: "types", want: fails(409, ""), do: func(r *run) (any, error) { return value(r.c.Cancel(r.ctx, r.d.cancelled.ID)) }},
	{name: "retry a queued task", env: "types", want: fails(409, ""), do: func(r *run) (any, error) { return value(r.c.Retry(r.ctx, r.d.queued.ID)) }},
	{name: "delete a queued task", env: "types", want: fails(409, ""), do: func(r *run) (any, error) { return nil, r.c.Delete(r.ctx, r.d.queued.ID) }},
	{name: "delete without an id", env: "types", want: fails(400, "id"), do: func(r *run) (any, error) { return nil, r.c.Delete(r.ctx, "") }},
	{name: "list an unknown status", env: "types", want: fails(400, "status"), do: list(triage.ListParams{Status: "done"})},
	{name: "list an unknown priority", env: "types", want: fails(400, "priority"), do: list(triage.ListParams{Priority: "urgent"})},
	{name: "list a bad type", env: "types", want: fails(400, "type"), do: list(triage.ListParams{Type: "a#b"})},
	{name: "list too many", env: "types", want: fails(400, "limit"), do: list(triage.ListParams{Limit: triage.MaxListLimit + 1})},
	{name: "list from a forged cursor", env: "types", want: fails(400, "cursor"), do: list(triage.ListParams{Cursor: "forged"})},
	{name: "pause a bad type", env: "types", want: fails(400, "type"), do: func(r *run) (any, error) { return value(r.c.PauseType(r.ctx, "a\nb")) }},
	{name: "negative rate", env: "types", want: fails(400, "rate_limit_per_second"), do: limits("echo", -1, 0)},
	{name: "concurrency over the limit", env: "types", want: fails(400, "max_concurrency"), do: limits("echo", 0, 20000)},
	{name: "limits without a type", env: "types", want: fails(400, "type"), do: limits("", 1, 1)},
	{name: "dlq of an unknown priority", env: "types", want: fails(400, "priority"), do: func(r *run) (any, error) { return value(r.c.ListDLQ(r.ctx, "urgent", 0)) }},
	{name: "dlq too many", env: "types", want: fails(400, "limit"), do: func(r *run) (any, error) { return value(r.c.ListDLQ(r.ctx, "", triage.MaxListLimit+1)) }},
	{name: "replay too many", env: "types", want: fails(400, "limit"), do: replay(triagetype.ReplayRequest{Limit: 20000})},
	{name: "replay an unknown priority", env: "types", want: fails(400, "priority"), do: replay(triagetype.ReplayRequest{Priority: "urgent"})},
	{name: "replay a type no task can have", env: "types", want: fails(400, "type"), do: replay(triagetype.ReplayRequest{Type: strings.Repeat("t", 100_000)})},

	// Workflows and batches.
	{name: "workflow", env: "types", want: []string{`"state":"running"`, `"created":true`, `"again":true`, `"status":"waiting"`}, do: func(r *run) (any, error) {
		req := pair("wf-" + r.tag)
		w, created, err := r.c.SubmitWorkflow(r.ctx, req)
		if err != nil {
			return nil, err
		}
		again, created2, err := r.other.SubmitWorkflow(r.ctx, req)
		if err != nil {
			return nil, err
		}
		read, err := r.other.GetWorkflow(r.ctx, w.ID)
		return map[string]any{"workflow": read, "created": created, "again": !created2 && again.ID == w.ID}, err
	}},
	{name: "workflow with a cycle", env: "types", want: fails(400, "nodes"), do: workflow(triage.WorkflowRequest{Nodes: []triage.WorkflowNode{
		{Name: "x", After: []string{"y"}, SubmitRequest: triage.SubmitRequest{Type: "echo"}}, {Name: "y", After: []string{"x"}, SubmitRequest: triage.SubmitRequest{Type: "echo"}}}})},
	{name: "workflow of an unknown type", env: "types", want: fails(400, "nodes[0].type"), do: workflow(triage.WorkflowRequest{Nodes: []triage.WorkflowNode{{Name: "x", SubmitRequest: triage.SubmitRequest{Type: "resize"}}}})},
	{name: "workflow key reused", env: "types", want: fails(409, "idempotency_key"), do: func(r *run) (any, error) {
		other := pair("wf-" + r.tag)
		other.Name = "different"
		return workflow(other)(r)
	}},
	{name: "unknown workflow", env: "types", want: fails(404, "id"), do: func(r *run) (any, error) { return value(r.c.GetWorkflow(r.ctx, r.d.queued.ID)) }},
	{name: "batch life", env: "types", want: []string{`"state":"completed"`, `"total":3,"done":3`, `"field":"tasks[0].batch_id"`, `"callback":true`}, do: batchLife},
	{name: "batch of too many", env: "types", want: fails(400, "tasks"), do: createBatch(triage.BatchCreate{Tasks: make([]triage.SubmitRequest, triage.MaxBatch+1)})},
	{name: "batch sealed and empty", env: "types", want: fails(400, "tasks"), do: createBatch(triage.BatchCreate{})},
	{name: "batch callback with after", env: "types", want: fails(400, "on_complete"), do: createBatch(triage.BatchCreate{Open: true, OnComplete: &triage.SubmitRequest{Type: "report", After: []string{unknownID}}})},
	{name: "batch callback of an unknown type", env: "types", want: fails(400, "on_complete.type"), do: createBatch(triage.BatchCreate{Open: true, OnComplete: &triage.SubmitRequest{Type: "resize"}})},
	{name: "batch add nothing", env: "types", want: fails(400, "tasks"), do: func(r *run) (any, error) { return value(r.c.AddToBatch(r.ctx, unknownID, nil)) }},
	{name: "batch with a bad id", env: "types", want: fails(400, "id"), do: func(r *run) (any, error) { return value(r.c.GetBatch(r.ctx, "nope")) }},
	{name: "seal an unknown batch", env: "types", want: fails(404, "id"), do: func(r *run) (any, error) { return value(r.c.SealBatch(r.ctx, r.d.queued.ID)) }},

	// Schedules.
	{name: "schedule life", want: []string{`"created":true`, `"paused":true`, `"resumed":true`, `"gone":404`}, do: func(r *run) (any, error) {
		name := "nightly-" + r.tag
		s, created, err := r.c.PutSchedule(r.ctx, triage.Schedule{Name: name, Cron: "0 3 * * *", Timezone: "Europe/Paris", Task: triage.SubmitRequest{Type: "report"}})
		if err != nil {
			return nil, err
		}
		p, err := r.other.PauseSchedule(r.ctx, name)
		if err != nil {
			return nil, err
		}
		u, err := r.c.ResumeSchedule(r.ctx, name)
		if err == nil {
			err = r.other.DeleteSchedule(r.ctx, name)
		}
		if err != nil {
			return nil, err
		}
		_, gone := r.c.GetSchedule(r.ctx, name)
		return map[string]any{"schedule": s, "created": created, "paused": p.Paused && p.NextTick == nil, "resumed": !u.Paused && u.NextTick != nil, "gone": status(gone)}, err
	}},
	{name: "schedule with a bad cron", want: fails(400, "cron"), do: schedule(triage.Schedule{Name: "s", Cron: "0 0 30 2 *", Task: triage.SubmitRequest{Type: "a"}})},
	{name: "schedule in no time zone", want: fails(400, "timezone"), do: schedule(triage.Schedule{Name: "s", Cron: "* * * * *", Timezone: "Nowhere/Land", Task: triage.SubmitRequest{Type: "a"}})},
	{name: "schedule of a bad type", want: fails(400, "task.type"), do: schedule(triage.Schedule{Name: "s", Cron: "* * * * *", Task: triage.SubmitRequest{Type: "a#b"}})},
	{name: "schedules listed", want: []string{`"cursor":"a"`}, do: func(r *run) (any, error) {
		for _, n := range []string{"a", "b"} {
			if _, _, err := r.c.PutSchedule(r.ctx, triage.Schedule{Name: n, Cron: "0 * * * *", Task: triage.SubmitRequest{Type: "x"}}); err != nil {
				return nil, err
			}
		}
		return value(r.c.ListSchedules(r.ctx, 1, ""))
	}},

	// With a worker: how tasks end, and the dead ones.
	{name: "wait: completed", env: "work", want: []string{`"status":"completed"`, `"err":"\u003cnil\u003e"`}, do: wait("ok", false)},
	{name: "wait: dead on a permanent error", env: "work", want: []string{`"status":"dead_letter"`, "task dead-lettered: no way"}, do: wait("doomed", false)},
	{name: "wait: dead after its attempts", env: "work", want: []string{"task dead-lettered: flaked (attempt 1 of 1, none left)"}, do: wait("flaky", false, triage.WithMaxAttempts(1))},
	{name: "wait: cancelled by its handler", env: "work", want: []string{`"status":"cancelled"`, "task cancelled: order refunded"}, do: wait("refunded", false)},
	{name: "wait: cancelled by request", env: "work", want: []string{`"status":"cancelled"`, "task cancelled"}, do: wait("ok", true, triage.WithDelay(time.Hour))},
	{name: "wait: typed", env: "work", want: []string{`"result":"hello <tr>"`}, do: func(r *run) (any, error) {
		tk, _, err := r.c.SubmitArgs(r.ctx, greeting{Name: r.tag}, triage.WithPriority(triage.High))
		if err != nil {
			return nil, err
		}
		return value(r.other.Wait(r.ctx, tk.ID, 50*time.Millisecond))
	}},
	{name: "dlq listed", env: "work", want: []string{`"type":"doomed-<tr>"`}, do: func(r *run) (any, error) { return value(r.c.ListDLQ(r.ctx, triage.High, 0)) }},
	{name: "stats", env: "work", want: []string{`"dlq_depth":4`, `"active":1`}, do: func(r *run) (any, error) {
		// Queue counts are live: a message the worker has finished stays
		// in flight until its batched delete (up to 250 ms). Each
		// transport answers once its queues are quiet, up to 10 s.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			st, err := r.c.GetStats(r.ctx)
			if err != nil {
				return st, err
			}
			st.Keys = nil // its rates move with each heartbeat of the running worker
			busy := false
			for _, q := range st.Queues {
				busy = busy || q.Depth+q.InFlight+q.Delayed > 0
			}
			if !busy || time.Now().After(deadline) {
				return st, nil
			}
		}
	}},
	{name: "workers", env: "work", want: []string{`"kind":"worker"`, `"state":"active"`}, do: func(r *run) (any, error) { return value(r.c.ListWorkers(r.ctx)) }},
	{name: "retry a dead task", env: "work", want: []string{`"status":"queued"`, `"attempts":0`}, do: func(r *run) (any, error) { return value(r.c.Retry(r.ctx, r.d.dead[r.tag][0])) }},
	{name: "replay the dead", env: "work", want: []string{`"replayed":1,"skipped":0`}, do: func(r *run) (any, error) {
		return replay(triagetype.ReplayRequest{Priority: triage.High, Type: "doomed-" + r.tag})(r)
	}},

	// Over the depth limit.
	{name: "low submit over the depth limit", env: "depth", want: []string{`"status":429`, `"code":"too_many_requests"`, `"retry_after":"5s"`}, do: submit("echo", nil, triage.WithPriority(triage.Low))},
	{name: "high submit under its own limit", env: "depth", want: []string{`"status":"queued"`}, do: submit("echo", nil, triage.WithPriority(triage.High))},
	{name: "batch over the depth limit", env: "depth", want: []string{`"status":429`, `"status":201`}, do: func(r *run) (any, error) {
		return value(r.c.SubmitBatch(r.ctx, []triage.SubmitRequest{{Type: "echo", Priority: triage.Low}, {Type: "echo", Priority: triage.High}}))
	}},
}
