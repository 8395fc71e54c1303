package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Batch completion (workflows complete the same way; see store/batch.go
// for the counters and their arithmetic).
//
// A member's finish is counted on its shard from the table's stream, in
// the counters' transaction that applies the record of the write that
// finished it (internal/counters). Then, in the stream consumer
// (ShardsCounted, the counters' hook): if the shard is sealed and every
// member added to it is done, the shard is reported to the head, once (a
// conditional transaction). The caller whose report makes shards_done
// reach the shard count wins one conditional write on the head
// (ClaimCallback) and completes the batch: it sums the shards (O(shards)), creates the on_complete task
// with an id derived from the batch id (a conditional create: created
// once, whoever retries), and records the counts. Sealing reports the
// shards that were already done, so a batch whose members finished before
// it was sealed completes too. A crash anywhere in between leaves a
// sealed, uncompleted head in the sweep's index; the sweep repeats the
// missing steps, each as conditional as the first time.

// progress sums a batch's shards (O(shards) reads), or returns the final
// counts of a completed one (one read).
func (f *Flow) progress(ctx context.Context, h *store.BatchHead) (triagetype.BatchProgress, error) {
	if h.State == triagetype.BatchCompleted {
		return triagetype.BatchProgress{Total: h.Total, Done: h.Total, Completed: h.Completed, DeadLettered: h.DeadLettered, Cancelled: h.Cancelled}, nil
	}
	sum, _, err := f.sum(ctx, h)
	if err != nil {
		return triagetype.BatchProgress{}, err
	}
	return triagetype.BatchProgress{Total: sum.Added, Done: sum.Done, Completed: sum.Completed, DeadLettered: sum.DeadLettered, Cancelled: sum.Cancelled}, nil
}

func (f *Flow) sum(ctx context.Context, h *store.BatchHead) (store.BatchShard, []store.BatchShard, error) {
	shards, err := f.store.BatchShardsOf(ctx, h.ID, h.Shards)
	if err != nil {
		return store.BatchShard{}, nil, err
	}
	return store.SumShards(shards), shards, nil
}

// ShardsCounted is the counters' hook (counters.Keeper.OnBatchShards)
// for the batch shards a run of stream records counted members on: each
// shard that is sealed with every member added to it done is reported to
// its head, once (a conditional transaction), and a batch with a finished
// shard among them is completed if every shard reported (tryComplete).
// It costs one batch read of the shards per batch, and a head read per
// batch with a finished shard. A read or a report that fails is returned,
// so the stream delivers the run again; a completion that fails is left
// to the sweep, like one a crash interrupted.
func (f *Flow) ShardsCounted(ctx context.Context, refs []store.ShardRef) error {
	byBatch := map[string][]int{}
	var order []string
	for _, r := range refs {
		if byBatch[r.Batch] == nil {
			order = append(order, r.Batch)
		}
		byBatch[r.Batch] = append(byBatch[r.Batch], r.Shard)
	}
	var errs []error
	for _, id := range order {
		idx := byBatch[id]
		shards, err := f.store.BatchShardsAt(ctx, id, idx)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		finished := false
		for j, sh := range shards {
			if !sh.Finished() {
				continue
			}
			finished = true
			if sh.Reported {
				continue
			}
			if _, err := f.store.ReportShard(ctx, id, idx[j]); err != nil {
				errs = append(errs, err)
			}
		}
		if finished {
			f.tryComplete(ctx, id)
		}
	}
	return errors.Join(errs...)
}

// sealShards seals every shard of a sealed head and reports those done.
func (f *Flow) sealShards(ctx context.Context, h *store.BatchHead) {
	parallel(h.Shards, 16, func(i int) {
		sh, err := f.store.SealShard(ctx, h.ID, i)
		if err != nil {
			f.log.Warn("could not seal a batch shard; the sweep will", "batch_id", h.ID, "shard", i, "error", err)
			return
		}
		if sh.Finished() && !sh.Reported {
			_, _ = f.store.ReportShard(ctx, h.ID, i)
		}
	})
	f.tryComplete(ctx, h.ID)
}

// tryComplete completes batch id if every shard reported: the claim
// decides who; a head already claimed but not completed (its claimer
// crashed) is completed by whoever comes next, the sweep in practice.
func (f *Flow) tryComplete(ctx context.Context, id string) {
	h, err := f.store.Batch(ctx, id)
	if err != nil || !h.Sealed || h.State == triagetype.BatchCompleted || h.ShardsDone < h.Shards {
		return
	}
	if !h.CallbackClaimed {
		won, err := f.store.ClaimCallback(ctx, id, h.Shards)
		if err != nil || !won {
			return
		}
	}
	sum, _, err := f.sum(ctx, h)
	if err != nil {
		f.log.Warn("could not sum a finished batch; the sweep will", "batch_id", id, "error", err)
		return
	}
	cb := ""
	if h.OnComplete != "" {
		if cb, err = f.callback(ctx, h, sum); err != nil {
			f.log.Warn("could not enqueue a batch's callback; the sweep will", "batch_id", id, "error", err)
			return
		}
	}
	done, err := f.store.CompleteBatch(ctx, id, sum, cb)
	if err != nil || !done {
		return
	}
	kind := "batch.completed"
	if h.Kind == "workflow" {
		kind = "workflow.completed"
	}
	f.log.Info(kind, "batch_id", id, "kind", h.Kind, "total", sum.Added, "completed", sum.Completed,
		"dead_lettered", sum.DeadLettered, "cancelled", sum.Cancelled, "callback_id", cb)
	if f.opt.OnComplete != nil {
		f.opt.OnComplete(ctx, Completion{Kind: h.Kind, ID: id, Counts: triagetype.BatchProgress{
			Total: sum.Added, Done: sum.Done, Completed: sum.Completed, DeadLettered: sum.DeadLettered, Cancelled: sum.Cancelled}, CallbackID: cb})
	}
}

// Completion is a batch or workflow that completed (Options.OnComplete).
type Completion struct {
	Kind       string // "batch" or "workflow"
	ID         string
	Counts     triagetype.BatchProgress
	CallbackID string
}

// callback creates batch h's on_complete task, once: its id is derived
// from the batch id, and the create is conditional on it.
func (f *Flow) callback(ctx context.Context, h *store.BatchHead, sum store.BatchShard) (string, error) {
	var req task.Request
	if err := json.Unmarshal([]byte(h.OnComplete), &req); err != nil {
		return "", err
	}
	payload, err := json.Marshal(triagetype.BatchCallback{BatchID: h.ID, Payload: req.Payload, Counts: triagetype.BatchProgress{
		Total: sum.Added, Done: sum.Done, Completed: sum.Completed, DeadLettered: sum.DeadLettered, Cancelled: sum.Cancelled}})
	if err != nil {
		return "", err
	}
	req.Payload = payload
	req.IdempotencyKey = ""
	t := req.NewTask(f.store.Now().UTC(), f.opt.DirectWindow)
	t.ID = derivedID(h.ID, "on_complete")
	if req.TraceID == "" {
		t.TraceID = h.ID
	}
	res := f.mover.SubmitBatch(ctx, []*task.Task{t})[0]
	if res.Err != nil {
		return "", res.Err
	}
	return t.ID, nil
}

// sweepBatches finishes sealed batches a crash left uncompleted: reads
// their heads from the sweep index a page at a time (from a resume mark),
// seals unsealed shards, reports done ones, and completes. The same pages
// hold the member adds not settled yet: those older than AddStale are
// settled (memberadd.go).
func (f *Flow) sweepBatches(ctx context.Context, sh int) error {
	key := "batches#" + strconv.Itoa(sh)
	mark, err := f.store.FlowMark(ctx, key)
	if err != nil {
		return err
	}
	start := mark
	var errs []error
	for read := 0; read < f.opt.SweepLimit; {
		ids, adds, next, err := f.store.OpenBatches(ctx, sh, mark, 25)
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		read += len(ids) + len(adds)
		for _, id := range ids {
			f.repairBatch(ctx, id)
		}
		if err := f.settleStale(ctx, adds); err != nil {
			errs = append(errs, err)
		}
		if mark = next; mark == "" {
			break
		}
	}
	if mark != start {
		errs = append(errs, f.store.SetFlowMark(ctx, key, mark))
	}
	return errors.Join(errs...)
}

func (f *Flow) repairBatch(ctx context.Context, id string) {
	h, err := f.store.Batch(ctx, id)
	if err != nil || !h.Sealed || h.State == triagetype.BatchCompleted {
		return
	}
	if h.CreatedAt.After(f.store.Now().Add(-f.opt.SweepGrace)) {
		return
	}
	shards, err := f.store.BatchShardsOf(ctx, id, h.Shards)
	if err != nil {
		return
	}
	for i, s := range shards {
		if !s.Sealed {
			if s, err = f.store.SealShard(ctx, id, i); err != nil {
				continue
			}
		}
		if s.Finished() && !s.Reported {
			_, _ = f.store.ReportShard(ctx, id, i)
		}
	}
	f.tryComplete(ctx, id)
}

// checkBatches refuses, before anything is sent or written, new members
// of a batch that does not exist or is sealed: one consistent read of the
// batch head per batch named in ts. (A seal between this check and the
// member's record is caught by the record's own condition.)
func (f *Flow) checkBatches(ctx context.Context, ts []*task.Task, errs []error) {
	open := map[string]error{}
	for i, t := range ts {
		if t.BatchID == "" || t.WorkflowID != "" {
			continue
		}
		err, seen := open[t.BatchID]
		if !seen {
			h, herr := f.store.Batch(ctx, t.BatchID)
			switch {
			case errors.Is(herr, store.ErrBatchNotFound) || herr == nil && h.Kind != "batch":
				err = &task.FieldError{Field: "batch_id", Message: fmt.Sprintf("no batch %s", t.BatchID)}
			case herr != nil:
				err = herr
			case h.Sealed:
				err = &task.FieldError{Field: "batch_id", Message: fmt.Sprintf("batch %s is sealed: it takes no more members", t.BatchID)}
			}
			open[t.BatchID] = err
		}
		errs[i] = err
	}
}

// MaxCallbackPayload bounds an on_complete task's own payload: it is kept
// on the batch head, which must stay small (every head write is billed by
// its size).
const MaxCallbackPayload = 16 << 10

// CreateBatch records a new, empty, open batch with its on_complete
// request (validated as a submit is, its payload at most
// MaxCallbackPayload): the head and BatchShards counter shards, 1 + 32
// write units. Members join with SubmitRequest.BatchID; Seal closes it.
func (f *Flow) CreateBatch(ctx context.Context, onComplete *triagetype.SubmitRequest, known task.KnownTypes) (*store.BatchHead, error) {
	h := &store.BatchHead{ID: task.NewID(f.store.Now()), Kind: "batch", State: triagetype.BatchOpen, Shards: store.BatchShards, CreatedAt: f.store.Now().UTC()}
	if onComplete != nil {
		r := task.Request(*onComplete)
		if err := r.Validate(); err != nil {
			var fe *task.FieldError
			if errors.As(err, &fe) {
				return nil, &task.FieldError{Field: "on_complete." + fe.Field, Message: fe.Message, TooLarge: fe.TooLarge}
			}
			return nil, err
		}
		if fe := known.Check(r.Type); fe != nil {
			return nil, &task.FieldError{Field: "on_complete." + fe.Field, Message: fe.Message}
		}
		switch {
		case len(r.Payload) > MaxCallbackPayload:
			return nil, &task.FieldError{Field: "on_complete.payload", Message: fmt.Sprintf("is %d bytes; a callback's limit is %d", len(r.Payload), MaxCallbackPayload), TooLarge: true}
		case len(r.After) > 0 || r.BatchID != "" || r.RunAt != nil || r.DelaySeconds != nil:
			return nil, &task.FieldError{Field: "on_complete", Message: "takes no after, batch_id, run_at or delay_seconds"}
		}
		b, _ := json.Marshal(r)
		h.OnComplete = string(b)
	}
	if err := f.store.CreateBatch(ctx, h, nil); err != nil {
		return nil, err
	}
	return h, nil
}

// Seal closes batch id to new members; it completes (and its callback is
// enqueued) once every member has finished, at once if they all have.
func (f *Flow) Seal(ctx context.Context, id string) error {
	h, err := f.store.Batch(ctx, id)
	if err != nil {
		return err
	}
	if h.Kind != "batch" {
		return fmt.Errorf("batch %s: %w", id, store.ErrBatchNotFound)
	}
	if h, err = f.store.SealHead(ctx, id, triagetype.BatchSealed); err != nil {
		return err
	}
	f.sealShards(ctx, h)
	return nil
}

// Batch reads batch id and its progress: one head read and, until it
// completes, one batch read of its shards.
func (f *Flow) Batch(ctx context.Context, id string) (*triagetype.Batch, error) {
	h, err := f.store.Batch(ctx, id)
	if err != nil {
		return nil, err
	}
	if h.Kind != "batch" {
		return nil, fmt.Errorf("batch %s: %w", id, store.ErrBatchNotFound)
	}
	p, err := f.progress(ctx, h)
	if err != nil {
		return nil, err
	}
	return &triagetype.Batch{ID: h.ID, State: h.State, CreatedAt: h.CreatedAt, Progress: p, CallbackID: h.CallbackID, CompletedAt: h.CompletedAt}, nil
}

// MemberRequests turns submitted members into task requests of batch id,
// as the API and the direct transport both add them.
func MemberRequests(id string, rs []triagetype.SubmitRequest) []task.Request {
	reqs := make([]task.Request, len(rs))
	for i, m := range rs {
		m.BatchID = id
		reqs[i] = task.Request(m)
	}
	return reqs
}

// CheckMembers refuses, before anything is written, a request that
// creates a batch (create) or adds to one with n members: at most
// MaxBatch per request, at least one when adding, and at least one when
// creating a batch sealed at once (not open). The API and the direct
// transport both ask it, so both refuse alike.
func CheckMembers(n int, create, open bool) *task.FieldError {
	switch {
	case create && n > triagetype.MaxBatch:
		return &task.FieldError{Field: "tasks", Message: fmt.Sprintf("at most %d per request; add more with POST /batches/{id}/tasks", triagetype.MaxBatch)}
	case create && n == 0 && !open:
		return &task.FieldError{Field: "tasks", Message: "a batch sealed at once needs members (or give open: true)"}
	case !create && (n == 0 || n > triagetype.MaxBatch):
		return &task.FieldError{Field: "tasks", Message: fmt.Sprintf("must hold 1 to %d tasks, got %d", triagetype.MaxBatch, n)}
	}
	return nil
}
