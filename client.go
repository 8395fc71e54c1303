package triage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/triagehq/triage/triagetype"
)

// Transport carries a Client's calls to one triage deployment. HTTP
// returns the transport over the API; package direct has the one that
// writes DynamoDB and SQS itself. Both give the same answers, errors
// included, to the same calls (their tests run one table of scenarios
// against both). A test may implement it to stand in for a deployment;
// a call it does not carry returns an error matching ErrNotImplemented,
// as a deployment does for what it does not offer.
type Transport interface {
	// Submit creates the task r describes. created is false when r's
	// idempotency key was used within 24 h: the first task comes back and
	// nothing is written.
	Submit(ctx context.Context, r SubmitRequest) (t *Task, created bool, err error)
	// SubmitBatch submits 1 to MaxBatch tasks; each gets its own result.
	SubmitBatch(ctx context.Context, rs []SubmitRequest) ([]triagetype.BatchResult, error)
	Get(ctx context.Context, id string) (*Task, error)
	List(ctx context.Context, p ListParams) (*triagetype.TaskPage, error)
	Cancel(ctx context.Context, id string) (*Task, error)
	Retry(ctx context.Context, id string) (*Task, error)
	Delete(ctx context.Context, id string) error
	// StartCleanup starts a cleanup job (GetCleanup follows it).
	StartCleanup(ctx context.Context, olderThan time.Time) (*triagetype.Cleanup, error)
	GetCleanup(ctx context.Context, id string) (*triagetype.Cleanup, error)
	GetStats(ctx context.Context) (*triagetype.Stats, error)
	// SetPaused pauses (or resumes) task type typ, or every type when typ
	// is empty.
	SetPaused(ctx context.Context, typ string, paused bool) (*triagetype.ControlSettings, error)
	SetLimits(ctx context.Context, typ string, l triagetype.LimitsRequest) (*triagetype.ControlSettings, error)
	ListControls(ctx context.Context) ([]triagetype.ControlSettings, error)
	// ListDLQ reads up to limit messages (0: DefaultListLimit) from
	// priority's DLQ, or from all three when priority is empty.
	ListDLQ(ctx context.Context, priority Priority, limit int) ([]triagetype.DLQMessage, error)
	ReplayDLQ(ctx context.Context, r triagetype.ReplayRequest) (*triagetype.ReplayResult, error)
	// SetKeyControls changes fairness key key's controls (nil fields keep
	// their setting).
	SetKeyControls(ctx context.Context, key string, r triagetype.KeyControlsRequest) (*triagetype.ControlSettings, error)
	// ListWorkers lists the consumer instances in the worker registry.
	ListWorkers(ctx context.Context) (*triagetype.WorkerList, error)

	// SubmitWorkflow submits a workflow whole; created is false when its
	// idempotency key named an earlier one, which comes back.
	SubmitWorkflow(ctx context.Context, r WorkflowRequest) (w *triagetype.Workflow, created bool, err error)
	GetWorkflow(ctx context.Context, id string) (*triagetype.Workflow, error)

	// CreateBatch, AddToBatch, SealBatch and GetBatch carry batches with a
	// completion callback.
	CreateBatch(ctx context.Context, r BatchCreate) (*triagetype.Batch, error)
	AddToBatch(ctx context.Context, id string, rs []SubmitRequest) (*triagetype.Batch, error)
	SealBatch(ctx context.Context, id string) (*triagetype.Batch, error)
	GetBatch(ctx context.Context, id string) (*triagetype.Batch, error)

	// PutSchedule creates (created true) or replaces the schedule s names.
	PutSchedule(ctx context.Context, s Schedule) (sc *Schedule, created bool, err error)
	GetSchedule(ctx context.Context, name string) (*Schedule, error)
	// ListSchedules returns up to limit (1 to 100; 0: 100) schedules by
	// name after cursor ("" from the start).
	ListSchedules(ctx context.Context, limit int, cursor string) (*triagetype.SchedulePage, error)
	DeleteSchedule(ctx context.Context, name string) error
	SetSchedulePaused(ctx context.Context, name string, paused bool) (*Schedule, error)
}

// ListParams filters and pages a task listing. Zero values mean no filter
// and the server's page size (100). A filter no index applies is checked on
// the tasks read, a bounded number a call, so a page may come back short
// with a NextCursor: follow it (or use ListAll) to see every match.
type ListParams struct {
	// Type keeps one task type: read from the by-type index when the
	// deployment has it (TRIAGE_TYPE_INDEX), else checked on the tasks read.
	Type   string
	Status Status
	// Priority filters on the effective priority, the queue a task is on now.
	Priority Priority
	// Suspended keeps only tasks waiting durably (worker.Sleep,
	// worker.WaitSignal): "any", "sleep" or "wait".
	Suspended string
	// Limit is the page size, 1 to MaxListLimit.
	Limit int
	// Cursor is a previous page's NextCursor.
	Cursor string
}

// Client is triage's client. It is safe for concurrent use.
type Client struct {
	t Transport
}

// NewClient returns a client that works through t: HTTP(url, token), or
// package direct's transport.
func NewClient(t Transport) *Client { return &Client{t: t} }

