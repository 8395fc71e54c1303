package control

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/metrics"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Scopes. A control applies to everything (global), a task type, a key, or
// one type's tasks of one key. Its String is the scope's name: in a
// set-aside task's Held and its by-due partition ("type#<type>",
// "key#<key>", "tk#<type>#<key>"), unambiguous because types and keys
// never contain '#'.
type Scope struct {
	Type, Key string
	// Fair, when set, is a priority: the scope is the key's fair share at
	// that priority (fair.go), not a control.
	Fair triagetype.Priority
}

// TypeScope is the scope of one task type.
func TypeScope(typ string) Scope { return Scope{Type: typ} }

func (s Scope) String() string {
	switch {
	case s.Fair != "":
		return "fair#" + string(s.Fair) + "#" + s.Key
	case s.Type != "" && s.Key != "":
		return "tk#" + s.Type + "#" + s.Key
	case s.Key != "":
		return "key#" + s.Key
	case s.Type != "":
		return "type#" + s.Type
	}
	return ""
}

// ParseScope reads a scope's name back.
func ParseScope(name string) (Scope, bool) {
	kind, rest, _ := strings.Cut(name, "#")
	switch kind {
	case "fair":
		p, key, ok := strings.Cut(rest, "#")
		return Scope{Fair: triagetype.Priority(p), Key: key}, ok && p != "" && key != ""
	case "type":
		return Scope{Type: rest}, rest != ""
	case "key":
		return Scope{Key: rest}, rest != ""
	case "tk":
		typ, key, ok := strings.Cut(rest, "#")
		return Scope{Type: typ, Key: key}, ok && typ != "" && key != ""
	}
	return Scope{}, false
}

// item is the key of the scope's settings item.
func (s Scope) item() string {
	switch {
	case s.Fair != "":
		return "CTRL#fair#" + string(s.Fair) + "#" + s.Key
	case s.Type != "" && s.Key != "":
		return "CTRL#tk#" + s.Type + "#" + s.Key
	case s.Key != "":
		return "CTRL#key#" + s.Key
	}
	return settingsKey(s.Type)
}

// Decision is the gate's answer for one task.
type Decision struct {
	// Release, when set, admits the task; its holder calls it once when
	// the task ends, or when its claim is not written after all.
	Release func()
	// Started, set with Release, is called once the task's claim is
	// written: its concurrency slots then stay named by the run until a
	// later claimant sees from the task's record that the run ended, so
	// Release writes nothing (slots.go). Without the call, Release writes
	// them free.
	Started func()
	// Scope, when set on a refusal, is where the task is set aside (held
	// in the table, in submit order) rather than hidden and received again.
	Scope string
	// StartNext: scopes whose next set-aside task to release now (a scope
	// with no limit, draining after a resume: one admitted, one released).
	StartNext []string
	// EndNext: scopes whose next set-aside task to release when this one
	// ends (its concurrency slot frees).
	EndNext []string
	// EndIfHeld: concurrency-limited scopes that held no tasks as this
	// admission saw them; when the task ends, the scope's next set-aside
	// task is released if it holds some by then (ScopeHeld, a consistent
	// read made after the end is written). Without it, a scope whose
	// running tasks were all admitted before its first task was set aside
	// would free its slots and release nobody, leaving its held tasks to
	// the promoter's sweep.
	//
	// On a refusal, EndNext and EndIfHeld name the concurrency scopes whose
	// slots this decision took and gave back when a later scope refused:
	// the caller wakes them as a task's end would, as a task set aside for
	// that slot meanwhile may have no running task left to release it.
	EndIfHeld []string
	// NextWindow: rate-limited scopes with tasks set aside, whose window
	// releaser must run (the consumer uses Scope; After and N say when the
	// next window opens and what it allows).
	NextWindow []WindowRelease
	// Delay is how long to wait before trying again: the message's hide
	// time when it is not set aside; for a rate refusal, when the next
	// window opens and the scope's next tasks can be released.
	Delay time.Duration
	// Batch, on a rate refusal or a refusal behind the set-aside tasks of
	// a rate-limited scope, is the scope's window's worth of starts; the
	// consumer's window releaser releases that many when the next window
	// opens. Zero on other refusals, and behind_held in a scope without a
	// rate (its head is released at once, unless Slots).
	Batch int
	// Slots, on a behind_held refusal in a scope with a concurrency limit
	// and no rate, says its head waits for a slot: the running tasks'
	// ends release it, and the setter releases it only when a slot is
	// free that no end will release (SlotFreeAfterHold), as after a
	// concurrency refusal. Releasing the head at once instead sent it to
	// find no slot and be set aside again: a release and a hold, about 4
	// write units, for nearly every task of a backlog at its limit.
	Slots bool
	Why   metrics.PutOff
	// At, on an admission a rate limit counted (a start taken in the
	// current window, or a release's reservation found open), is the
	// clock the count was judged by: the consumer records it as the
	// attempt's started_at, so each start's time falls in the window that
	// counted it and a limit of n a window never shows more than n starts
	// stamped in one window. Zero when no rate limit counted the start.
	At time.Time
}

