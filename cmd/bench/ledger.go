package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/handler/ledger"
	"github.com/triagehq/triage/triagetype"
)

// newLedger returns the handler-side run record the verdicts are drawn from;
// the consumer sets the handler it wraps.
func newLedger() *ledger.Ledger { return ledger.New(nil) }

// verdict checks that every id in want ran exactly once and nothing else
// ran. With complete=false (a bounded run that stopped early) ids that never
// ran are allowed, but every id that ran must have completed exactly once.
type verdict struct {
	Ran        int      `json:"ran"`
	Duplicates int      `json:"duplicates"`
	Concurrent int      `json:"concurrent_double_runs"`
	Lost       int      `json:"lost"`
	Unknown    int      `json:"unknown_ids"`
	Examples   []string `json:"examples,omitempty"`
}

func (v verdict) ok() bool {
	return v.Duplicates == 0 && v.Concurrent == 0 && v.Lost == 0 && v.Unknown == 0
}

func (v verdict) String() string {
	if v.ok() {
		return fmt.Sprintf("ok: %d tasks ran exactly once, none concurrently twice", v.Ran)
	}
	return fmt.Sprintf("FAILED: %d ran, %d ran more than once, %d ran twice at the same time, %d lost, %d unknown ids; e.g. %s",
		v.Ran, v.Duplicates, v.Concurrent, v.Lost, v.Unknown, strings.Join(v.Examples, "; "))
}

// check compares the ledger with the submitted ids and the tracker's
// completions.
func check(l *ledger.Ledger, want []string, done *tracker, complete bool) verdict {
	runs, overlap := l.Runs(), l.Overlaps()
	var v verdict
	note := func(s string) {
		if len(v.Examples) < 5 {
			v.Examples = append(v.Examples, s)
		}
	}
	wanted := make(map[string]bool, len(want))
	for _, id := range want {
		wanted[id] = true
	}
	for id, n := range runs {
		v.Ran++
		if !wanted[id] {
			v.Unknown++
			note(fmt.Sprintf("%s ran but was never submitted", id))
		}
		if n > 1 {
			v.Duplicates++
			note(fmt.Sprintf("%s ran %d times", id, n))
		}
	}
	v.Concurrent = len(overlap)
	for _, id := range overlap[:min(2, len(overlap))] {
		note(fmt.Sprintf("%s ran twice at the same time", id))
	}
	completed := done.completedIDs()
	for _, id := range want {
		ran, fin := runs[id] > 0, completed[id]
		switch {
		case ran && !fin:
			v.Lost++
			note(fmt.Sprintf("%s ran but was never recorded completed", id))
		case !ran && fin:
			v.Lost++
			note(fmt.Sprintf("%s completed without its handler running", id))
		case !ran && complete:
			v.Lost++
			note(fmt.Sprintf("%s never ran", id))
		}
	}
	if d := done.doubleCompletions(); d > 0 {
		v.Duplicates += d
		note(fmt.Sprintf("%d tasks were recorded completed twice", d))
	}
	return v
}

// finished is one completed task as its record stood after the completing
// write (UpdateItem ReturnValues=ALL_NEW).
type finished struct {
	Priority  triagetype.Priority
	Created   time.Time
	Started   time.Time
	Completed time.Time
	Key       string // the task's idempotency key ("sqs:<message id>" for an adopted direct send)
}

// tracker records completions as the consumer writes them, and says when a
// target count has been reached.
type tracker struct {
	mu      sync.Mutex
	done    map[string]finished
	doubles int
	target  int
	last    time.Time
	reached chan struct{}
	closed  bool
}

func newTracker(target int) *tracker {
	return &tracker{done: map[string]finished{}, target: target, reached: make(chan struct{})}
}

// completed records the completing write of task id.
func (t *tracker) completed(id string, f finished) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, dup := t.done[id]; dup {
		t.doubles++
		return
	}
	t.done[id] = f
	t.last = now
	t.check()
}

// check closes reached once the target is met; t.mu is held.
func (t *tracker) check() {
	if !t.closed && len(t.done) >= t.target {
		t.closed = true
		close(t.reached)
	}
}

