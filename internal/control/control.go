// Package control keeps triage's operator controls in DynamoDB and enforces
// them for the consumer: pause and resume (global and per task type), a
// per-type rate limit and a per-type concurrency limit.
//
// The limits hold across every consumer instance because the state is in
// the table, not in a process: the rate limit counts starts in one item per
// type and second, and the concurrency limit is a set of slot items that
// each name the run holding them and carry a lease: a run's end frees its
// slot without a write (its task's record says it ended), and a consumer
// that crashes frees its slots when the lease runs out. Settings are read
// through a short cache.
package control

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/metrics"
	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// DynamoDB is the part of the DynamoDB client controls use.
type DynamoDB interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

// Settings are the controls of one scope: "" for global, else a task type
// (the public type, whose dynamodbav names are the item's).
type Settings = triagetype.ControlSettings

// Controls reads and writes settings and enforces them.
type Controls struct {
	db    DynamoDB
	table string
	now   func() time.Time
	ttl   time.Duration

	runnable Runnable   // told when a scope may run again (hold.go)
	fair     fairCounts // this process's sends per fair scope (fair.go)

	mu       sync.Mutex
	cache    map[string]cached
	inflight map[string]chan struct{} // reads under way, so concurrent misses share one

	slotsMu sync.Mutex
	freed   map[string][]slotRef // per slot prefix: slots whose runs this process saw end (slots.go)
	writing map[string]bool      // slots a claim of this process is writing now
	// takenOver: slots and the runs a claim here took them over from
	// (takenKey), so such a run's release here does not remember a slot
	// that is no longer free
	takenOver map[string]bool
	// promised: free slots this process's setters released a head for,
	// and when (SlotFreeAfterHold, promise)
	promised map[string]time.Time
}

type cached struct {
	s   Settings
	set map[string]bool // the keyed registry's entry only (keyed.go)
	// named: of set, the keys metrics name (keyuse.go), built on first use
	named map[string]bool
	at    time.Time
}

// DefaultCacheTTL is how long the consumer trusts settings it read.
const DefaultCacheTTL = time.Second

// New returns controls on table. cacheTTL bounds how stale a consumer's
// view of the settings may be (DefaultCacheTTL when zero).
func New(db DynamoDB, table string, cacheTTL time.Duration) *Controls {
	if cacheTTL <= 0 {
		cacheTTL = DefaultCacheTTL
	}
	return &Controls{db: db, table: table, now: time.Now, ttl: cacheTTL, cache: map[string]cached{}, inflight: map[string]chan struct{}{}}
}

func settingsKey(typ string) string {
	if typ == "" {
		return "CTRL#global"
	}
	return "CTRL#type#" + typ
}

func key(pk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{spec.AttrPK: &types.AttributeValueMemberS{Value: pk}}
}

// Get reads the settings of scope typ ("" for global), uncached.
func (c *Controls) Get(ctx context.Context, typ string) (Settings, error) {
	out, err := c.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &c.table, Key: key(settingsKey(typ)), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return Settings{}, fmt.Errorf("read controls of %q: %w", typ, err)
	}
	s := Settings{Type: typ}
	if len(out.Item) > 0 {
		if err := store.UnmarshalControls(out.Item, &s); err != nil {
			return Settings{}, fmt.Errorf("decode controls of %q: %w", typ, err)
		}
	}
	return s, nil
}

// List returns the global settings and those of every type that has any.
func (c *Controls) List(ctx context.Context) ([]Settings, error) {
	global, err := c.Get(ctx, "")
	if err != nil {
		return nil, err
	}
	out := []Settings{global}
	// Type settings are few; a filtered read of their items by key prefix
	// would need a scan, so they are kept in a registry item.
	reg, err := c.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &c.table, Key: key("CTRL#types"), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("read control registry: %w", err)
	}
	if ss, ok := reg.Item["types"].(*types.AttributeValueMemberSS); ok {
		for _, typ := range ss.Value {
			s, err := c.Get(ctx, typ)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
	}
	keyed, err := c.listKeyed(ctx)
	if err != nil {
		return nil, err
	}
	return append(out, keyed...), nil
}

// SetPaused pauses or resumes scope typ ("" for global). A resumed type's
// set-aside tasks are released before it returns (the first window of
// them, in submit order), so the first starts within a consumer's receive.
//
// A global resume releases the first window of every scope that holds
// tasks and can run: under a global pause, submits and the tasks a
// consumer received while the pause spread are set aside in their type's
// scope (Route, Decide), and nothing else would release them before the
// promoter's sweep. Fair scopes are left to their keys' starts.
func (c *Controls) SetPaused(ctx context.Context, typ string, paused bool) (Settings, error) {
	s, err := c.update(ctx, typ, expression.Set(expression.Name("paused"), expression.Value(paused)))
	switch {
	case err != nil || paused:
	case typ != "" && s.Held:
		err = c.becameRunnable(ctx, TypeScope(typ).String())
	case typ == "":
		err = c.releaseRunnable(ctx)
	}
	return s, err
}

