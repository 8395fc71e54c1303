package stats

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/triagehq/triage/triagetype"
)

// Keyed is the part of the controls the keys section reads
// (control.Controls).
type Keyed interface {
	// KeyedScopes lists the scopes with keyed controls (Type and Key set).
	KeyedScopes(ctx context.Context) ([]triagetype.ControlSettings, error)
	// KeyedUse reads one keyed scope's settings and, with a rate limit,
	// its current window's use.
	KeyedUse(ctx context.Context, typ, key string) (triagetype.ControlSettings, *triagetype.RateUse, error)
}

// KeyStats is the keys section of GET /stats (the public type).
type KeyStats = triagetype.KeyStats

// CollectFleet lists the registered consumer instances once and sums them
// into the workers section and, with k set, the keys section of /stats.
func CollectFleet(ctx context.Context, w Workers, k Keyed) (*WorkerStats, *KeyStats, error) {
	ws, err := w.List(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("list workers: %w", err)
	}
	s := triagetype.SummarizeWorkers(ws)
	if k == nil {
		return &s, nil, nil
	}
	ks, err := CollectKeys(ctx, ws, k)
	return &s, ks, err
}

// CollectKeys builds the keys section from the workers' last heartbeats
// (running tasks per key and per (type, key), each worker naming at most
// triagetype.StatsKeys) and the keyed controls. Its cost does not grow
// with the keys: the workers are already listed; the controls cost one
// cached read of the registry item (which lists only scopes an operator
// set, at most ~2,000 by its 400 KB) plus, for the at most StatsKeys
// scopes shown, one read of the settings and one per rate item of the
// current window. Scopes are ranked by running tasks with no read, so
// the scopes not shown cost nothing.
func CollectKeys(ctx context.Context, ws []triagetype.WorkerInfo, k Keyed) (*KeyStats, error) {
	keys, typeKeys := map[string]int{}, map[string]int{}
	starts, finishes := map[string]float64{}, map[string]float64{}
	other := 0
	for _, w := range ws {
		if w.State == triagetype.WorkerDead {
			continue // runs nothing
		}
		for key, n := range w.Keys {
			keys[key] += n
		}
		if w.HeartbeatSeconds > 0 {
			for key, n := range w.KeyStarts {
				starts[key] += float64(n) / w.HeartbeatSeconds
				keys[key] += 0 // a key that started tasks is ranked even if none runs now
			}
			for key, n := range w.KeyFinishes {
				finishes[key] += float64(n) / w.HeartbeatSeconds
			}
		}
		for tk, n := range w.TypeKeys {
			typeKeys[tk] += n
		}
		other += w.KeysOther
	}
	out := &KeyStats{Top: []triagetype.KeyRunning{}, Limits: []triagetype.KeyLimitUse{}}
	for i, key := range ranked(keys, starts) {
		if i < triagetype.StatsKeys {
			out.Top = append(out.Top, triagetype.KeyRunning{Key: key, Running: keys[key], StartsPerSecond: starts[key], FinishesPerSecond: finishes[key]})
		} else {
			other += keys[key]
		}
	}
	out.OtherRunning = other
	scopes, err := k.KeyedScopes(ctx)
	if err != nil {
		return nil, fmt.Errorf("list keyed controls: %w", err)
	}
	running := func(s triagetype.ControlSettings) int {
		if s.Type == "" {
			return keys[s.Key]
		}
		return typeKeys[s.Type+"#"+s.Key]
	}
	slices.SortStableFunc(scopes, func(a, b triagetype.ControlSettings) int { return cmp.Compare(running(b), running(a)) })
	for i, s := range scopes {
		if i >= triagetype.StatsKeys {
			out.OtherLimits++
			out.OtherLimitsRunning += running(s)
			continue
		}
		set, use, err := k.KeyedUse(ctx, s.Type, s.Key)
		if err != nil {
			return nil, fmt.Errorf("read keyed controls: %w", err)
		}
		out.Limits = append(out.Limits, triagetype.KeyLimitUse{Controls: set, Running: running(s), RateUse: use})
	}
	return out, nil
}

// ranked is the names with a positive count or rate, by count, then rate,
// most first (ties by name).
func ranked(m map[string]int, rate map[string]float64) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if m[k] > 0 || rate[k] > 0 {
			out = append(out, k)
		}
	}
	slices.SortStableFunc(out, func(a, b string) int {
		if c := cmp.Compare(m[b], m[a]); c != 0 {
			return c
		}
		return cmp.Compare(rate[b], rate[a])
	})
	return out
}