// WindowRelease asks for n of scope's set-aside tasks after a wait.
type WindowRelease struct {
	Scope string
	After time.Duration
	N     int
}

// Decide is the consumer's gate with set-aside: it refuses a start while
// everything is paused (hide and look again: the consumer stops receiving
// meanwhile), and sets the task aside in its type's scope while the type
// is paused, at its rate or concurrency limit, or has earlier tasks set
// aside that t must not overtake (unless t was released from them, or the
// scope's only limit is its rate: rateOnly).
//
// t.ProgressToken must be the token t's claim will write (a fresh one per
// attempt): a concurrency slot names it, and the slot is taken over once
// the task's record shows that run ended.
func (c *Controls) Decide(ctx context.Context, t *task.Task) (Decision, error) {
	global, err := c.cachedGet(ctx, "")
	if err != nil {
		return Decision{Why: metrics.PutOffControlError, Delay: time.Second}, err
	}
	if global.Paused && t.Released {
		// Released by a global resume this process may not have seen
		// yet: one fresh read, for released tasks only (as for a type).
		if global, err = c.refresh(ctx, ""); err != nil {
			return Decision{Why: metrics.PutOffControlError, Delay: time.Second}, err
		}
	}
	if global.Paused {
		// Received while the pause spread (a consumer stops receiving
		// within a pause check of it): set aside in its type's scope, in
		// its place among the tasks submitted after it (held there at
		// submit, Route) rather than hidden and received again behind
		// them. The global resume releases it.
		return Decision{Scope: TypeScope(t.Type).String(), Why: metrics.PutOffPaused}, nil
	}
	typ, err := c.cachedGet(ctx, t.Type)
	if err != nil {
		return Decision{Why: metrics.PutOffControlError, Delay: time.Second}, err
	}
	if typ.Paused && t.Released {
		// Released by a resume this process may not have seen yet: a
		// stale cache would set it aside again and delay the first start
		// by a TTL. One fresh read, for released tasks only.
		if typ, err = c.refresh(ctx, t.Type); err != nil {
			return Decision{Why: metrics.PutOffControlError, Delay: time.Second}, err
		}
	}
	scope := TypeScope(t.Type).String()
	switch {
	case typ.Paused:
		return Decision{Scope: scope, Why: metrics.PutOffPaused}, nil
	case waiting(typ, c.now()):
		return Decision{Scope: scope, Why: metrics.PutOffRetryAfter, Delay: typ.WaitUntil.Sub(c.now())}, nil
	case typ.Held && !t.Released && !rateOnly(typ):
		return Decision{Scope: scope, Why: metrics.PutOffBehindHeld, Batch: rateBatch(typ.RateLimitPerSecond), Slots: slotBound(typ)}, nil
	}
	var at time.Time // when a rate limit counted this start
	if typ.RateLimitPerSecond > 0 {
		at = c.now()
		_, slot, _, _ := rateWindow("", typ.RateLimitPerSecond, at)
		counted, early := reserved(t, scope, slot)
		if early > 0 {
			// Released for a window not open yet: hidden until it opens.
			return Decision{Delay: early, Why: metrics.PutOffRate}, nil
		}
		if !counted {
			ok, wait, err := c.takeRate(ctx, t.Type, typ.RateLimitPerSecond, at)
			if err != nil {
				return Decision{Why: metrics.PutOffControlError, Delay: time.Second}, err
			}
			if !ok {
				return Decision{Scope: scope, Delay: wait, Batch: windowStarts(typ.RateLimitPerSecond), Why: metrics.PutOffRate}, nil
			}
		}
	}
	d := Decision{Release: func() {}, At: at}
	if typ.Held && typ.RateLimitPerSecond > 0 {
		d.NextWindow = append(d.NextWindow, c.nextWindow(scope, typ.RateLimitPerSecond))
	}
	if typ.MaxConcurrency > 0 {
		lease := time.Duration(t.TimeoutSeconds)*time.Second + 30*time.Second
		h, err := c.takeSlot(ctx, t, typ.MaxConcurrency, lease)
		if err != nil {
			return Decision{Why: metrics.PutOffControlError, Delay: time.Second}, err
		}
		if h == nil {
			return Decision{Scope: scope, Delay: ConcurrencyRecheck, Why: metrics.PutOffConcurrency}, nil
		}
		d.Release, d.Started = h.release, h.start
		if typ.Held {
			d.EndNext = []string{scope}
		} else {
			d.EndIfHeld = []string{scope}
		}
		d, err = c.decideKeyed(ctx, t, d)
		if err != nil || d.Release == nil {
			return d, err
		}
		return c.decideFair(ctx, t, d), nil
	}
	if typ.Held && typ.RateLimitPerSecond == 0 {
		d.StartNext = []string{scope}
	}
	d, err = c.decideKeyed(ctx, t, d)
	if err != nil || d.Release == nil {
		return d, err
	}
	return c.decideFair(ctx, t, d), nil
}

