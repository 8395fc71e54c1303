// Package metrics is triage's one instrumentation layer. It owns every
// metric's name, label set, unit and bucket boundaries, and turns what the
// consumer, the submit path and the promoter report (a task started, an
// attempt failed, a message was dropped) into observations that its sinks
// render: Prometheus (package metrics/prom, for long-running processes and
// `triage dev`) and CloudWatch Embedded Metric Format (EMF, in this
// package, for Lambda: log lines, no API calls).
//
// Invariant: a name and its labels are defined here once (Definitions), so
// a Prometheus scrape and the EMF lines of the same workload carry the same
// names and the same counts. The packages that report define the small
// interface they use (dispatch.Metrics, submit.Metrics, promote.Metrics);
// *Recorder implements them all, and a nil *Recorder records nothing.
//
// Recording is in-process only: it adds no AWS request to any task.
package metrics

import (
	"sync/atomic"
	"time"

	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Namespace is the CloudWatch namespace of the EMF metrics unless the
// deployment names another (TRIAGE_METRICS_NAMESPACE).
const Namespace = "Triage"

// Kind says how a metric aggregates.
type Kind int

// The kinds of metric.
const (
	Counter   Kind = iota // only goes up; EMF emits the increase since the last flush
	Gauge                 // a current value; EMF emits the last value (or the peak, see Def.Peak)
	Histogram             // a distribution; EMF emits the observed values
)

// ID names one metric of Definitions.
type ID int

// The metrics. Their names, labels and meaning are in Definitions.
const (
	TasksSubmitted ID = iota
	TasksStarted
	TasksCompleted
	TasksRetried
	TasksDeadLettered
	TasksCancelled
	TasksSnoozed
	TasksHandedBack
	TaskFailures
	TaskWait
	TaskPromotedWait
	TaskRun
	Promotions
	Recoveries
	MessagesDropped
	PutOffs
	SlotsCapacity
	SlotsReservedCapacity
	SlotsBusy
	SlotsReservedBusy
	QueueDepth
	QueueOldestAge
	DLQDepth
	ScheduleTicks
	KeyTasksStarted
	KeyTasksFinished
	KeyPutOffs
	Steps
	numIDs
)

// Def is one metric: its name (the same in Prometheus and CloudWatch), help
// text, kind, label names (Prometheus labels, CloudWatch dimensions), unit
// (CloudWatch) and, for histograms, bucket upper bounds in the unit.
type Def struct {
	Name    string
	Help    string
	Kind    Kind
	Labels  []string
	Unit    string // a CloudWatch unit: Count, Seconds, None
	Buckets []float64
	// Rollups are the extra CloudWatch dimension sets (subsets of Labels)
	// EMF also publishes, so a dashboard or alarm can read a total without
	// metric math over every label value (which alarms cannot do). The
	// full label set is always published.
	Rollups [][]string
	// Peak: EMF emits the highest value set since the last flush instead
	// of the last, so a gauge that moves between flushes (busy slots) is
	// not read as idle because the flush came at a quiet moment.
	Peak bool
}

// WaitBuckets are the wait-time histogram's bounds in seconds: fine below
// a second (a healthy high queue), then through minutes to an hour, so
// the starvation bound (32 min by default: LOW_AFTER + MEDIUM_AFTER + 2 ×
// PROMOTE_INTERVAL) and each aging threshold fall between two bounds
// close to them.
func WaitBuckets() []float64 {
	return []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 900, 1200, 1500, 1800, 2100, 2400, 3000, 3600, 7200}
}

// RunBuckets are the run-duration histogram's bounds in seconds, from a
// few milliseconds to the longest timeout a task may have (12 h).
func RunBuckets() []float64 {
	return []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 43200}
}

// Label names.
const (
	LabelType     = "type"
	LabelPriority = "priority"
	LabelReason   = "reason"
	LabelKind     = "kind"
	LabelFrom     = "from"
	LabelTo       = "to"
	LabelOutcome  = "outcome"
	// LabelKey is a fairness key: bounded, since only keys with keyed
	// controls are named (at most control.MetricKeys) and every other key
	// is OtherKey (see Recorder.LabelKeys).
	LabelKey = "key"
)

// OtherKey is the key label of every key not named: no key can be it,
// since a key may not hold '#'.
const OtherKey = "#other"