// releaseRunnable releases the first window of every held scope that can
// run now, fair scopes excepted.
func (c *Controls) releaseRunnable(ctx context.Context) error {
	scopes, err := c.HeldScopes(ctx, time.Minute) // as the sweep: its list is left as it keeps it
	if err != nil {
		return err
	}
	var errs []error
	for name, runnable := range scopes {
		if sc, ok := ParseScope(name); !ok || sc.Fair != "" || !runnable {
			continue
		}
		errs = append(errs, c.becameRunnable(ctx, name))
	}
	return errors.Join(errs...)
}

// SetLimits sets a type's rate limit (starts per second, 0 for none) and
// concurrency limit (0 for none).
func (c *Controls) SetLimits(ctx context.Context, typ string, ratePerSecond float64, maxConcurrency int) (Settings, error) {
	if typ == "" {
		return Settings{}, errors.New("limits are per task type")
	}
	if ratePerSecond < 0 || maxConcurrency < 0 {
		return Settings{}, errors.New("limits must not be negative")
	}
	upd := expression.Set(expression.Name("paused"), expression.IfNotExists(expression.Name("paused"), expression.Value(false)))
	upd = setOrRemove(upd, "rate_limit_per_second", ratePerSecond)
	upd = setOrRemove(upd, "max_concurrency", float64(maxConcurrency))
	s, err := c.update(ctx, typ, upd)
	if err == nil && !s.Paused && s.Held {
		err = c.becameRunnable(ctx, TypeScope(typ).String())
	}
	return s, err
}

func isConditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}

func setOrRemove(u expression.UpdateBuilder, name string, v float64) expression.UpdateBuilder {
	if v == 0 {
		return u.Remove(expression.Name(name))
	}
	return u.Set(expression.Name(name), expression.Value(v))
}

func (c *Controls) update(ctx context.Context, typ string, upd expression.UpdateBuilder) (Settings, error) {
	if typ != "" {
		upd = upd.Set(expression.Name("type"), expression.Value(typ))
	}
	expr, err := expression.NewBuilder().WithUpdate(upd).Build()
	if err != nil {
		return Settings{}, err
	}
	out, err := c.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &c.table, Key: key(settingsKey(typ)),
		UpdateExpression: expr.Update(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValues: types.ReturnValueAllNew,
	})
	if err != nil {
		return Settings{}, fmt.Errorf("write controls of %q: %w", typ, err)
	}
	if typ != "" {
		if err := c.registerType(ctx, typ); err != nil {
			return Settings{}, err
		}
	}
	s := Settings{Type: typ}
	if err := store.UnmarshalControls(out.Attributes, &s); err != nil {
		return Settings{}, err
	}
	c.mu.Lock()
	delete(c.cache, typ)
	c.mu.Unlock()
	return s, nil
}

// registerType lists typ in the registry of types with settings (List).
func (c *Controls) registerType(ctx context.Context, typ string) error {
	_, err := c.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &c.table, Key: key("CTRL#types"),
		UpdateExpression:          aws.String("ADD #t :t"),
		ExpressionAttributeNames:  map[string]string{"#t": "types"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":t": &types.AttributeValueMemberSS{Value: []string{typ}}},
	})
	if err != nil {
		return fmt.Errorf("register controls of %q: %w", typ, err)
	}
	return nil
}

// cachedGet reads settings through the cache. When the entry is stale,
// one caller reads it and concurrent callers wait for that read.
func (c *Controls) cachedGet(ctx context.Context, typ string) (Settings, error) {
	return c.cachedLoad(ctx, typ, func(ctx context.Context) (Settings, error) { return c.Get(ctx, typ) })
}

// cachedLoad reads the settings cached under ck, loading them with load
// when stale; concurrent misses share one load.
func (c *Controls) cachedLoad(ctx context.Context, typ string, load func(context.Context) (Settings, error)) (Settings, error) {
	for {
		now := c.now()
		c.mu.Lock()
		e, ok := c.cache[typ]
		if ok && now.Sub(e.at) < c.ttl {
			c.mu.Unlock()
			return e.s, nil
		}
		wait, busy := c.inflight[typ]
		if !busy {
			done := make(chan struct{})
			c.inflight[typ] = done
			c.mu.Unlock()
			s, err := load(ctx)
			c.mu.Lock()
			if err == nil {
				c.cache[typ] = cached{s: s, at: now}
			}
			delete(c.inflight, typ)
			close(done)
			c.mu.Unlock()
			return s, err
		}
		c.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return Settings{}, ctx.Err()
		}
	}
}