// decideFair adds, to an admission, the release of the next held task of
// t's key at its priority when that key is past its window (fair.go): one
// start, one release, so the key keeps its window on the queue.
func (c *Controls) decideFair(ctx context.Context, t *task.Task, d Decision) Decision {
	fs := Scope{Fair: t.EffectivePriority, Key: t.FairKey()}
	s, err := c.cachedScope(ctx, fs)
	if err == nil && s.Held {
		d.StartNext = append(d.StartNext, fs.String())
	}
	return d
}

// waiting reports whether a Retry-After holds s at now.
func waiting(s Settings, now time.Time) bool { return s.WaitUntil != nil && now.Before(*s.WaitUntil) }

// Wait holds scope until until, as a handler's Retry-After asked: its
// tasks are set aside meanwhile (Decide). One write of the scope's
// settings item; a keyed scope is added to the keyed registry so every
// consumer looks at it.
func (c *Controls) Wait(ctx context.Context, scope string, until time.Time) error {
	sc, ok := ParseScope(scope)
	if !ok {
		return fmt.Errorf("wait: bad scope %q", scope)
	}
	if sc.Key == "" {
		_, err := c.update(ctx, sc.Type, expression.Set(expression.Name("wait_until"), expression.Value(until.UTC())).
			Set(expression.Name("paused"), expression.IfNotExists(expression.Name("paused"), expression.Value(false))))
		return err
	}
	t := until.UTC()
	_, err := c.setKeyed(ctx, sc, func(u expression.UpdateBuilder) expression.UpdateBuilder {
		return u.Set(expression.Name("wait_until"), expression.Value(t))
	})
	return err
}

const fairRegistry = "CTRL#fair"

// fairRegistry adds (op "ADD") or removes ("DELETE") scope in the list of
// held fair scopes.
func (c *Controls) fairRegistry(ctx context.Context, op, scope string) error {
	_, err := c.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &c.table, Key: key(fairRegistry),
		UpdateExpression:          aws.String(op + " #s :s"),
		ExpressionAttributeNames:  map[string]string{"#s": "scopes"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":s": &types.AttributeValueMemberSS{Value: []string{scope}}},
	})
	if err != nil {
		return fmt.Errorf("fair registry %s %s: %w", op, scope, err)
	}
	return nil
}

// rateOnly says whether s's only limit is its rate (nothing pauses it):
// then a task arriving while s holds tasks is not set aside behind them
// but takes the rate like any other, and is set aside only when the
// window is spent. Order yields to throughput there: a backlog's first
// receives (each set aside) sit in SQS ahead of the windows released
// meanwhile, and with every arrival behind the held tasks the scope would
// start nothing until the whole backlog had been received once (seconds
// at a thousand tasks). The set-aside tasks still go first when their
// window opens: they are released to arrive as it does.
func rateOnly(s Settings) bool { return s.RateLimitPerSecond > 0 && s.MaxConcurrency == 0 }

// slotBound says whether a held scope's head waits for a concurrency slot
// (Decision.Slots).
func slotBound(s Settings) bool {
	return s.MaxConcurrency > 0 && s.RateLimitPerSecond <= 0
}

// rateBatch is windowStarts for a scope with a rate, and 0 without one.
func rateBatch(perSecond float64) int {
	if perSecond <= 0 {
		return 0
	}
	return windowStarts(perSecond)
}

// windowStarts is the starts one rate window allows.
func windowStarts(perSecond float64) int {
	_, _, _, limit := rateWindow("", perSecond, time.Time{})
	return limit
}

// nextWindow releases a window's worth of scope's tasks when the next
// window opens.
func (c *Controls) nextWindow(scope string, perSecond float64) WindowRelease {
	now := c.now()
	_, slot, window, limit := rateWindow("", perSecond, now)
	return WindowRelease{Scope: scope, After: slot.Add(window).Sub(now), N: limit}
}

