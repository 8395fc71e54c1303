package control

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
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

// Keyed controls: pause, rate and concurrency limits of one fairness key
// (key#K: its tasks of every type) or of one type's tasks of one key
// (tk#T#K), beside the per-type ones and built the same way.
//
// Which keys have controls is one registry item (CTRL#keys, a string set
// of scope names) that every consumer reads through its cache: a task of a
// key without controls costs no read and no write beyond it, so keys cost
// nothing until an operator sets a limit on one. Operators set them (the
// control API is admin-only), so the registry holds what they chose: at
// ~150 bytes a scope, 400 KB holds over 2,000 keyed scopes.
//
// At 10,000 starts a second for one key, no partition key exceeds
// DynamoDB's 1,000 WCU/s:
//   - rate: the key's limit L is split over ceil(L/RateShardStarts) items
//     per window (RATE#<scope>#<shard>#<window>), each allowing its share,
//     and a start counts in one random shard (trying up to rateTries): at
//     L = 10,000/s that is 20 items taking 500 writes a second each;
//   - concurrency: N slot items (CONC#<scope>#<i>), each written once per
//     task it runs (slots.go): a key running 10,000 tasks/s of 1 s each
//     needs N >= 10,000 slots, each written once a second. A start looks
//     at most at slotTries random slots (reads; the refused start writes
//     nothing), so a refusal costs a bounded number of reads whatever N
//     is (a refusal with a slot still free is possible then; the task is
//     set aside and released when a slot frees).
//
// Per task with a keyed limit: one write per limit (the rate count, the
// slot taken); without keyed limits, none.

// MaxWeight is the largest weight a key may have.
const MaxWeight = 1000

// RateShardStarts is how many starts a second one rate item takes at most.
const RateShardStarts = 500

const (
	rateTries = 3
	slotTries = 8
)

const keyRegistry = "CTRL#keys"

// KeyScope is the scope of one fairness key, all types.
func KeyScope(key string) Scope { return Scope{Key: key} }

// TypeKeyScope is the scope of one type's tasks of one key.
func TypeKeyScope(typ, key string) Scope { return Scope{Type: typ, Key: key} }

// cacheKey is a scope's entry in the settings cache: a type scope's is its
// type (as before), a keyed scope's its item key, which no type can equal.
func (s Scope) cacheKey() string {
	if s.Key == "" && s.Fair == "" {
		return s.Type
	}
	return s.item()
}

// GetScope reads the settings of a keyed or type scope, uncached.
func (c *Controls) GetScope(ctx context.Context, sc Scope) (Settings, error) {
	if sc.Key == "" && sc.Fair == "" {
		return c.Get(ctx, sc.Type)
	}
	out, err := c.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &c.table, Key: key(sc.item()), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return Settings{}, fmt.Errorf("read controls of %s: %w", sc, err)
	}
	s := Settings{Type: sc.Type, Key: sc.Key}
	if sc.Fair != "" {
		s.Type = ""
	}
	if len(out.Item) > 0 {
		if err := store.UnmarshalControls(out.Item, &s); err != nil {
			return Settings{}, fmt.Errorf("decode controls of %s: %w", sc, err)
		}
	}
	return s, nil
}

// SetKeyControls changes the controls of key (of every type, or of typ's
// tasks only): nil leaves a setting as it is, a zero limit removes it. A
// scope that may run afterwards and holds tasks has them released.
func (c *Controls) SetKeyControls(ctx context.Context, typ, k string, paused *bool, rate *float64, conc *int, weight ...*int) (Settings, error) {
	if k == "" {
		return Settings{}, errors.New("a key is required")
	}
	var w *int
	if len(weight) > 0 {
		w = weight[0]
	}
	if w != nil && typ != "" {
		return Settings{}, errors.New("a weight is per key, not per type and key")
	}
	if (rate != nil && *rate < 0) || (conc != nil && *conc < 0) {
		return Settings{}, errors.New("limits must not be negative")
	}
	sc := Scope{Type: typ, Key: k}
	s, err := c.setKeyed(ctx, sc, func(upd expression.UpdateBuilder) expression.UpdateBuilder {
		if paused != nil {
			upd = upd.Set(expression.Name("paused"), expression.Value(*paused))
		}
		if rate != nil {
			upd = setOrRemove(upd, "rate_limit_per_second", *rate)
		}
		if conc != nil {
			upd = setOrRemove(upd, "max_concurrency", float64(*conc))
		}
		if w != nil {
			upd = setOrRemove(upd, "weight", float64(*w))
		}
		return upd
	})
	if err == nil && !s.Paused && s.Held {
		err = c.becameRunnable(ctx, sc.String())
	}
	return s, err
}