// Name is metric id's name, the same in CloudWatch and Prometheus.
func Name(id ID) string { return Definitions()[id].Name }

// Definitions returns every metric, indexed by ID. It builds a fresh slice
// on each call, so no caller can change another's view.
func Definitions() []Def {
	tp := []string{LabelType, LabelPriority}
	total := [][]string{{}}
	byPrio := [][]string{{LabelPriority}, {}}
	d := make([]Def, numIDs)
	d[TasksSubmitted] = Def{Name: "triage_tasks_submitted_total", Help: "Tasks accepted: new tasks from the API, the direct transport and adopted direct SQS sends (an idempotent repeat is not counted).", Kind: Counter, Labels: tp, Unit: "Count", Rollups: byPrio}
	d[TasksStarted] = Def{Name: "triage_tasks_started_total", Help: "Attempts started: claims that took a task to executing.", Kind: Counter, Labels: tp, Unit: "Count", Rollups: byPrio}
	d[TasksCompleted] = Def{Name: "triage_tasks_completed_total", Help: "Tasks recorded completed.", Kind: Counter, Labels: tp, Unit: "Count", Rollups: byPrio}
	d[TasksRetried] = Def{Name: "triage_tasks_retried_total", Help: "Failed attempts recorded as retrying, to run again after a backoff.", Kind: Counter, Labels: tp, Unit: "Count", Rollups: byPrio}
	d[TasksDeadLettered] = Def{Name: "triage_tasks_dead_lettered_total", Help: "Tasks recorded dead_letter: out of attempts, a permanent failure, or a message SQS redrove.", Kind: Counter, Labels: tp, Unit: "Count", Rollups: byPrio}
	d[TasksCancelled] = Def{Name: "triage_tasks_cancelled_total", Help: "Running tasks recorded cancelled: on request, or by their handler's Cancel.", Kind: Counter, Labels: tp, Unit: "Count", Rollups: byPrio}
	d[TasksSnoozed] = Def{Name: "triage_tasks_snoozed_total", Help: "Attempts that asked to run again later (no attempt spent).", Kind: Counter, Labels: tp, Unit: "Count", Rollups: total}
	d[TasksHandedBack] = Def{Name: "triage_tasks_handed_back_total", Help: "Running tasks handed back to their queue at a consumer's shutdown.", Kind: Counter, Labels: tp, Unit: "Count", Rollups: total}
	d[TaskFailures] = Def{Name: "triage_task_failures_total", Help: "Failed attempts by reason: error (retriable), permanent, timeout, panic, no_handler, payload_missing, bad_result, lease_expired (the last attempt's worker was lost), max_receives (SQS redrove the message).", Kind: Counter, Labels: []string{LabelType, LabelReason}, Unit: "Count", Rollups: [][]string{{LabelReason}, {}}}
	d[TaskWait] = Def{Name: "triage_task_wait_seconds", Help: "A first attempt's wait from enqueue (or run_at, if later) to start, by the priority the task was submitted with: the starvation bound holds when low's tail stays under it.", Kind: Histogram, Labels: []string{LabelPriority}, Unit: "Seconds", Buckets: WaitBuckets()}
	d[TaskPromotedWait] = Def{Name: "triage_task_promoted_wait_seconds", Help: "A promoted task's wait from its last promotion to start, by the priority it was promoted to.", Kind: Histogram, Labels: []string{LabelPriority}, Unit: "Seconds", Buckets: WaitBuckets()}
	d[TaskRun] = Def{Name: "triage_task_run_seconds", Help: "How long a handler ran, every attempt, by task type.", Kind: Histogram, Labels: []string{LabelType}, Unit: "Seconds", Buckets: RunBuckets()}
	d[Promotions] = Def{Name: "triage_promotions_total", Help: "Tasks the promoter raised from one priority to the next.", Kind: Counter, Labels: []string{LabelFrom, LabelTo}, Unit: "Count"}
	d[Recoveries] = Def{Name: "triage_recoveries_total", Help: "Tasks recovered: lease_expired (a worker stopped renewing its lease and the task was reclaimed), message_lost (a task's message was gone and a new one was sent).", Kind: Counter, Labels: []string{LabelKind}, Unit: "Count"}
	d[MessagesDropped] = Def{Name: "triage_messages_dropped_total", Help: "Messages not run: stale copies deleted, and poison moved to the DLQ (no_task: its task never appeared; version_ahead: no write of its task will reach its version; invalid: a body that is neither a triage message nor a valid direct send).", Kind: Counter, Labels: []string{LabelReason}, Unit: "Count"}
	d[PutOffs] = Def{Name: "triage_putoffs_total", Help: "Messages hidden to try again later: paused, rate_limit, concurrency_limit (the controls), leased (another worker holds the task), control_error, contention, no_handler (handed back for a worker that runs the type).", Kind: Counter, Labels: []string{LabelReason}, Unit: "Count"}
	d[SlotsCapacity] = Def{Name: "triage_consumer_slots_capacity", Help: "Tasks this consumer may run at once (TRIAGE_CONCURRENCY).", Kind: Gauge, Unit: "Count"}
	d[SlotsReservedCapacity] = Def{Name: "triage_consumer_slots_reserved_high_capacity", Help: "Of those, slots only high tasks may use (TRIAGE_RESERVED_HIGH).", Kind: Gauge, Unit: "Count"}
	d[SlotsBusy] = Def{Name: "triage_consumer_slots_busy", Help: "Slots running a task (EMF: the peak since the last flush).", Kind: Gauge, Unit: "Count", Peak: true}
	d[SlotsReservedBusy] = Def{Name: "triage_consumer_slots_reserved_high_busy", Help: "Reserved high slots running a task (EMF: the peak since the last flush).", Kind: Gauge, Unit: "Count", Peak: true}
	d[QueueDepth] = Def{Name: "triage_queue_depth", Help: "Visible messages on a priority's queue, sampled by the promoter.", Kind: Gauge, Labels: []string{LabelPriority}, Unit: "Count"}
	d[QueueOldestAge] = Def{Name: "triage_queue_oldest_age_seconds", Help: "How long the oldest queued task of a priority has waited (to the minute, an upper bound; 0 when none), sampled by the promoter.", Kind: Gauge, Labels: []string{LabelPriority}, Unit: "Seconds"}
	d[DLQDepth] = Def{Name: "triage_dlq_depth", Help: "Messages on a priority's dead-letter queue, sampled by the promoter.", Kind: Gauge, Labels: []string{LabelPriority}, Unit: "Count"}
	d[ScheduleTicks] = Def{Name: "triage_schedule_ticks_total", Help: "Schedule ticks the promoter handled: enqueued (a task made), skipped (missed and skipped by the schedule's policy).", Kind: Counter, Labels: []string{LabelOutcome}, Unit: "Count"}
	d[KeyTasksStarted] = Def{Name: "triage_key_tasks_started_total", Help: "Attempts started, by fairness key: keys with keyed controls by name (at most 50), every other key as \"#other\".", Kind: Counter, Labels: []string{LabelKey}, Unit: "Count", Rollups: total}
	d[KeyTasksFinished] = Def{Name: "triage_key_tasks_finished_total", Help: "Attempts whose outcome was recorded, by fairness key (named as in triage_key_tasks_started_total) and outcome: completed, retried, dead_lettered, cancelled, snoozed, handed_back.", Kind: Counter, Labels: []string{LabelKey, LabelOutcome}, Unit: "Count", Rollups: [][]string{{LabelOutcome}, {}}}
	d[KeyPutOffs] = Def{Name: "triage_key_putoffs_total", Help: "Tasks a keyed control put off (set aside or hidden), by fairness key (named as in triage_key_tasks_started_total) and reason, as in triage_putoffs_total.", Kind: Counter, Labels: []string{LabelKey, LabelReason}, Unit: "Count", Rollups: [][]string{{LabelReason}, {}}}
	d[Steps] = Def{Name: "triage_steps_total", Help: "Durable steps met by handlers, by task type, kind (run, sleep, wait) and outcome: ok and error (a run step's result or permanent error recorded), started (a sleep or signal wait begun), signalled and timed_out (a wait's end recorded), replayed (read back from its record, its function not run).", Kind: Counter, Labels: []string{LabelType, LabelKind, LabelOutcome}, Unit: "Count", Rollups: [][]string{{LabelKind, LabelOutcome}, {}}}
	return d
}

