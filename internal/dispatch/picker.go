package dispatch

import (
	"math/rand/v2"

	"github.com/triagehq/triage/triagetype"
)

// picker chooses the next queue to receive from.
type picker struct {
	weights map[triagetype.Priority]int
	strict  bool
	rng     *rand.Rand
}

// pick returns one of cands (non-empty, highest first). In strict mode it is
// the highest; otherwise a random choice in proportion to the weights. A
// candidate whose weight is zero is chosen only when no weighted one is left.
func (pk *picker) pick(cands []triagetype.Priority) triagetype.Priority {
	if pk.strict || len(cands) == 1 {
		return cands[0]
	}
	total := 0
	for _, p := range cands {
		total += pk.weights[p]
	}
	if total == 0 {
		return cands[0]
	}
	n := pk.rng.IntN(total)
	for _, p := range cands {
		n -= pk.weights[p]
		if n < 0 {
			return p
		}
	}
	return cands[len(cands)-1]
}