// Submit creates a task of type typ. payload is the task's input: a
// json.RawMessage or []byte is sent as the JSON text it holds (and
// validated as such by the server), nil means none, and anything else is
// encoded with encoding/json. created is false when the idempotency key
// (WithIdempotencyKey) was used within 24 h: the first task comes back and
// nothing is written or sent.
//
// A bad option or payload is an *Error matching ErrBadRequest (or
// ErrTooLarge) whose Field names it; a queue over its depth limit is
// ErrTooMany with RetryAfter; ErrUnavailable means nothing was accepted
// and the same call may be repeated safely.
func (c *Client) Submit(ctx context.Context, typ string, payload any, opts ...SubmitOption) (t *Task, created bool, err error) {
	r, err := NewRequest(typ, payload, opts...)
	if err != nil {
		return nil, false, err
	}
	return c.t.Submit(ctx, r)
}

// SubmitBatch submits 1 to MaxBatch tasks in one call (build them with
// NewRequest). The call fails as a whole only when the request does
// (authorization, a malformed batch, the network); each task's own outcome
// is its triagetype.BatchResult, in order, so a batch can partly succeed: check each
// result's Err.
func (c *Client) SubmitBatch(ctx context.Context, rs []SubmitRequest) ([]triagetype.BatchResult, error) {
	res, err := c.t.SubmitBatch(ctx, rs)
	if err == nil && len(res) != len(rs) {
		return res, fmt.Errorf("submit batch: %d results for %d tasks", len(res), len(rs))
	}
	return res, err
}

// SubmitArgs creates a task whose type is args.Kind() and whose payload
// is args encoded as JSON: Submit with the type taken from the payload's
// Go type, as River's Insert does, so it cannot disagree with the worker
// that AddWorker registered for the same Args. Options, answers and
// errors are Submit's.
func (c *Client) SubmitArgs(ctx context.Context, args Args, opts ...SubmitOption) (t *Task, created bool, err error) {
	r, err := argsRequest(args, opts)
	if err == nil {
		err = ValidateRequest(r)
	}
	if err != nil {
		return nil, false, err
	}
	return c.t.Submit(ctx, r)
}

// SubmitArgsBatch submits 1 to MaxBatch typed tasks in one call, as
// River's InsertMany does: SubmitBatch with each item's type and payload
// taken from its Args. Items go to the deployment as they are, so each
// one's validation is the deployment's answer in its triagetype.BatchResult, as in
// SubmitBatch; only an item with nil args or a payload that does not
// encode fails the whole call, before anything is sent, naming its index.
func (c *Client) SubmitArgsBatch(ctx context.Context, items []ArgsItem) ([]triagetype.BatchResult, error) {
	rs := make([]SubmitRequest, len(items))
	for i, it := range items {
		if it.Args == nil { // named as the deployment names a batch item's field
			return nil, invalid(fmt.Sprintf("tasks[%d].type", i), "is required: a typed submit takes it from Args.Kind, and the args are nil")
		}
		r, err := argsRequest(it.Args, it.Opts)
		if err != nil {
			return nil, fmt.Errorf("submit batch: tasks[%d]: %w", i, err)
		}
		rs[i] = r
	}
	return c.SubmitBatch(ctx, rs)
}

// Get reads one task; an unknown id is ErrNotFound.
func (c *Client) Get(ctx context.Context, id string) (*Task, error) { return c.t.Get(ctx, id) }

// ErrDeadLettered and ErrCancelled are what Wait's error matches
// (errors.Is) when the task ended without completing: dead-lettered (its
// attempts ran out, or its handler failed permanently) or cancelled (on
// request, or by its handler). They are the one statement of a failed
// ending, so a caller stops at every failure with `if err != nil` and
// tells them apart with errors.Is.
var (
	ErrDeadLettered = errors.New("task dead-lettered")
	ErrCancelled    = errors.New("task cancelled")
)

// Wait reads a task every interval until it is terminal or ctx ends.
// A completed task comes back with a nil error; a dead-lettered or
// cancelled one comes back too, with an error matching ErrDeadLettered or
// ErrCancelled that says why (the task's Error has it in full). When ctx
// ends first, it returns the last task read and ctx's error; when a read
// fails, no task and that error.
func (c *Client) Wait(ctx context.Context, id string, interval time.Duration) (*Task, error) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var last *Task
	for {
		t, err := c.t.Get(ctx, id)
		if err != nil && ctx.Err() != nil && last != nil {
			return last, ctx.Err() // ctx ended during a read
		}
		if err != nil {
			return nil, err
		}
		if t.Terminal() {
			return t, endError(t)
		}
		last = t
		select {
		case <-ctx.Done():
			return t, ctx.Err()
		case <-tick.C:
		}
	}
}

// endError is the error Wait returns with terminal task t: nil when it
// completed, else its status's sentinel with the reason recorded.
func endError(t *Task) error {
	var sentinel error
	switch t.Status {
	case DeadLetter:
		sentinel = ErrDeadLettered
	case Cancelled:
		sentinel = ErrCancelled
	default:
		return nil
	}
	if t.Error == nil || t.Error.Message == "" {
		return fmt.Errorf("task %s: %w", t.ID, sentinel)
	}
	return fmt.Errorf("task %s: %w: %s", t.ID, sentinel, t.Error.Message)
}