// setKeyed writes a keyed scope's settings item with edit's changes and
// registers the scope.
func (c *Controls) setKeyed(ctx context.Context, sc Scope, edit func(expression.UpdateBuilder) expression.UpdateBuilder) (Settings, error) {
	var upd expression.UpdateBuilder
	upd = edit(upd)
	upd = upd.Set(expression.Name("key"), expression.Value(sc.Key))
	if sc.Type != "" {
		upd = upd.Set(expression.Name("type"), expression.Value(sc.Type))
	}
	expr, err := expression.NewBuilder().WithUpdate(upd).Build()
	if err != nil {
		return Settings{}, err
	}
	out, err := c.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &c.table, Key: key(sc.item()),
		UpdateExpression: expr.Update(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValues: types.ReturnValueAllNew,
	})
	if err != nil {
		return Settings{}, fmt.Errorf("write controls of %s: %w", sc, err)
	}
	if _, err := c.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &c.table, Key: key(keyRegistry),
		UpdateExpression:          aws.String("ADD #s :s"),
		ExpressionAttributeNames:  map[string]string{"#s": "scopes"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":s": &types.AttributeValueMemberSS{Value: []string{sc.String()}}},
	}); err != nil {
		return Settings{}, fmt.Errorf("register controls of %s: %w", sc, err)
	}
	s := Settings{Type: sc.Type, Key: sc.Key}
	if err := store.UnmarshalControls(out.Attributes, &s); err != nil {
		return Settings{}, err
	}
	c.mu.Lock()
	delete(c.cache, sc.cacheKey())
	delete(c.cache, keyRegistry)
	c.mu.Unlock()
	return s, nil
}

// keyedScopes reads the registry of scopes with keyed controls.
func (c *Controls) keyedScopes(ctx context.Context) (map[string]bool, error) {
	out, err := c.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &c.table, Key: key(keyRegistry), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("read keyed control registry: %w", err)
	}
	m := map[string]bool{}
	if ss, ok := out.Item["scopes"].(*types.AttributeValueMemberSS); ok {
		for _, s := range ss.Value {
			m[s] = true
		}
	}
	return m, nil
}

