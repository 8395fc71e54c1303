package control

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/triagetype"
)

// Concurrency slots: a limit of n is n slot items (prefix<i>, prefix
// "CONC#<type>#" or "CONC#<scope>#"), each naming the run that holds it:
// the task, the progress token its claim writes (one per attempt) and the
// dispatch version its claim is conditional on, with a lease (the task's
// timeout plus 30 s).
//
// A run costs one write: taking its slot, a conditional write that names
// it. Its end writes nothing to the slot: the task's own record already
// says the run is over, so a later claimant takes a slot whose holder's
// run has ended, conditional on the holder being the one it read:
//   - a slot with no holder, or whose lease ran out (a run whose consumer
//     crashed before its record said anything), is free;
//   - otherwise the holder's task is read (strongly consistent) and the
//     slot is free when the task is terminal, when the token is the task's
//     and the task is not executing (the run ended: finished, failed,
//     retrying, suspended, recovered after a crash), or when the token is
//     not the task's and its dispatch version moved on (the claim of that
//     run can no longer succeed, or a later attempt replaced it). A task
//     not found, or one still at the run's dispatch version under another
//     token (its claim is on its way), holds the slot.
//
// So at most n runs of the scope hold a slot at once: a slot changes hands
// only by a conditional write that names its previous holder, and only
// once that holder's run can no longer be executing. A run that never
// started (refused by a later control, its claim lost) writes its slot
// free at once, so the record's silence is never mistaken for a run.
//
// Reads are 5× cheaper than writes and only a claimant that does not know
// of a free slot makes them: a consumer remembers the slots of the runs
// it saw end (freed) and takes one of those first, with no read.

// slotPrefix is the prefix of sc's slot items: "CONC#<type>#" for a type,
// "CONC#<scope>#" for a keyed scope.
func slotPrefix(sc Scope) string {
	if sc.Key == "" {
		return "CONC#" + sc.Type + "#"
	}
	return "CONC#" + sc.String() + "#"
}

// slotRun is the run a slot is taken for.
type slotRun struct {
	task  string // the task's id
	token string // the progress token its claim writes
	dv    int64  // the dispatch version its claim is conditional on
}

// slotRef is one slot and its holder, as last seen.
type slotRef struct {
	pk    string
	run   slotRun
	until int64 // lease end, Unix ms
	// ended, set by runsEnded, is when the run's task finished
	// (completed_at), zero when its record does not say (a run that
	// ended without finishing the task: a retry, a hand-back).
	ended time.Time
}

// slotHold is a slot taken for a run.
type slotHold struct {
	c       *Controls
	prefix  string
	ref     slotRef
	started atomic.Bool
	once    sync.Once
}

// start records that the run's claim was written: from then on the task's
// record tells when the run ends, and the release writes nothing.
func (h *slotHold) start() { h.started.Store(true) }

// release gives the slot back once: a run that started leaves it to the
// next claimant (and tells this process's next claim of the scope which
// slot it is); one that never did writes it free.
func (h *slotHold) release() {
	h.once.Do(func() {
		if h.started.Load() {
			h.c.addFreed(h.prefix, h.ref)
			return
		}
		h.c.freeSlot(h.ref.pk, h.ref.run)
	})
}

// freedCap bounds the freed slots a process remembers per scope, and
// takenOverCap the runs whose slots a claim took over.
const (
	freedCap     = 64
	takenOverCap = 1024
)

// addFreed remembers that ref's run ended, for this process's next claim.
func (c *Controls) addFreed(prefix string, ref slotRef) {
	c.slotsMu.Lock()
	defer c.slotsMu.Unlock()
	if c.takenOver[takenKey(ref.pk, ref.run)] {
		return // a claim here took the slot over before the run's release
	}
	if c.freed == nil {
		c.freed = map[string][]slotRef{}
	}
	if l := c.freed[prefix]; len(l) < freedCap {
		c.freed[prefix] = append(l, ref)
	}
}

// popFreed takes the latest remembered freed slot of prefix below n.
func (c *Controls) popFreed(prefix string, n int) (slotRef, bool) {
	c.slotsMu.Lock()
	defer c.slotsMu.Unlock()
	for l := c.freed[prefix]; len(l) > 0; l = c.freed[prefix] {
		ref := l[len(l)-1]
		c.freed[prefix] = l[:len(l)-1]
		if i, err := strconv.Atoi(ref.pk[len(prefix):]); err == nil && i < n {
			return ref, true
		}
	}
	return slotRef{}, false
}