// Retry delays the Gate asks for.
const (
	PausedRecheck      = 2 * time.Second
	ConcurrencyRecheck = time.Second
)

// Admit implements the consumer's gate: it refuses a start while the task's
// type or everything is paused, while the type's rate limit for the current
// second is used up, or while all of the type's concurrency slots are held.
// When it admits a task with a concurrency limit it returns a release that
// frees the slot.
func (c *Controls) Admit(ctx context.Context, t *task.Task) (func(), time.Duration, error) {
	release, delay, _, err := c.AdmitExplained(ctx, t)
	return release, delay, err
}

// AdmitExplained is Admit that also names the control that refused the
// start, for the consumer's put-off counts.
//
// Its caller writes no token the slot could name, so a slot it takes is
// held until the release writes it free (or its lease ends).
func (c *Controls) AdmitExplained(ctx context.Context, t *task.Task) (func(), time.Duration, metrics.PutOff, error) {
	tc := *t
	tc.ProgressToken = task.NewProgressToken() // never written: the slot is held until freed
	d, err := c.Decide(ctx, &tc)
	if err != nil || d.Release == nil {
		delay := d.Delay
		if delay <= 0 {
			delay = PausedRecheck
		}
		return nil, delay, d.Why, err
	}
	return d.Release, 0, "", nil
}

// rateWindow is the rate-limit item of type typ at perSecond for the
// window holding now: its key, the window's start and length, and the
// starts it allows.
func rateWindow(typ string, perSecond float64, now time.Time) (pk string, slot time.Time, window time.Duration, limit int) {
	window = time.Second
	limit = int(perSecond)
	if limit < 1 {
		window = time.Duration(float64(time.Second) / perSecond)
		limit = 1
	}
	slot = now.Truncate(window)
	return "RATE#" + typ + "#" + strconv.FormatInt(slot.UnixNano(), 10), slot, window, limit
}

// RateUse is how much of type typ's rate limit (perSecond > 0) the
// current window has used: the starts counted in it, out of limit, over
// window. One eventually consistent read of one small item, for showing.
func (c *Controls) RateUse(ctx context.Context, typ string, perSecond float64) (starts, limit int, window time.Duration, err error) {
	pk, _, window, limit := rateWindow(typ, perSecond, c.now())
	out, err := c.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &c.table, Key: key(pk)})
	if err != nil {
		return 0, limit, window, fmt.Errorf("rate use of %q: %w", typ, err)
	}
	if n, ok := out.Item["starts"].(*types.AttributeValueMemberN); ok {
		starts, _ = strconv.Atoi(n.Value)
	}
	return starts, limit, window, nil
}

// takeRate counts one start in the type's item for the window holding
// now, conditional on the count staying within the limit. A fractional
// limit (0.5/s) is applied over a window long enough to hold one whole
// start.
func (c *Controls) takeRate(ctx context.Context, typ string, perSecond float64, now time.Time) (bool, time.Duration, error) {
	pk, slot, window, limit := rateWindow(typ, perSecond, now)
	_, err := c.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &c.table, Key: key(pk),
		UpdateExpression:         aws.String("ADD #n :one SET #e = :exp"),
		ConditionExpression:      aws.String("attribute_not_exists(#n) OR #n < :limit"),
		ExpressionAttributeNames: map[string]string{"#n": "starts", "#e": spec.AttrTTL},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":one":   &types.AttributeValueMemberN{Value: "1"},
			":limit": &types.AttributeValueMemberN{Value: strconv.Itoa(limit)},
			":exp":   &types.AttributeValueMemberN{Value: strconv.FormatInt(slot.Add(time.Hour).Unix(), 10)},
		},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		// Retry just after the window turns, spread a little so waiting
		// consumers do not all come back at the same instant.
		wait := slot.Add(window).Sub(now) + time.Duration(rand.Int64N(int64(200*time.Millisecond)))
		return false, wait, nil
	}
	if err != nil {
		return false, time.Second, fmt.Errorf("rate limit of %q: %w", typ, err)
	}
	return true, 0, nil
}

// takeSlot claims one of the type's n concurrency slots for t's run,
// looking at all of them if need be (slots.go).
func (c *Controls) takeSlot(ctx context.Context, t *task.Task, n int, lease time.Duration) (*slotHold, error) {
	return c.takeSlotAt(ctx, slotPrefix(TypeScope(t.Type)), runOf(t), n, n, lease)
}

// runOf is the run a claim of t starts: t.ProgressToken is the token the
// claim will write (Decide's contract).
func runOf(t *task.Task) slotRun {
	return slotRun{task: t.ID, token: t.ProgressToken, dv: t.DispatchVersion}
}