// GlobalPaused reports whether everything is paused, from a read at most
// maxAge old: the consumer asks before each receive and sleeps instead of
// polling while it is, so a paused deployment makes no SQS requests.
func (c *Controls) GlobalPaused(ctx context.Context, maxAge time.Duration) (bool, error) {
	c.mu.Lock()
	e, ok := c.cache[""]
	c.mu.Unlock()
	if ok && c.now().Sub(e.at) < min(maxAge, c.ttl) {
		return e.s.Paused, nil
	}
	s, err := c.Get(ctx, "")
	if err != nil {
		return false, err
	}
	c.mu.Lock()
	c.cache[""] = cached{s: s, at: c.now()}
	c.mu.Unlock()
	return s.Paused, nil
}

// refresh reads typ's settings past the cache and caches them.
func (c *Controls) refresh(ctx context.Context, typ string) (Settings, error) {
	s, err := c.Get(ctx, typ)
	if err != nil {
		return s, err
	}
	c.mu.Lock()
	c.cache[typ] = cached{s: s, at: c.now()}
	c.mu.Unlock()
	return s, nil
}

// MarkHeld records that scope has tasks set aside, before the first one is
// written (so a task is never held in a scope whose flag is down for
// longer than a consumer's cache TTL): one write, made only when this
// process's cached settings say the flag is down. New arrivals of a held
// scope join the back of its set-aside tasks. A raise stamps held_since
// (kept while the flag stays up, removed by ClearHeld), which tells a
// setter which ends saw the flag (SlotFreeAfterHold).
func (c *Controls) MarkHeld(ctx context.Context, scope string) error {
	sc, ok := ParseScope(scope)
	if !ok {
		return fmt.Errorf("mark held: bad scope %q", scope)
	}
	c.mu.Lock()
	e, fresh := c.cache[sc.cacheKey()]
	c.mu.Unlock()
	if fresh && e.s.Held && c.now().Sub(e.at) < c.ttl {
		return nil
	}
	_, err := c.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &c.table, Key: key(sc.item()),
		UpdateExpression:         aws.String("SET #h = :t, #hs = if_not_exists(#hs, :now)"),
		ExpressionAttributeNames: map[string]string{"#h": "held", "#hs": "held_since"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":t":   &types.AttributeValueMemberBOOL{Value: true},
			":now": &types.AttributeValueMemberS{Value: c.now().UTC().Format(time.RFC3339Nano)},
		},
	})
	if err != nil {
		return fmt.Errorf("mark %s held: %w", scope, err)
	}
	if sc.Type != "" && sc.Key == "" {
		// A type held with no controls of its own (everything paused):
		// registered, so HeldScopes (a global resume, the sweep) sees it.
		if err := c.registerType(ctx, sc.Type); err != nil {
			return err
		}
	}
	if sc.Fair != "" {
		// Fair scopes come and go with floods: listed while held, so the
		// promoter's sweep can find them (at ~150 bytes each, 400 KB lists
		// 2,000 keys flooding at once; past that MarkHeld fails and the
		// key's tasks are sent to the queue as before).
		if err := c.fairRegistry(ctx, "ADD", scope); err != nil {
			return err
		}
	}
	c.mu.Lock()
	if e, ok := c.cache[sc.cacheKey()]; ok {
		e.s.Held = true
		c.cache[sc.cacheKey()] = e
	}
	c.mu.Unlock()
	return nil
}

// ClearHeld lowers scope's flag once a release found nothing set aside,
// and stamps when (held_cleared): a consumer whose cache still showed the
// flag up may set a task aside within its cache TTL after, so the
// promoter's sweep looks at recently cleared scopes too (HeldScopes).
func (c *Controls) ClearHeld(ctx context.Context, scope string) error {
	sc, ok := ParseScope(scope)
	if !ok {
		return fmt.Errorf("clear held: bad scope %q", scope)
	}
	_, err := c.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &c.table, Key: key(sc.item()),
		UpdateExpression:         aws.String("SET #h = :f, #c = :now REMOVE #hs"),
		ConditionExpression:      aws.String("#h = :t"),
		ExpressionAttributeNames: map[string]string{"#h": "held", "#c": "held_cleared", "#hs": "held_since"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":f": &types.AttributeValueMemberBOOL{Value: false}, ":t": &types.AttributeValueMemberBOOL{Value: true},
			":now": &types.AttributeValueMemberN{Value: strconv.FormatInt(c.now().UnixMilli(), 10)},
		},
	})
	if err != nil && !isConditionFailed(err) {
		return fmt.Errorf("clear %s held: %w", scope, err)
	}

	c.forget(sc)
	return nil
}

