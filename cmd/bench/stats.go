package main

import (
	"math"
	"slices"
	"time"
)

// Dist summarizes a set of durations, in milliseconds.
type Dist struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean_ms"`
	P50  float64 `json:"p50_ms"`
	P95  float64 `json:"p95_ms"`
	P99  float64 `json:"p99_ms"`
	Max  float64 `json:"max_ms"`
}

// distOf computes nearest-rank percentiles of ds.
func distOf(ds []time.Duration) Dist {
	if len(ds) == 0 {
		return Dist{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	rank := func(p float64) float64 {
		i := int(math.Ceil(p/100*float64(len(s)))) - 1
		return ms(s[min(max(i, 0), len(s)-1)])
	}
	return Dist{
		N:    len(s),
		Mean: round(ms(sum/time.Duration(len(s))), 3),
		P50:  round(rank(50), 3),
		P95:  round(rank(95), 3),
		P99:  round(rank(99), 3),
		Max:  round(ms(s[len(s)-1]), 3),
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// round rounds x to n decimals.
func round(x float64, n int) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	p := math.Pow(10, float64(n))
	return math.Round(x*p) / p
}

// sig rounds x to n significant digits (for small costs and rates).
func sig(x float64, n int) float64 {
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	d := int(math.Ceil(math.Log10(math.Abs(x))))
	return round(x, max(n-d, 0))
}

// rate is n per second over d.
func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// per divides, returning 0 for an empty denominator.
func per(x float64, n int) float64 {
	if n == 0 {
		return 0
	}
	return x / float64(n)
}