// List reads one page of tasks, newest first; pass its NextCursor as
// p.Cursor to read the next, or use ListAll.
func (c *Client) List(ctx context.Context, p ListParams) (*triagetype.TaskPage, error) {
	return c.t.List(ctx, p)
}

// ErrStop, returned by a ListAll callback, ends the walk early without an
// error.
var ErrStop = errors.New("stop listing")

// ListAll calls fn for every task matching p, following the cursor from
// page to page (starting at p.Cursor). It stops at the first error from
// the deployment or from fn; ErrStop from fn stops it with a nil error. A
// cursor handed back twice is an error rather than an endless loop.
func (c *Client) ListAll(ctx context.Context, p ListParams, fn func(*Task) error) error {
	seen := map[string]bool{}
	for {
		page, err := c.t.List(ctx, p)
		if err != nil {
			return err
		}
		for i := range page.Tasks {
			if err := fn(&page.Tasks[i]); err != nil {
				if errors.Is(err, ErrStop) {
					return nil
				}
				return err
			}
		}
		if page.NextCursor == "" {
			return nil
		}
		if seen[page.NextCursor] {
			return fmt.Errorf("list tasks: the server repeated cursor %q", page.NextCursor)
		}
		seen[page.NextCursor] = true
		p.Cursor = page.NextCursor
	}
}

// Cancel cancels a task that is not terminal. A queued, scheduled or
// retrying task comes back cancelled; an executing one comes back with
// CancelRequested set, and its handler's context is cancelled at the next
// heartbeat. A terminal task is ErrConflict.
func (c *Client) Cancel(ctx context.Context, id string) (*Task, error) { return c.t.Cancel(ctx, id) }

// Retry puts a dead_letter task back on its queue with its attempts reset
// and its error cleared. Any other status (cancelled too) is ErrConflict.
func (c *Client) Retry(ctx context.Context, id string) (*Task, error) { return c.t.Retry(ctx, id) }

// Delete removes a terminal task. A task that is not terminal is
// ErrConflict: cancel it first.
func (c *Client) Delete(ctx context.Context, id string) error { return c.t.Delete(ctx, id) }

// StartCleanup starts a cleanup job that deletes every task that finished
// before olderThan (completed, cancelled or dead-lettered; the dead ones'
// DLQ copies too) and returns it at once, running: the promoter does the
// work, page by page, and resumes it after a crash. GetCleanup shows how
// far it has got. One runs at a time: while one runs, Cleanup is
// ErrConflict naming it.
func (c *Client) StartCleanup(ctx context.Context, olderThan time.Time) (*triagetype.Cleanup, error) {
	return c.t.StartCleanup(ctx, olderThan)
}

// GetCleanup reads cleanup job id: its state and the tasks deleted so far.
func (c *Client) GetCleanup(ctx context.Context, id string) (*triagetype.Cleanup, error) {
	return c.t.GetCleanup(ctx, id)
}

// GetStats reads the queue depths, task counts and throughput.
func (c *Client) GetStats(ctx context.Context) (*triagetype.Stats, error) { return c.t.GetStats(ctx) }

// PauseType stops consumers from starting tasks of type typ, or of every type
// when typ is empty. Running tasks finish; queued ones wait.
func (c *Client) PauseType(ctx context.Context, typ string) (*triagetype.ControlSettings, error) {
	return c.t.SetPaused(ctx, typ, true)
}

// ResumeType undoes PauseType for typ (or globally when typ is empty).
func (c *Client) ResumeType(ctx context.Context, typ string) (*triagetype.ControlSettings, error) {
	return c.t.SetPaused(ctx, typ, false)
}

// SetLimits sets task type typ's limits: l.RateLimitPerSecond task starts
// per second across every consumer and l.MaxConcurrency at once. Both are
// always set, and 0 means no limit, so one call states the type's whole
// limit configuration.
func (c *Client) SetLimits(ctx context.Context, typ string, l triagetype.LimitsRequest) (*triagetype.ControlSettings, error) {
	return c.t.SetLimits(ctx, typ, l)
}

// ListControls lists the control settings: the global ones first, then those
// of every type that has any.
func (c *Client) ListControls(ctx context.Context) ([]triagetype.ControlSettings, error) {
	return c.t.ListControls(ctx)
}

// ListDLQ reads up to limit messages (0: 100) from priority's dead-letter
// queue, or from all three when priority is empty, without consuming them.
func (c *Client) ListDLQ(ctx context.Context, priority Priority, limit int) ([]triagetype.DLQMessage, error) {
	return c.t.ListDLQ(ctx, priority, limit)
}

// ReplayDLQ sends dead_letter tasks whose DLQ message matches r back to
// queued, with their attempts reset, and deletes those DLQ messages.
func (c *Client) ReplayDLQ(ctx context.Context, r triagetype.ReplayRequest) (*triagetype.ReplayResult, error) {
	return c.t.ReplayDLQ(ctx, r)
}