// cachedKeyed is keyedScopes through the cache (its entry's Settings is
// unused; the set lives beside it).
func (c *Controls) cachedKeyed(ctx context.Context) (map[string]bool, error) {
	c.mu.Lock()
	e, ok := c.cache[keyRegistry]
	c.mu.Unlock()
	if ok && c.now().Sub(e.at) < c.ttl {
		return e.set, nil
	}
	m, err := c.keyedScopes(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.cache[keyRegistry] = cached{set: m, at: c.now()}
	c.mu.Unlock()
	return m, nil
}

// cachedScope reads a scope's settings through the cache.
func (c *Controls) cachedScope(ctx context.Context, sc Scope) (Settings, error) {
	return c.cachedLoad(ctx, sc.cacheKey(), func(ctx context.Context) (Settings, error) { return c.GetScope(ctx, sc) })
}

// listKeyed returns the settings of every keyed scope.
func (c *Controls) listKeyed(ctx context.Context) ([]Settings, error) {
	m, err := c.keyedScopes(ctx)
	if err != nil {
		return nil, err
	}
	var out []Settings
	for name := range m {
		sc, ok := ParseScope(name)
		if !ok {
			continue
		}
		s, err := c.GetScope(ctx, sc)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// decideKeyed applies t's keyed scopes (those in the registry) after its
// type's controls admitted it: d is the type's admission, which a keyed
// refusal gives back.
func (c *Controls) decideKeyed(ctx context.Context, t *task.Task, d Decision) (Decision, error) {
	reg, err := c.cachedKeyed(ctx)
	if err != nil || len(reg) == 0 {
		return d, err
	}
	k := t.FairKey()
	for _, sc := range []Scope{KeyScope(k), TypeKeyScope(t.Type, k)} {
		name := sc.String()
		if !reg[name] {
			continue
		}
		// giveBack returns the admission so far (its slots are written
		// free) and names the scopes whose slots it held, for the caller to
		// wake (Decision.EndIfHeld).
		giveBack := func(out Decision) Decision {
			d.Release()
			out.EndNext, out.EndIfHeld = d.EndNext, d.EndIfHeld
			return out
		}
		s, err := c.cachedScope(ctx, sc)
		if err != nil {
			return giveBack(Decision{Why: metrics.PutOffControlError, Delay: time.Second}), err
		}
		if s.Paused && t.Released {
			if s, err = c.refreshScope(ctx, sc); err != nil {
				return giveBack(Decision{Why: metrics.PutOffControlError, Delay: time.Second}), err
			}
		}
		refuse := func(why metrics.PutOff, delay time.Duration) (Decision, error) {
			return giveBack(Decision{Scope: name, Why: why, Delay: delay}), nil
		}
		switch {
		case s.Paused:
			return refuse(metrics.PutOffPaused, 0)
		case waiting(s, c.now()):
			return refuse(metrics.PutOffRetryAfter, s.WaitUntil.Sub(c.now()))
		case s.Held && !t.Released && !rateOnly(s):
			d, err := refuse(metrics.PutOffBehindHeld, 0)
			d.Batch, d.Slots = rateBatch(s.RateLimitPerSecond), slotBound(s)
			return d, err
		}
		if s.RateLimitPerSecond > 0 {
			at := c.now()
			_, slot, _, _ := rateWindow("", s.RateLimitPerSecond, at)
			counted, early := reserved(t, name, slot)
			if early > 0 {
				// Released for a window not open yet: hidden until it opens.
				d, err := refuse(metrics.PutOffRate, early)
				d.Scope = ""
				return d, err
			}
			ok, wait := counted, time.Duration(0)
			if !counted {
				ok, wait, err = c.takeRateScope(ctx, sc, s.RateLimitPerSecond, at)
				if err != nil {
					return giveBack(Decision{Why: metrics.PutOffControlError, Delay: time.Second}), err
				}
			}
			if !ok {
				d, err := refuse(metrics.PutOffRate, wait)
				d.Batch = windowStarts(s.RateLimitPerSecond)
				return d, err
			}
			d.At = at // the key's count is the later one
			if s.Held {
				d.NextWindow = append(d.NextWindow, c.nextWindow(name, s.RateLimitPerSecond))
			}
		}
		if s.MaxConcurrency > 0 {
			lease := time.Duration(t.TimeoutSeconds)*time.Second + 30*time.Second
			h, err := c.takeSlotAt(ctx, slotPrefix(sc), runOf(t), s.MaxConcurrency, slotTries, lease)
			if err != nil {
				return giveBack(Decision{Why: metrics.PutOffControlError, Delay: time.Second}), err
			}
			if h == nil {
				return refuse(metrics.PutOffConcurrency, ConcurrencyRecheck)
			}
			prev, prevStarted := d.Release, d.Started
			d.Release = func() { h.release(); prev() }
			d.Started = func() {
				h.start()
				if prevStarted != nil {
					prevStarted()
				}
			}
			if s.Held {
				d.EndNext = append(d.EndNext, name)
			} else {
				d.EndIfHeld = append(d.EndIfHeld, name)
			}
		} else if s.Held && s.RateLimitPerSecond == 0 {
			d.StartNext = append(d.StartNext, name)
		}
	}
	return d, nil
}

// refreshScope reads a scope's settings past the cache and caches them.
func (c *Controls) refreshScope(ctx context.Context, sc Scope) (Settings, error) {
	s, err := c.GetScope(ctx, sc)
	if err != nil {
		return s, err
	}
	c.mu.Lock()
	c.cache[sc.cacheKey()] = cached{s: s, at: c.now()}
	c.mu.Unlock()
	return s, nil
}

// rateShards splits a per-second limit over items that each take at most
// RateShardStarts starts a window: shard i of n allows limit/n, the first
// limit%n one more, so the shares add up to the limit exactly.
func rateShards(limit int) (n int, share func(i int) int) {
	n = max(1, (limit+RateShardStarts-1)/RateShardStarts)
	return n, func(i int) int {
		s := limit / n
		if i < limit%n {
			s++
		}
		return s
	}
}

// takeRateScope counts one start of scope sc in one random shard of its
// window holding now, trying up to rateTries shards.
func (c *Controls) takeRateScope(ctx context.Context, sc Scope, perSecond float64, now time.Time) (bool, time.Duration, error) {
	_, slot, window, limit := rateWindow("", perSecond, now)
	n, share := rateShards(limit)
	for _, i := range rand.Perm(n)[:min(n, rateTries)] {
		pk := "RATE#" + sc.String() + "#" + strconv.Itoa(i) + "#" + strconv.FormatInt(slot.UnixNano(), 10)
		ok, err := c.countStart(ctx, pk, share(i), slot)
		if err != nil {
			return false, time.Second, fmt.Errorf("rate limit of %s: %w", sc, err)
		}
		if ok {
			return true, 0, nil
		}
	}
	return false, slot.Add(window).Sub(now) + time.Duration(rand.Int64N(int64(200*time.Millisecond))), nil
}

// countStart adds one start to rate item pk, conditional on its count
// staying within limit.
func (c *Controls) countStart(ctx context.Context, pk string, limit int, slot time.Time) (bool, error) {
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
	if isConditionFailed(err) {
		return false, nil
	}
	return err == nil, err
}

// CheckKeyLimits checks a keyed controls request's limits by the rules of
// a type's (both transports use it); nil limits are left as they are.
func CheckKeyLimits(rate *float64, conc *int, weight ...*int) *task.FieldError {
	if len(weight) > 0 && weight[0] != nil && (*weight[0] < 0 || *weight[0] > MaxWeight) {
		return &task.FieldError{Field: "weight", Message: fmt.Sprintf("must be from 0 (the default, 1) to %d", MaxWeight)}
	}
	if rate != nil && (*rate < 0 || *rate > triagetype.MaxRateLimitPerSecond) {
		return &task.FieldError{Field: "rate_limit_per_second", Message: fmt.Sprintf("must be from 0 (no limit) to %d", triagetype.MaxRateLimitPerSecond)}
	}
	if conc != nil && (*conc < 0 || *conc > triagetype.MaxConcurrencyLimit) {
		return &task.FieldError{Field: "max_concurrency", Message: fmt.Sprintf("must be from 0 (no limit) to %d", triagetype.MaxConcurrencyLimit)}
	}
	return nil
}