// slotReadFirst is how many slots a claimant reads in its first round;
// each later round reads twice as many, up to a BatchGetItem's 100.
const slotReadFirst = 2

// takeSlotAt claims one of the n slot items prefix<i> for run, looking at
// up to tries of them in random order (after the slots this process saw
// freed). It returns nil when none of those is free.
func (c *Controls) takeSlotAt(ctx context.Context, prefix string, run slotRun, n, tries int, lease time.Duration) (*slotHold, error) {
	now := c.now()
	until := now.Add(lease).UnixMilli()
	hold := func(pk string) *slotHold {
		return &slotHold{c: c, prefix: prefix, ref: slotRef{pk: pk, run: run, until: until}}
	}
	for {
		ref, ok := c.popFreed(prefix, n)
		if !ok {
			break
		}
		ok, err := c.tryPut(ctx, prefix, ref.pk, run, until, now, &ref.run)
		if err != nil {
			return nil, err
		}
		if ok {
			return hold(ref.pk), nil
		}
	}
	order := rand.Perm(n)[:min(n, tries)]
	for size := slotReadFirst; len(order) > 0; size = min(2*size, 100) {
		round := order[:min(size, len(order))]
		order = order[len(round):]
		refs, err := c.readSlots(ctx, prefix, round, false)
		if err != nil {
			return nil, err
		}
		var held []slotRef
		for _, r := range refs {
			if r.run.task != "" && r.until >= now.UnixMilli() {
				held = append(held, r)
				continue
			}
			ok, err := c.tryPut(ctx, prefix, r.pk, run, until, now, nil)
			if err != nil {
				return nil, err
			}
			if ok {
				return hold(r.pk), nil
			}
		}
		ended, err := c.runsEnded(ctx, held)
		if err != nil {
			return nil, err
		}
		for _, r := range ended {
			ok, err := c.tryPut(ctx, prefix, r.pk, run, until, now, &r.run)
			if err != nil {
				return nil, err
			}
			if ok {
				return hold(r.pk), nil
			}
		}
	}
	return nil, nil
}

// tryPut is putSlot unless another claim in this process is writing slot
// pk already, or took it from prev already (it skips the slot: claims of
// one process never spend a write racing for one slot). A slot taken is no
// longer remembered freed.
func (c *Controls) tryPut(ctx context.Context, prefix, pk string, run slotRun, until int64, now time.Time, prev *slotRun) (bool, error) {
	c.slotsMu.Lock()
	if c.writing == nil {
		c.writing = map[string]bool{}
	}
	if c.writing[pk] || (prev != nil && c.takenOver[takenKey(pk, *prev)]) {
		c.slotsMu.Unlock()
		return false, nil // being written, or taken from prev already (a stale read)
	}
	c.writing[pk] = true
	c.slotsMu.Unlock()
	ok, err := c.putSlot(ctx, pk, run, until, now, prev)
	c.slotsMu.Lock()
	delete(c.writing, pk)
	if ok && prev != nil {
		if c.takenOver == nil || len(c.takenOver) >= takenOverCap {
			c.takenOver = map[string]bool{} // entries of other processes' runs, never released here
		}
		c.takenOver[takenKey(pk, *prev)] = true
	}
	if ok && len(c.freed[prefix]) > 0 {
		l := c.freed[prefix][:0]
		for _, r := range c.freed[prefix] {
			if r.pk != pk {
				l = append(l, r)
			}
		}
		c.freed[prefix] = l
	}
	c.slotsMu.Unlock()
	return ok, err
}

// takenKey names slot pk as held by run, in Controls.takenOver. It is
// the slot and the run, not the run alone: a run holds a slot in each of
// its scopes (a key's and its (type, key)'s) under one token, and taking
// one of them over says nothing of the others. Keyed by the token alone,
// a process that took a finished run's key slot over skipped that run's
// (type, key) slot for good, as if taken already, while the slot still
// named the finished run: every claim of the scope there was refused
// until the slot's lease ran out (the task's timeout plus 30 s), and with
// both consumers so, TestKeyedConcurrencyAcrossConsumers left its tasks
// queued past its 3 minutes.
func takenKey(pk string, run slotRun) string { return pk + "\x00" + run.token }

