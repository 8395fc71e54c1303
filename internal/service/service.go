// Package service is every operation of the API, written once: the HTTP
// API (internal/api) and the direct transport (package direct) both call
// it, so a rule such as "only a finished task can be deleted" holds the
// same way on both.
//
// A method takes its context first and its input already decoded (no
// HTTP), checks it, and calls the store, the queues, the controls or the
// flows. Every error it returns is a *fault.Error: a kind
// (triagetype.ErrBadRequest, ErrNotFound, ...), the wire code and the
// field at fault. Each transport maps the kind to its own terms (the
// HTTP API to a status and an ErrorBody, direct to a *triage.Error with
// the same status); an internal failure keeps its cause for the log.
// Submits go through internal/submit, wired here once.
package service

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/triagehq/triage/internal/control"
	"github.com/triagehq/triage/internal/deadletter"
	"github.com/triagehq/triage/internal/enqueue"
	"github.com/triagehq/triage/internal/fault"
	"github.com/triagehq/triage/internal/flow"
	"github.com/triagehq/triage/internal/schedule"
	"github.com/triagehq/triage/internal/stats"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/submit"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/internal/tracing"
	"github.com/triagehq/triage/triagetype"
)

// Store is the part of the task store the operations use (*store.Store).
type Store interface {
	Get(ctx context.Context, id string) (*task.Task, error)
	List(ctx context.Context, f store.ListFilter, limit int, cursor string) ([]*task.Task, string, error)
	Cancel(ctx context.Context, id string) (*task.Task, error)
	// LoadBodies reads a payload or result kept off the task's record.
	LoadBodies(ctx context.Context, t *task.Task) error
	Now() time.Time
}

// Controls reads and writes pause and limit settings (*control.Controls).
// When it also sets keyed controls (KeyControls), reads them for /stats
// (stats.Keyed) or routes new tasks past a spent window (submit.Router),
// the operations use that too.
type Controls interface {
	SetPaused(ctx context.Context, typ string, paused bool) (control.Settings, error)
	SetLimits(ctx context.Context, typ string, rate float64, maxConcurrency int) (control.Settings, error)
	List(ctx context.Context) ([]control.Settings, error)
	// RateUse is the starts a type's rate limit counted in its current
	// window, out of limit.
	RateUse(ctx context.Context, typ string, perSecond float64) (starts, limit int, window time.Duration, err error)
}

// KeyControls sets the controls of fairness keys (*control.Controls).
type KeyControls interface {
	SetKeyControls(ctx context.Context, typ, key string, paused *bool, rate *float64, conc *int, weight ...*int) (control.Settings, error)
}

// DLQ lists, replays and purges the dead-letter queues, and is the way
// out of dead_letter for a single task too: retrying or deleting a dead
// task through it removes the task's DLQ copy, so the DLQ holds one
// message per dead task (*deadletter.DLQ).
type DLQ interface {
	Find(ctx context.Context, f deadletter.Filter) ([]deadletter.Message, bool, error)
	Replay(ctx context.Context, f deadletter.Filter) (deadletter.ReplayResult, error)
	Purge(ctx context.Context, f deadletter.Filter) (deadletter.PurgeResult, error)
	Retry(ctx context.Context, id string) (*task.Task, error)
	Delete(ctx context.Context, cur *task.Task) error
}

// Cleanups start and read cleanup jobs (*store.Store); the promoter's
// cleanup.Runner does the work.
type Cleanups interface {
	StartCleanup(ctx context.Context, olderThan time.Time) (*store.CleanupJob, error)
	CleanupJob(ctx context.Context, id string) (*store.CleanupJob, error)
}

// Flow submits and reads workflows, and creates, seals and reads batches
// (*flow.Flow).
type Flow interface {
	SubmitWorkflow(ctx context.Context, r *triagetype.WorkflowRequest, known task.KnownTypes) (*flow.WorkflowOutcome, error)
	Workflow(ctx context.Context, id string) (*triagetype.Workflow, error)
	CreateBatch(ctx context.Context, onComplete *triagetype.SubmitRequest, known task.KnownTypes) (*store.BatchHead, error)
	Seal(ctx context.Context, id string) error
	Batch(ctx context.Context, id string) (*triagetype.Batch, error)
}

// Deps are the parts the operations run on. Store and Enqueuer are
// needed by the task operations; a nil part makes the operations that
// need it answer ErrNotImplemented (Flow, Schedules, keyed Controls) or,
// for Workers, an empty list and no workers section in Stats.
type Deps struct {
	Store     Store
	Enqueuer  submit.Enqueuer
	Queues    stats.Queues
	Controls  Controls
	DLQ       DLQ
	Counters  stats.Counters
	Workers   stats.Workers
	Flow      Flow
	Schedules *schedule.Store
	// Cleanups, if nil, is Store when it has them (*store.Store does).
	Cleanups Cleanups
}

// Options tune the submits (submit.Options).
type Options struct {
	// KnownTypes, when not empty, are the only task types a submit,
	// workflow node, batch callback or schedule may name (TRIAGE_TYPES).
	KnownTypes []string
	// DirectWindow: a task due further away than this waits in the table
	// for the promoter (0: queue.MaxDelay).
	DirectWindow time.Duration
	// MaxDepth is the queue depth over which submits are refused with
	// ErrTooMany (0: no limit); MaxDepthHigh is the same for high ones.
	MaxDepth, MaxDepthHigh int
	// Tracing starts the submit spans (tracing.Global()).
	Tracing *tracing.Provider
	// Metrics, if set, counts submitted tasks.
	Metrics submit.Metrics
	// Logger logs failed depth reads (nil: nothing).
	Logger *slog.Logger
}

// Service runs the operations. It is safe for concurrent use.
type Service struct {
	d         Deps
	submit    *submit.Service
	schedules *schedule.Service // nil without d.Schedules
	known     task.KnownTypes
	log       *slog.Logger
}

// New returns the service over d: the one wiring of the submit service
// (backpressure on d.Queues, routing of a spent key window through
// d.Controls) and of the schedule service that both transports use, each
// held to o.KnownTypes.
func New(d Deps, o Options) *Service {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	known := task.NewKnownTypes(o.KnownTypes)
	so := submit.Options{Known: known, DirectWindow: o.DirectWindow, Tracing: o.Tracing, Metrics: o.Metrics}
	if d.Store != nil {
		so.Now = d.Store.Now
	}
	if d.Queues != nil {
		so.Pressure = enqueue.NewBackpressure(d.Queues, o.MaxDepth, o.MaxDepthHigh, o.Logger)
	}
	if r, ok := d.Controls.(submit.Router); ok {
		so.Fair = r
	}
	s := &Service{d: d, submit: submit.New(d.Enqueuer, so), known: known, log: o.Logger}
	if d.Schedules != nil {
		s.schedules = schedule.NewService(d.Schedules, o.KnownTypes)
	}
	return s
}

// internal is the fault of a failure of what ("list tasks") that no rule
// refused: ErrUnavailable (with a Retry-After) when the queue or the
// table did not take a write, else ErrInternal.
func internal(what string, err error) *fault.Error {
	if e := submit.Refusal(err); errors.Is(e.Kind, triagetype.ErrUnavailable) {
		return e
	}
	return fault.Internal(what, err)
}