// HeldScopes lists the scopes the promoter's sweep looks at: those whose
// flag is up, and those cleared within recent, with whether each can run
// now (nothing pauses it). One read of the registry and one of each
// scope's settings: controls are few.
func (c *Controls) HeldScopes(ctx context.Context, recent time.Duration) (map[string]bool, error) {
	all, err := c.List(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	globalPaused := len(all) > 0 && all[0].Paused
	reg, err := c.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &c.table, Key: key(fairRegistry), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("read fair registry: %w", err)
	}
	if ss, ok := reg.Item["scopes"].(*types.AttributeValueMemberSS); ok {
		for _, name := range ss.Value {
			sc, ok := ParseScope(name)
			if !ok {
				continue
			}
			st, err := c.GetScope(ctx, sc)
			if err != nil {
				return nil, err
			}
			cleared, err := c.heldCleared(ctx, sc)
			if err != nil {
				return nil, err
			}
			if !st.Held && c.now().Sub(cleared) >= recent {
				// Drained long enough ago that no stale cache can still
				// hold a task there: off the list.
				_ = c.fairRegistry(ctx, "DELETE", name)
				continue
			}
			out[name] = !globalPaused
		}
	}
	for _, s := range all[1:] {
		sc := Scope{Type: s.Type, Key: s.Key}
		cleared, err := c.heldCleared(ctx, sc)
		if err != nil {
			return nil, err
		}
		if s.Held || c.now().Sub(cleared) < recent {
			out[sc.String()] = !globalPaused && !s.Paused && !waiting(s, c.now())
		}
	}
	return out, nil
}

func (c *Controls) heldCleared(ctx context.Context, sc Scope) (time.Time, error) {
	out, err := c.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &c.table, Key: key(sc.item()), ProjectionExpression: aws.String("held_cleared")})
	if err != nil {
		return time.Time{}, fmt.Errorf("read %s: %w", sc, err)
	}
	if n, ok := out.Item["held_cleared"].(*types.AttributeValueMemberN); ok {
		ms, _ := strconv.ParseInt(n.Value, 10, 64)
		return time.UnixMilli(ms), nil
	}
	return time.Time{}, nil
}

// forget drops the cached settings of sc's item, so the next read is fresh.
func (c *Controls) forget(sc Scope) {
	c.mu.Lock()
	delete(c.cache, sc.cacheKey())
	c.mu.Unlock()
}

// Runnable is told when a scope may run again (a resume, a limit raised or
// removed), so its set-aside tasks are released at once rather than at the
// promoter's next sweep. It is package hold's Release with its first
// window; errors are the caller's to log.
type Runnable func(ctx context.Context, scope string) error

// OnRunnable sets the function told when a scope may run again.
func (c *Controls) OnRunnable(fn Runnable) { c.runnable = fn }

// becameRunnable tells the hook, if any, that scope may run: once, or for
// a key's own scope once per unit of the key's weight, so keys resumed
// together start with windows on the queue in proportion to their weights
// (each start then releases one more of its key).
func (c *Controls) becameRunnable(ctx context.Context, scope string) error {
	if c.runnable == nil {
		return nil
	}
	n := 1
	if sc, ok := ParseScope(scope); ok && sc.Key != "" && sc.Type == "" && sc.Fair == "" {
		c.forget(sc)
		n = c.weight(ctx, sc.Key)
	}
	for range n {
		if err := c.runnable(ctx, scope); err != nil {
			return err
		}
	}
	return nil
}

// ScopeHeld says whether scope holds set-aside tasks, by a strongly
// consistent read of its flag (1 read unit; the cache is refreshed with
// it): what a task's end asks of a scope in its Decision's EndIfHeld.
//
// It must not answer from the cache. A task's end and a task set aside
// for the scope's concurrency limit race: the setter raises the flag and
// writes its hold, then looks at the slots (SlotFreeAfterHold); the end
// writes the task's record, then reads the flag. With both reads
// consistent, one of them sees the other's write, so the held task is
// released by the end or by its setter. A cached flag (read before the
// setter raised it) let a scope's last running tasks end, each seeing
// "nothing held", after the setter had seen their slots taken: the held
// task then waited for the promoter's sweep.
func (c *Controls) ScopeHeld(ctx context.Context, scope string) (bool, error) {
	sc, ok := ParseScope(scope)
	if !ok {
		return false, nil
	}
	s, err := c.refreshScope(ctx, sc)
	return s.Held, err
}