// putSlot writes run into slot pk, conditional on the slot being free as
// seen: no holder or a lapsed lease, or (prev) still held by prev's run.
func (c *Controls) putSlot(ctx context.Context, pk string, run slotRun, until int64, now time.Time, prev *slotRun) (bool, error) {
	cond := "attribute_not_exists(#h) OR #l < :now"
	vals := map[string]types.AttributeValue{
		":id":    &types.AttributeValueMemberS{Value: run.task},
		":run":   &types.AttributeValueMemberS{Value: run.token},
		":dv":    &types.AttributeValueMemberN{Value: strconv.FormatInt(run.dv, 10)},
		":until": &types.AttributeValueMemberN{Value: strconv.FormatInt(until, 10)},
		":now":   &types.AttributeValueMemberN{Value: strconv.FormatInt(now.UnixMilli(), 10)},
	}
	if prev != nil {
		cond += " OR (#h = :ph AND #r = :pr)"
		vals[":ph"] = &types.AttributeValueMemberS{Value: prev.task}
		vals[":pr"] = &types.AttributeValueMemberS{Value: prev.token}
	}
	_, err := c.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &c.table, Key: key(pk),
		UpdateExpression:          aws.String("SET #h = :id, #r = :run, #dv = :dv, #l = :until"),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  map[string]string{"#h": "holder", "#r": "run", "#dv": "dv", "#l": "lease_until"},
		ExpressionAttributeValues: vals,
	})
	if isConditionFailed(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("concurrency slot %s: %w", pk, err)
	}
	return true, nil
}

// readSlots reads slots prefix<i> for each i: eventually consistent for a
// claim (a stale view only makes a conditional write fail), consistent
// for SlotFreeAfterHold. A slot never written comes back with no holder.
func (c *Controls) readSlots(ctx context.Context, prefix string, idx []int, consistent bool) ([]slotRef, error) {
	keys := make([]map[string]types.AttributeValue, len(idx))
	for j, i := range idx {
		keys[j] = key(prefix + strconv.Itoa(i))
	}
	items, err := c.batchGet(ctx, keys, consistent, "#pk, #h, #r, #dv, #l", map[string]string{"#pk": spec.AttrPK, "#h": "holder", "#r": "run", "#dv": "dv", "#l": "lease_until"})
	if err != nil {
		return nil, fmt.Errorf("read concurrency slots %s*: %w", prefix, err)
	}
	found := map[string]slotRef{}
	for _, it := range items {
		r := slotRef{pk: str(it[spec.AttrPK])}
		r.run.task, r.run.token = str(it["holder"]), str(it["run"])
		r.run.dv, r.until = num(it["dv"]), num(it["lease_until"])
		found[r.pk] = r
	}
	out := make([]slotRef, len(idx))
	for j, i := range idx {
		pk := prefix + strconv.Itoa(i)
		if r, ok := found[pk]; ok {
			out[j] = r
		} else {
			out[j] = slotRef{pk: pk}
		}
	}
	return out, nil
}

