package flow

import (
	"context"
	"errors"

	"github.com/triagehq/triage/internal/enqueue"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
)

// countMembers counts, before anything is sent or written, each batch's
// members among ts that a request adds together (at least two, and none
// with an idempotency key) on one shard, with one store.MemberAdd per
// batch: each member is then recorded with a plain put, and Settle closes
// the add (see store/memberadd.go for the protocol and its cost). A member
// with an idempotency key, or alone in its request, keeps the member
// transaction (store.createMember): exact on its own, and cheaper for one.
// A batch sealed meanwhile refuses the whole group with the count's
// *task.FieldError.
func (f *Flow) countMembers(ctx context.Context, ts []*task.Task, errs []error) {
	groups := map[string][]int{}
	var order []string
	for i, t := range ts {
		if errs[i] != nil || t.BatchID == "" || t.WorkflowID != "" || t.IdempotencyKey != "" {
			continue
		}
		if groups[t.BatchID] == nil {
			order = append(order, t.BatchID)
		}
		groups[t.BatchID] = append(groups[t.BatchID], i)
	}
	for _, batch := range order {
		idx := groups[batch]
		if len(idx) < 2 {
			continue
		}
		ids := make([]string, len(idx))
		for j, i := range idx {
			ids[j] = ts[i].ID
		}
		a := f.store.NewMemberAdd(batch, ids)
		if err := f.store.CountMembers(ctx, a); err != nil {
			for _, i := range idx {
				errs[i] = err
			}
			continue
		}
		for _, i := range idx {
			ts[i].BatchShard, ts[i].MemberAdd, ts[i].MemberWriteBy = a.Shard, a.ID, a.WriteBefore()
		}
	}
}

// settleMembers closes the member adds among ls once their records are
// written: each add's members not written are taken back from its shard
// (a send or a record that surely failed). An add with a record whose
// write failed uncertainly (it may have landed) is left to the sweep,
// which reads its members once no write can land any more. A shard that a
// take-back leaves finished is reported as the counters would.
func (f *Flow) settleMembers(ctx context.Context, ls []enqueue.Linked) {
	type add struct {
		a       store.MemberAdd
		missing int
		unsure  bool
	}
	adds := map[string]*add{}
	var order []string
	for _, l := range ls {
		t := l.Task
		if t.MemberAdd == "" {
			continue
		}
		g := adds[t.MemberAdd]
		if g == nil {
			g = &add{a: store.MemberAdd{ID: t.MemberAdd, Batch: t.BatchID, Shard: t.BatchShard}}
			adds[t.MemberAdd] = g
			order = append(order, t.MemberAdd)
		}
		switch {
		case l.Unsure:
			g.unsure = true
		case !l.Written:
			g.missing++
		}
	}
	for _, id := range order {
		g := adds[id]
		if g.unsure {
			f.log.Info("a batch member's record may or may not have been written; the sweep settles its add", "batch_id", g.a.Batch, "add_id", id)
			continue
		}
		if err := f.settleAdd(ctx, &g.a, g.missing); err != nil {
			f.log.Warn("could not settle a member add; the sweep will", "batch_id", g.a.Batch, "add_id", id, "error", err)
		}
	}
}

// settleAdd settles a with missing members not written, and reports its
// shard if that left it finished.
func (f *Flow) settleAdd(ctx context.Context, a *store.MemberAdd, missing int) error {
	settled, err := f.store.SettleAdd(ctx, a, missing)
	if err != nil || !settled || missing == 0 {
		return err
	}
	return f.ShardsCounted(ctx, []store.ShardRef{{Batch: a.Batch, Shard: a.Shard}})
}

// settleStale settles the member adds among adds (read from the sweep's
// index) that are older than AddStale (their writer crashed, or could not
// tell whether a record landed): it reads each add's members (strongly
// consistent) and takes back those that do not exist. Cost: per stale add
// one read and one batch read; nothing for the rest.
func (f *Flow) settleStale(ctx context.Context, adds []store.AddRef) error {
	cut := f.store.Now().Add(-f.opt.AddStale)
	var errs []error
	for _, ref := range adds {
		if !ref.Created.Before(cut) {
			continue
		}
		a, err := f.store.MemberAddAt(ctx, ref)
		if err != nil || a == nil {
			errs = append(errs, err)
			continue
		}
		ts, err := f.store.GetManyConsistent(ctx, a.Members)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		written := 0
		for _, t := range ts {
			if t.BatchID == a.Batch {
				written++
			}
		}
		if err := f.settleAdd(ctx, a, len(a.Members)-written); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
