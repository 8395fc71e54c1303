package workers

import (
	"cmp"
	"maps"
	"slices"

	"github.com/triagehq/triage/triagetype"
)

// Running is what a heartbeat says of an instance's running tasks per
// fairness key, bounded so that the worker item stays small whatever the
// number of keys: Keys names at most triagetype.StatsKeys keys (those it
// runs most) and Other sums the rest; TypeKeys names at most as many
// (type, key) pairs, as "type#key"; Started and Finished as many keys
// each. With short keys a heartbeat stays at 1 write unit (an item's size
// rounds up to 1 KB a unit); at worst, at StatsKeys = 10 with 128-byte
// keys and types, the four maps take about 6.5 KB: 7 units a heartbeat.
type Running struct {
	Keys     map[string]int
	Other    int
	TypeKeys map[string]int
	// Started and Finished count the attempts of the StatsKeys keys with
	// the most that began and ended since the previous heartbeat (so over
	// about one interval).
	Started, Finished map[string]int
}

// TopCounts bounds per-key counts to the triagetype.StatsKeys largest.
func TopCounts(m map[string]int) map[string]int {
	out, _ := top(m, triagetype.StatsKeys)
	return out
}

// TopRunning bounds counts of running tasks per key and per "type#key" to
// what a heartbeat carries (see Running); zero counts are dropped.
func TopRunning(keys, typeKeys map[string]int) Running {
	named, other := top(keys, triagetype.StatsKeys)
	tk, _ := top(typeKeys, triagetype.StatsKeys)
	return Running{Keys: named, Other: other, TypeKeys: tk}
}

// top keeps the n largest positive counts of m (ties by name) and sums
// the rest.
func top(m map[string]int, n int) (map[string]int, int) {
	names := slices.SortedFunc(maps.Keys(m), func(a, b string) int {
		if c := cmp.Compare(m[b], m[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	out, rest := map[string]int{}, 0
	for i, k := range names {
		switch {
		case m[k] <= 0:
		case i < n:
			out[k] = m[k]
		default:
			rest += m[k]
		}
	}
	return out, rest
}

func nonNil(m map[string]int) map[string]int {
	if m == nil {
		return map[string]int{}
	}
	return m
}