// lower changes the target to n (when fewer tasks were sent than planned).
func (t *tracker) lower(n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.target = n
	t.check()
}

func (t *tracker) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.done)
}

// lastAt is when the latest completion was observed.
func (t *tracker) lastAt() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}

func (t *tracker) completedIDs() map[string]bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]bool, len(t.done))
	for id := range t.done {
		out[id] = true
	}
	return out
}

func (t *tracker) doubleCompletions() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.doubles
}

// byKey maps the idempotency keys of the completed tasks to their ids.
func (t *tracker) byKey() map[string][]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string][]string{}
	for id, f := range t.done {
		if f.Key != "" {
			out[f.Key] = append(out[f.Key], id)
		}
	}
	return out
}

// ids lists every completed task's id.
func (t *tracker) ids() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, 0, len(t.done))
	for id := range t.done {
		out = append(out, id)
	}
	return out
}

// checkAdopted checks direct sends: each message id in sent must have
// become exactly one task (the id derived from the message id) that ran
// exactly once; nothing else may have run.
func checkAdopted(l *ledger.Ledger, sent []string, done *tracker, complete bool) verdict {
	keys := done.byKey()
	// Adopted tasks are found by their id, which the consumer derives from
	// the message id (dispatch.AdoptedIDSuffix); older builds keyed them by
	// an idempotency key "sqs:<message id>", still accepted.
	bySuffix := map[string][]string{}
	for _, id := range done.ids() {
		if len(id) == 26 {
			bySuffix[id[10:]] = append(bySuffix[id[10:]], id)
		}
	}
	var ids []string
	missing, twice := 0, 0
	var examples []string
	for _, m := range sent {
		got := keys["sqs:"+m]
		if len(got) == 0 {
			got = bySuffix[dispatch.AdoptedIDSuffix(m)]
		}
		switch {
		case len(got) == 0 && complete:
			missing++
			if len(examples) < 3 {
				examples = append(examples, fmt.Sprintf("message %s never became a completed task", m))
			}
		case len(got) > 1:
			twice++
			if len(examples) < 3 {
				examples = append(examples, fmt.Sprintf("message %s became %d tasks", m, len(got)))
			}
		}
		ids = append(ids, got...)
	}
	// Tasks that ran are checked against the adopted ids: any other run
	// is an unknown id; a task that ran but never completed is lost.
	v := check(l, ids, done, false)
	v.Lost += missing
	v.Duplicates += twice
	v.Examples = append(v.Examples, examples...)
	return v
}

// records returns the completions of ids (in that order) that finished.
func (t *tracker) records(ids []string) []finished {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []finished
	for _, id := range ids {
		if f, ok := t.done[id]; ok {
			out = append(out, f)
		}
	}
	return out
}

// wait blocks until the target is reached, ctx ends or timeout passes, and
// reports whether the target was reached.
func (t *tracker) wait(ctx context.Context, timeout time.Duration) bool {
	tm := time.NewTimer(timeout)
	defer tm.Stop()
	select {
	case <-t.reached:
		return true
	case <-ctx.Done():
	case <-tm.C:
	}
	return false
}

// warnings keeps the warn and error log records of the app's parts, so a
// scenario can report them (a benchmark that hides failures measures the
// wrong thing). Info records still go through a JSON handler to a discarded
// writer, so the CPU cost of production logging stays in the measurement.
type warnings struct {
	mu    sync.Mutex
	count map[string]int
	first []string
}

func newWarnings() *warnings { return &warnings{count: map[string]int{}} }

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "error" || a.Key == "reason" {
			fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		}
		return true
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	w.count[r.Level.String()+" "+r.Message]++
	if len(w.first) < 5 {
		w.first = append(w.first, r.Level.String()+" "+b.String())
	}
	return nil
}

func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

// take returns and clears what was collected: counts per message, in a
// fixed order, and the first few records in full.
func (w *warnings) take() (summary []string, first []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for msg, n := range w.count {
		summary = append(summary, fmt.Sprintf("%dx %s", n, msg))
	}
	slices.Sort(summary)
	first = w.first
	w.count, w.first = map[string]int{}, nil
	return summary, first
}