// Sink renders observations. values are the metric's label values, in
// Def.Labels order. A sink must be safe for concurrent use.
type Sink interface {
	Add(id ID, values []string, v float64)     // a counter's increase
	Set(id ID, values []string, v float64)     // a gauge's value
	Observe(id ID, values []string, v float64) // one histogram observation
}

// Flusher is a sink that buffers: Flush writes what it holds (EMF).
type Flusher interface {
	Flush() error
}

// Recorder turns what triage's parts report into observations on its
// sinks. Its methods are safe for concurrent use, and a nil *Recorder
// records nothing.
type Recorder struct {
	sinks []Sink
	// keyLabel names a key for the key label (LabelKeys); unset, every
	// key is OtherKey.
	keyLabel atomic.Pointer[func(string) string]
}

// LabelKeys sets how the key label names a fairness key: f must return
// the key or OtherKey, and name a bounded set of keys (the consumer uses
// control.Controls.KeyLabel: the keys with keyed controls). f runs on
// every start and outcome, so it must not block or make requests.
func (r *Recorder) LabelKeys(f func(key string) string) {
	if r != nil {
		r.keyLabel.Store(&f)
	}
}

// key is t's key label.
func (r *Recorder) key(t *task.Task) string {
	if f := r.keyLabel.Load(); f != nil {
		return (*f)(t.FairKey())
	}
	return OtherKey
}

