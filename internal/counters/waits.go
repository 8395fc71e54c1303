package counters

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Waits: how long tasks waited to start, per priority, as log-scale
// histograms kept per minute, so /stats can give a p50 and a p99 per
// priority without reading a task.
//
// A wait is counted at a claim, the stream record whose old image is
// queued or retrying and whose new image is executing: it is the new
// image's started_at minus the moment the task became runnable (the old
// image's enqueued_at, or created_at when it has none, or its run_at or
// retry_at if later), so the backoff before a retry and the delay of a
// scheduled task are not counted as waiting. It is counted under the
// task's original priority (what the submitter asked for: a low task's
// wait includes its time after promotion, which the starvation bound
// caps), in the minute of its started_at.
//
// Item COUNTS#WAIT#<unix minute>: one number attribute per priority and
// bucket, "w#<priority>#<bucket>", added to in the same transaction as the
// other counters, and a TTL an hour after the minute. Bucket i counts
// waits in (2^(i-1), 2^i] milliseconds (bucket 0: at most 1 ms; the last,
// WaitBuckets-1, everything over 2^(WaitBuckets-2) ms, about 35 minutes):
// a percentile is known to a factor of 2, and is given as its bucket's
// upper bound. At most 3 × 23 attributes of about 10 bytes: under 1 KB,
// one write unit per update (two in a transaction).
//
// No hot key at 10,000 tasks/s: the item is written by the stream
// consumer, once per stream batch that holds a claim (Apply folds a
// batch's claims into one ADD per minute item), never per task. A batch
// is up to 1,000 records (the Poller's GetRecords limit; the Lambda
// trigger's batch size), so 10,000 claims/s over a few shards is a few
// to a few tens of updates a second on the minute's item: 2 write units
// each in a transaction, far under the 1,000 a partition takes.
const (
	waitPrefix = "COUNTS#WAIT#"
	// WaitBuckets is the number of histogram buckets per priority.
	WaitBuckets = 23
	// WaitWindow is how far back /stats's wait percentiles reach: the
	// current minute and the four before it.
	WaitWindow = 5 * time.Minute
)

// WaitBucket is the histogram bucket of wait d.
func WaitBucket(d time.Duration) int {
	ms := float64(d) / float64(time.Millisecond)
	if ms <= 1 {
		return 0
	}
	return min(int(math.Ceil(math.Log2(ms))), WaitBuckets-1)
}

// WaitBucketUpper is the largest wait bucket i holds (the last bucket
// holds more: its bound is where it starts to overflow).
func WaitBucketUpper(i int) time.Duration {
	return time.Duration(1<<min(i, WaitBuckets-1)) * time.Millisecond
}

func waitAttr(p triagetype.Priority, bucket int) string {
	return "w#" + string(p) + "#" + strconv.Itoa(bucket)
}

// readyAt is when the task in img became runnable at the claim that ends
// its wait: queued (enqueued_at, created_at without one), or its run_at
// or retry_at if later.
func readyAt(img *task.Task) time.Time {
	at := img.EnqueuedAtOr(img.CreatedAt)
	for _, t := range []*time.Time{img.RunAt, img.RetryAt} {
		if t != nil && t.After(at) {
			at = *t
		}
	}
	return at
}

// claimWait returns the wait a change records, if it is a claim: a
// waiting task moved to executing, or a task recorded executing.
func claimWait(c Change) (minute int64, attr string, ok bool) {
	if c.New == nil || c.New.Status != triagetype.Executing || c.New.StartedAt == nil {
		return 0, "", false
	}
	from := c.Old
	switch {
	case c.Old == nil:
		from = c.New // recorded claimed: an adopted direct send
	case c.Old.Status != triagetype.Queued && c.Old.Status != triagetype.Retrying:
		return 0, "", false
	}
	started := *c.New.StartedAt
	wait := max(started.Sub(readyAt(from)), 0)
	return started.Unix() / 60, waitAttr(from.Priority, WaitBucket(wait)), true
}

// WaitStats are one priority's waits over a window.
type WaitStats struct {
	// Count is how many tasks started.
	Count int64
	// P50 and P99 are upper bounds of the median and the 99th percentile
	// wait (their bucket's upper bound): within a factor of 2.
	P50, P99 time.Duration
}

// histogram is one priority's bucket counts.
type histogram [WaitBuckets]int64

func (h *histogram) quantile(q float64) time.Duration {
	var n int64
	for _, c := range h {
		n += c
	}
	if n == 0 {
		return 0
	}
	rank := max(int64(math.Ceil(q*float64(n))), 1)
	var seen int64
	for i, c := range h {
		if seen += c; seen >= rank {
			return WaitBucketUpper(i)
		}
	}
	return WaitBucketUpper(WaitBuckets - 1)
}

// addWaits adds the wait buckets of one minute item to hs.
func addWaits(hs map[triagetype.Priority]*histogram, it map[string]types.AttributeValue) {
	for a, v := range it {
		parts := strings.Split(a, "#")
		if len(parts) != 3 || parts[0] != "w" {
			continue
		}
		i, err := strconv.Atoi(parts[2])
		if err != nil || i < 0 || i >= WaitBuckets {
			continue
		}
		p := triagetype.Priority(parts[1])
		if hs[p] == nil {
			hs[p] = &histogram{}
		}
		hs[p][i] += number(v)
	}
}

func waitStats(hs map[triagetype.Priority]*histogram) map[triagetype.Priority]WaitStats {
	out := map[triagetype.Priority]WaitStats{}
	for p, h := range hs {
		var n int64
		for _, c := range h {
			n += c
		}
		if n > 0 {
			out[p] = WaitStats{Count: n, P50: h.quantile(0.5), P99: h.quantile(0.99)}
		}
	}
	return out
}

// waitKeys are the minute items of the wait window ending at now.
func waitKeys(now time.Time) []map[string]types.AttributeValue {
	var keys []map[string]types.AttributeValue
	last := now.Unix() / 60
	for m := last - int64(WaitWindow/time.Minute) + 1; m <= last; m++ {
		keys = append(keys, pkKey(waitPrefix+strconv.FormatInt(m, 10)))
	}
	return keys
}