// SlotFreeAfterHold is asked once a task has been set aside in scope for
// its concurrency limit, or behind its set-aside tasks (Decision.Slots),
// its hold written: it makes sure the scope's held flag is up and says
// whether one of the scope's slots is free now with no one else to
// release a task for it, in which case the caller releases the scope's
// head itself. released says the task set aside had been released
// (promise).
//
// Invariant: a task set aside for a concurrency limit is released when a
// slot frees or is free, without the promoter. A task's end writes its
// record and then reads the flag (ScopeHeld, consistent) or, if its
// admission saw the scope held, releases the head outright (EndNext); the
// setter here reads the flag after its hold (raising it if a release
// cleared it meanwhile) and then the slots and their holders' records,
// all consistent. So an end whose flag read came before the flag was up
// had written its record before these reads, and its slot shows free
// here; an end after it sees the flag and releases the head. The setter
// tells the two apart by time: a run that finished later than the flag's
// raise plus FlagSettle saw it (endSawFlag), and its slot is left to its
// end's release; a slot never taken, past its lease, or whose run ended
// before that has no one else to release for it, and the first setter of
// this process to see it releases for it, once (promise). A sampled slot
// held by a running task leaves the release to that task's end, so
// reading a sample (at most slotTries of the scope's slots, at random)
// suffices: with a scope of more slots a free slot may go unseen here,
// and the head then starts at the next end. Without this look the setter
// trusted the refusal's read, made before its hold: a slot freed between
// the two went to waste, and when the scope's last running tasks ended
// in that gap the held task waited for the promoter's sweep.
//
// Cost, per task set aside for a concurrency limit or behind its scope's
// set-aside tasks: one consistent read of the scope's settings item (1
// read unit), one consistent BatchGetItem of min(n, slotTries) slots (1
// read unit each), one of their holders' records (1 read unit each,
// those still named, skipped when a slot is free outright); no write
// unless the flag was cleared (then one).
func (c *Controls) SlotFreeAfterHold(ctx context.Context, scope string, released bool) (bool, error) {
	sc, ok := ParseScope(scope)
	if !ok || sc.Fair != "" {
		return false, nil
	}
	s, err := c.refreshScope(ctx, sc)
	if err != nil {
		return false, err
	}
	if s.MaxConcurrency <= 0 {
		return true, nil // the limit was lifted: the head may go
	}
	since := s.HeldSince
	if !s.Held {
		// A release found the scope empty and cleared the flag before
		// this hold was written: raised again (the cache now says it
		// is down, so MarkHeld writes), or no end would release it.
		if err := c.MarkHeld(ctx, scope); err != nil {
			return false, err
		}
		since = nil // raised now: no end so far can have seen it
	}
	n := s.MaxConcurrency
	refs, err := c.readSlots(ctx, slotPrefix(sc), rand.Perm(n)[:min(n, slotTries)], true)
	if err != nil {
		return false, err
	}
	now := c.now()
	var free, held []slotRef
	for _, r := range refs {
		if r.run.task == "" || r.until < now.UnixMilli() {
			free = append(free, r)
		} else {
			held = append(held, r)
		}
	}
	if c.promise(free, now, released) {
		return true, nil
	}
	ended, err := c.runsEnded(ctx, held)
	if err != nil {
		return false, err
	}
	free = free[:0]
	for _, r := range ended {
		if !endSawFlag(r.ended, since) {
			free = append(free, r)
		}
	}
	return c.promise(free, now, released), nil
}

// SlotPromise is how long a free slot, once a setter in this process
// released a scope's head for it, is not counted free again by this
// process's setters: time for the released task to arrive and take it.
// Without it, a burst of set-asides that all saw the same free slot each
// released a task, and all but one found no slot and were set aside again
// (95 releases for 2 slots, about 4 write units each).
const SlotPromise = 5 * time.Second

// promiseCap bounds the slots a process remembers promising.
const promiseCap = 1024

// promise picks the first of free that no setter in this process released
// a head for within SlotPromise, and records it; it reports whether there
// was one. A released task that was refused and set aside again
// (released) may use a promised slot: the release it was given for that
// slot did not take it, and no one else would release for it.
func (c *Controls) promise(free []slotRef, now time.Time, released bool) bool {
	if len(free) == 0 {
		return false
	}
	c.slotsMu.Lock()
	defer c.slotsMu.Unlock()
	if c.promised == nil || len(c.promised) >= promiseCap {
		c.promised = map[string]time.Time{}
	}
	for _, r := range free {
		k := takenKey(r.pk, r.run)
		if at, ok := c.promised[k]; ok && now.Sub(at) < SlotPromise && !released {
			continue
		}
		c.promised[k] = now
		return true
	}
	return false
}

// FlagSettle bounds how long after a held flag's raise is stamped
// (HeldSince, the raiser's clock before its write) the raise is visible
// to a consistent read in any process: the write's own latency plus the
// clock skew between processes. A run that finished (its completed_at,
// stamped before its record's write) later than HeldSince + FlagSettle
// read the flag after the raise, saw it up, and releases the scope's next
// set-aside task itself (ScopeHeld at its end, or EndNext). Were the bound
// exceeded, a wakeup would be missed and the task would wait for the
// promoter's sweep of held scopes, never lost.
const FlagSettle = 2 * time.Second

