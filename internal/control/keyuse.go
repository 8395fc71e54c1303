package control

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/errgroup"

	"github.com/triagehq/triage/internal/metrics"
	"github.com/triagehq/triage/triagetype"
)

// Showing keyed controls with their use (the keys section of /stats and
// the keys' metric labels), bounded whatever the number of keys: the
// registry item lists only scopes an operator gave controls, and what is
// read per scope is read only for the few shown.

// KeyedScopes lists the scopes with keyed controls (Type and Key set; a
// fairness key's weight counts as a control), sorted by name: one read of
// the registry item, through the cache.
func (c *Controls) KeyedScopes(ctx context.Context) ([]Settings, error) {
	reg, err := c.cachedKeyed(ctx)
	if err != nil {
		return nil, err
	}
	var out []Settings
	for _, name := range slices.Sorted(maps.Keys(reg)) {
		sc, ok := ParseScope(name)
		if !ok || sc.Key == "" || sc.Fair != "" {
			continue // fair flags are bookkeeping, not controls
		}
		out = append(out, Settings{Type: sc.Type, Key: sc.Key})
	}
	return out, nil
}

// KeyedUse reads one keyed scope's settings (one consistent read) and,
// when it has a rate limit, the starts its current window counted: one
// eventually consistent read per rate item of the window, ceil(limit /
// RateShardStarts) of them (1 up to 500 starts a second, 200 at the
// largest limit), read 16 at a time.
func (c *Controls) KeyedUse(ctx context.Context, typ, k string) (Settings, *triagetype.RateUse, error) {
	sc := TypeKeyScope(typ, k)
	s, err := c.GetScope(ctx, sc)
	if err != nil || s.RateLimitPerSecond <= 0 {
		return s, nil, err
	}
	_, slot, window, limit := rateWindow("", s.RateLimitPerSecond, c.now())
	n, _ := rateShards(limit)
	var (
		mu    sync.Mutex
		total int
		g     errgroup.Group // every read runs; the first error is returned
	)
	g.SetLimit(16)
	for i := range n {
		g.Go(func() error {
			pk := "RATE#" + sc.String() + "#" + strconv.Itoa(i) + "#" + strconv.FormatInt(slot.UnixNano(), 10)
			out, err := c.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &c.table, Key: key(pk)})
			if err != nil {
				return fmt.Errorf("rate use of %s: %w", sc, err)
			}
			if v, ok := out.Item["starts"].(*types.AttributeValueMemberN); ok {
				m, _ := strconv.Atoi(v.Value)
				mu.Lock()
				total += m
				mu.Unlock()
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return s, nil, err
	}
	return s, &triagetype.RateUse{Starts: total, Limit: limit, WindowSeconds: window.Seconds()}, nil
}

// KeyLabel is the value of a key's metric label: the key itself when it
// has keyed controls and is among the first MetricKeys such keys by name,
// else OtherKey. It reads only what the cache holds (the consumer
// refreshes the registry at every start while any key has controls), never
// the table, so a metric costs no request; before the first refresh every
// key is OtherKey. So the label has at most MetricKeys + 1 values whatever
// the number of keys: give a key a control (a weight of 1 changes nothing)
// to see it by name.
func (c *Controls) KeyLabel(k string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.cache[keyRegistry]
	if !ok || len(e.set) == 0 {
		return OtherKey
	}
	if e.named == nil {
		// Built once per registry read (the entry is replaced on the next).
		e.named = namedKeys(e.set)
		c.cache[keyRegistry] = e
	}
	if e.named[k] {
		return k
	}
	return OtherKey
}

// OtherKey is the metric label of the keys not named: no key can be it,
// since a key may not hold '#'.
const OtherKey = metrics.OtherKey

// MetricKeys is how many keys metrics name at most.
const MetricKeys = 50

// namedKeys is the first MetricKeys keys by name with keyed controls.
func namedKeys(reg map[string]bool) map[string]bool {
	var keys []string
	seen := map[string]bool{}
	for name := range reg {
		if sc, ok := ParseScope(name); ok && sc.Key != "" && sc.Fair == "" && !seen[sc.Key] {
			seen[sc.Key] = true
			keys = append(keys, sc.Key)
		}
	}
	slices.Sort(keys)
	out := map[string]bool{}
	for _, k := range keys[:min(len(keys), MetricKeys)] {
		out[k] = true
	}
	return out
}

// Keyed says scope names a key's controls (key#K or tk#T#K), as a
// Decision's Scope does when a keyed control refused the task.
func Keyed(scope string) bool {
	sc, ok := ParseScope(scope)
	return ok && sc.Key != "" && sc.Fair == ""
}