// New returns a recorder writing to sinks.
func New(sinks ...Sink) *Recorder { return &Recorder{sinks: sinks} }

// Flush flushes every sink that buffers, and returns the first error.
func (r *Recorder) Flush() error {
	if r == nil {
		return nil
	}
	var first error
	for _, s := range r.sinks {
		if f, ok := s.(Flusher); ok {
			if err := f.Flush(); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}

func (r *Recorder) add(id ID, v float64, values ...string) {
	for _, s := range r.sinks {
		s.Add(id, values, v)
	}
}

func (r *Recorder) set(id ID, v float64, values ...string) {
	for _, s := range r.sinks {
		s.Set(id, values, v)
	}
}

func (r *Recorder) observe(id ID, v float64, values ...string) {
	for _, s := range r.sinks {
		s.Observe(id, values, v)
	}
}

// Outcome is what became of a claimed task's attempt.
type Outcome int

// The outcomes an attempt is recorded with.
const (
	Completed Outcome = iota
	Retried
	DeadLettered
	Cancelled
	Snoozed
	HandedBack
)

var outcomeIDs = [...]ID{Completed: TasksCompleted, Retried: TasksRetried, DeadLettered: TasksDeadLettered, Cancelled: TasksCancelled, Snoozed: TasksSnoozed, HandedBack: TasksHandedBack}

// Failure is why an attempt failed (the reason label of
// triage_task_failures_total): a small fixed set, so the label's values
// stay few whatever handlers return.
type Failure string

// The failure reasons.
const (
	FailError          Failure = "error"           // the handler returned a retriable error
	FailPermanent      Failure = "permanent"       // the handler returned a permanent error
	FailTimeout        Failure = "timeout"         // the handler ran past timeout_seconds
	FailPanic          Failure = "panic"           // the handler panicked
	FailNoHandler      Failure = "no_handler"      // no handler for the task's type
	FailPayloadMissing Failure = "payload_missing" // the payload object is gone
	FailBadResult      Failure = "bad_result"      // a result that is not JSON, or too large to store
	FailLeaseExpired   Failure = "lease_expired"   // the last attempt's worker stopped renewing its lease
	FailMaxReceives    Failure = "max_receives"    // SQS redrove the task's message to the DLQ
)

// FailureReasons lists every Failure, the reason label values a dashboard
// graphs.
func FailureReasons() []string {
	return []string{string(FailError), string(FailPermanent), string(FailTimeout), string(FailPanic), string(FailNoHandler),
		string(FailPayloadMissing), string(FailBadResult), string(FailLeaseExpired), string(FailMaxReceives)}
}

// Drop is why a message was not run (triage_messages_dropped_total).
type Drop string

// The drop reasons: Stale copies are deleted; the rest are poison, moved
// to the DLQ with the reason.
const (
	DropStale        Drop = "stale"
	DropNoTask       Drop = "no_task"
	DropVersionAhead Drop = "version_ahead"
	DropInvalid      Drop = "invalid"
)

// PutOff is why a message was hidden to be tried later (triage_putoffs_total).
type PutOff string

// The put-off reasons.
const (
	PutOffPaused       PutOff = "paused"
	PutOffRate         PutOff = "rate_limit"
	PutOffConcurrency  PutOff = "concurrency_limit"
	PutOffLeased       PutOff = "leased"        // another worker holds the task's lease
	PutOffControlError PutOff = "control_error" // the controls could not be read
	PutOffContention   PutOff = "contention"    // the task kept changing under the claim
	PutOffNoHandler    PutOff = "no_handler"    // no handler here; another worker may run the type (dispatch/unhandled.go)
	// PutOffBehindHeld: the task's scope has tasks set aside, so it joins
	// the back of them rather than overtake them (package hold).
	PutOffBehindHeld PutOff = "behind_held"
	// PutOffRetryAfter: the task's scope waits for a handler's Retry-After.
	PutOffRetryAfter PutOff = "retry_after"
)

// PutOffReasons lists every PutOff, the reason label values a dashboard
// graphs.
func PutOffReasons() []string {
	return []string{string(PutOffPaused), string(PutOffRate), string(PutOffConcurrency), string(PutOffLeased),
		string(PutOffControlError), string(PutOffContention), string(PutOffNoHandler), string(PutOffBehindHeld), string(PutOffRetryAfter)}
}

// Recovery is how a task was recovered (triage_recoveries_total).
type Recovery string

// The recoveries.
const (
	RecoveredLease   Recovery = "lease_expired" // reclaimed after its worker stopped renewing the lease
	RecoveredMessage Recovery = "message_lost"  // its message was gone; a new one was sent
	// RecoveredOrphan: a consumer had dead-lettered its message before its
	// record landed; the promoter sent the message again.
	RecoveredOrphan Recovery = "orphan_rescued"
)

// Submitted records a new task accepted.
func (r *Recorder) Submitted(t *task.Task) {
	if r == nil {
		return
	}
	r.add(TasksSubmitted, 1, t.Type, string(t.Priority))
}

// Started records a claim of t at at and, for its first start (first,
// which the caller tells from the task before or after its claim), its
// wait: from enqueue, or run_at if later, to at; and for a promoted task,
// from its last promotion to at. Retries and reclaims record no wait
// (theirs is a backoff or a lost worker, not the queue's).
func (r *Recorder) Started(t *task.Task, at time.Time, first bool) {
	if r == nil {
		return
	}
	r.add(TasksStarted, 1, t.Type, string(t.Priority))
	r.add(KeyTasksStarted, 1, r.key(t))
	if !first {
		return
	}
	ready := t.EnqueuedAtOr(t.CreatedAt)
	if t.RunAt != nil && t.RunAt.After(ready) {
		ready = *t.RunAt
	}
	r.observe(TaskWait, seconds(at.Sub(ready)), string(t.Priority))
	if t.EffectivePriority != t.Priority && !t.WaitingSince.IsZero() {
		r.observe(TaskPromotedWait, seconds(at.Sub(t.WaitingSince)), string(t.EffectivePriority))
	}
}

// Ran records how long t's handler ran.
func (r *Recorder) Ran(t *task.Task, d time.Duration) {
	if r == nil {
		return
	}
	r.observe(TaskRun, seconds(d), t.Type)
}

// Failed records a failed attempt of t.
func (r *Recorder) Failed(t *task.Task, why Failure) {
	if r == nil {
		return
	}
	r.add(TaskFailures, 1, t.Type, string(why))
}

// Finished records the outcome written for t's attempt.
func (r *Recorder) Finished(t *task.Task, o Outcome) {
	if r == nil || int(o) >= len(outcomeIDs) {
		return
	}
	r.add(outcomeIDs[o], 1, t.Type, string(t.Priority))
	r.add(KeyTasksFinished, 1, r.key(t), outcomeNames[o])
}

// outcomeNames are the outcome label values of triage_key_tasks_finished_total.
var outcomeNames = [...]string{Completed: "completed", Retried: "retried", DeadLettered: "dead_lettered", Cancelled: "cancelled", Snoozed: "snoozed", HandedBack: "handed_back"}

// The outcome label values of triage_steps_total.
const (
	StepOK        = "ok"        // a run step's result recorded
	StepError     = "error"     // a run step's permanent error recorded
	StepStarted   = "started"   // a sleep or a signal wait recorded as begun
	StepSignalled = "signalled" // a wait's signal consumed
	StepTimedOut  = "timed_out" // a wait's timeout recorded
	StepReplayed  = "replayed"  // a record read back; nothing ran
)

// Step records a durable step of t's handler: st was replayed from its
// record, or (replayed false) just recorded.
func (r *Recorder) Step(t *task.Task, st task.Step, replayed bool) {
	if r == nil {
		return
	}
	kind, outcome := StepLabels(st, replayed)
	r.add(Steps, 1, t.Type, kind, outcome)
}

// StepLabels are st's kind and outcome labels in triage_steps_total (and
// on the attempt span's step events): the kind is st's, a consumed wait
// (task.StepSignal) counting as task.StepWait; the outcome one of the
// Step* outcome values.
func StepLabels(st task.Step, replayed bool) (kind, outcome string) {
	kind, outcome = st.Kind, StepOK
	switch {
	case replayed:
		outcome = StepReplayed
	case st.Kind == task.StepRun && st.Error != "":
		outcome = StepError
	case st.Kind == task.StepSleep, st.Kind == task.StepWait:
		outcome = StepStarted
	case st.Kind == task.StepSignal && st.TimedOut:
		outcome = StepTimedOut
	case st.Kind == task.StepSignal:
		outcome = StepSignalled
	}
	if kind == task.StepSignal {
		kind = task.StepWait
	}
	return kind, outcome
}

// KeyPutOff records a task that a keyed control (its key's, or its type
// and key's) put off, by the task's key label.
func (r *Recorder) KeyPutOff(t *task.Task, why PutOff) {
	if r == nil {
		return
	}
	r.add(KeyPutOffs, 1, r.key(t), string(why))
}

// Dropped records a message that was not run.
func (r *Recorder) Dropped(why Drop) {
	if r == nil {
		return
	}
	r.add(MessagesDropped, 1, string(why))
}

// PutOff records a message hidden to be tried later.
func (r *Recorder) PutOff(why PutOff) {
	if r == nil {
		return
	}
	r.add(PutOffs, 1, string(why))
}

// Recovered records a recovery.
func (r *Recorder) Recovered(how Recovery) {
	if r == nil {
		return
	}
	r.add(Recoveries, 1, string(how))
}

// Promoted records n tasks promoted from one priority to the next.
func (r *Recorder) Promoted(from, to triagetype.Priority, n int) {
	if r == nil || n == 0 {
		return
	}
	r.add(Promotions, float64(n), string(from), string(to))
}

// Ticked records n schedule ticks with an outcome (schedule.TickEnqueued,
// schedule.TickSkipped).
func (r *Recorder) Ticked(outcome string, n int) {
	if r == nil || n == 0 {
		return
	}
	r.add(ScheduleTicks, float64(n), outcome)
}

// Slots are a consumer's slot figures.
type Slots struct {
	Capacity, Reserved int // slots, and of those reserved for high tasks
	Busy, ReservedBusy int // running a task, of all and of the reserved
}

// Slots records a consumer's slot figures.
func (r *Recorder) Slots(s Slots) {
	if r == nil {
		return
	}
	r.set(SlotsCapacity, float64(s.Capacity))
	r.set(SlotsReservedCapacity, float64(s.Reserved))
	r.set(SlotsBusy, float64(s.Busy))
	r.set(SlotsReservedBusy, float64(s.ReservedBusy))
}

// Queue is one priority's sampled queue figures.
type Queue struct {
	Depth, DLQDepth int
	OldestAge       time.Duration // 0: nothing queued
}

// Queue records a priority's sampled queue figures.
func (r *Recorder) Queue(p triagetype.Priority, q Queue) {
	if r == nil {
		return
	}
	r.set(QueueDepth, float64(q.Depth), string(p))
	r.set(DLQDepth, float64(q.DLQDepth), string(p))
	r.set(QueueOldestAge, seconds(q.OldestAge), string(p))
}

// seconds is d in seconds, never negative (clocks of different machines
// may disagree by a little).
func seconds(d time.Duration) float64 { return max(d, 0).Seconds() }