// endSawFlag says whether a run that ended at ended read the held flag
// raised at since after the raise, so its end releases the scope's next
// set-aside task and the setter must not release one too (doing so would
// release a task that finds no slot and is set aside again: a release and
// a hold, about 5 write units, and with every set-aside looking again, a
// cascade). Unknown times (a run that did not finish its task, a flag
// raised by an older version or just now) count as not seen.
func endSawFlag(ended time.Time, since *time.Time) bool {
	return since != nil && !ended.IsZero() && ended.After(since.Add(FlagSettle))
}

// runsEnded reads the tasks holding held (strongly consistent, one
// BatchGetItem) and returns the slots whose runs have ended.
func (c *Controls) runsEnded(ctx context.Context, held []slotRef) ([]slotRef, error) {
	if len(held) == 0 {
		return nil, nil
	}
	seen := map[string]bool{}
	var keys []map[string]types.AttributeValue
	for _, r := range held {
		if !seen[r.run.task] {
			seen[r.run.task] = true
			keys = append(keys, key(spec.TaskKeyPrefix+r.run.task))
		}
	}
	items, err := c.batchGet(ctx, keys, true, "#pk, #st, #tok, #dv, #ca", map[string]string{"#pk": spec.AttrPK, "#st": "status", "#tok": "progress_token", "#dv": "dispatch_version", "#ca": "completed_at"})
	if err != nil {
		return nil, fmt.Errorf("read concurrency slot holders: %w", err)
	}
	recs := map[string]map[string]types.AttributeValue{}
	for _, it := range items {
		recs[str(it[spec.AttrPK])[len(spec.TaskKeyPrefix):]] = it
	}
	var out []slotRef
	for _, r := range held {
		rec := recs[r.run.task]
		if runEnded(rec, r.run) {
			if triagetype.Status(str(rec["status"])).Terminal() {
				r.ended, _ = time.Parse(time.RFC3339Nano, str(rec["completed_at"]))
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// runEnded says whether run can no longer be executing, by its task's
// record rec (nil when there is none).
func runEnded(rec map[string]types.AttributeValue, run slotRun) bool {
	if rec == nil || run.token == "" {
		return false // not recorded yet, or a holder that names no run: its lease decides
	}
	st := triagetype.Status(str(rec["status"]))
	switch {
	case st.Terminal():
		return true
	case str(rec["progress_token"]) == run.token:
		return st != triagetype.Executing
	default:
		return num(rec["dispatch_version"]) != run.dv
	}
}

// batchGet reads keys (at most 100) with one BatchGetItem, retrying
// unprocessed keys a few times; keys still unprocessed are left out.
func (c *Controls) batchGet(ctx context.Context, keys []map[string]types.AttributeValue, consistent bool, proj string, names map[string]string) ([]map[string]types.AttributeValue, error) {
	req := map[string]types.KeysAndAttributes{c.table: {Keys: keys, ConsistentRead: aws.Bool(consistent), ProjectionExpression: aws.String(proj), ExpressionAttributeNames: names}}
	var out []map[string]types.AttributeValue
	for try := 0; len(req) > 0 && try < 3; try++ {
		res, err := c.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
		if err != nil {
			return nil, err
		}
		out = append(out, res.Responses[c.table]...)
		req = res.UnprocessedKeys
	}
	return out, nil
}

// freeSlot gives back the slot of a run that never started: only its own
// holder's write, so a slot taken over meanwhile is left as it is.
func (c *Controls) freeSlot(pk string, run slotRun) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// On an error the lease gives the slot back.
	_, _ = c.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &c.table, Key: key(pk),
		UpdateExpression:         aws.String("REMOVE #h, #r, #dv, #l"),
		ConditionExpression:      aws.String("#h = :id AND #r = :run"),
		ExpressionAttributeNames: map[string]string{"#h": "holder", "#r": "run", "#dv": "dv", "#l": "lease_until"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":id":  &types.AttributeValueMemberS{Value: run.task},
			":run": &types.AttributeValueMemberS{Value: run.token},
		},
	})
}

func str(v types.AttributeValue) string {
	if s, ok := v.(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

func num(v types.AttributeValue) int64 {
	if n, ok := v.(*types.AttributeValueMemberN); ok {
		i, _ := strconv.ParseInt(n.Value, 10, 64)
		return i
	}
	return 0
}
