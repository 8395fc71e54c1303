package service

import (
	"context"
	"fmt"
	"unicode/utf8"

	"github.com/triagehq/triage/internal/control"
	"github.com/triagehq/triage/internal/deadletter"
	"github.com/triagehq/triage/internal/fault"
	"github.com/triagehq/triage/internal/stats"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Stats reads the queue depths, task counts and throughput, with the
// workers and keys sections when a worker registry is wired.
func (s *Service) Stats(ctx context.Context) (*stats.Stats, error) {
	st, err := stats.Collect(ctx, s.d.Counters, s.d.Queues, s.d.Store.Now())
	if err == nil && s.d.Workers != nil {
		keyed, _ := s.d.Controls.(stats.Keyed)
		st.Workers, st.Keys, err = stats.CollectFleet(ctx, s.d.Workers, keyed)
	}
	if err != nil {
		return nil, internal("collect stats", err)
	}
	return &st, nil
}

// Workers lists the consumer instances in the worker registry (none
// without one).
func (s *Service) Workers(ctx context.Context) (*triagetype.WorkerList, error) {
	var ws []triagetype.WorkerInfo
	if s.d.Workers != nil {
		var err error
		if ws, err = s.d.Workers.List(ctx); err != nil {
			return nil, internal("list workers", err)
		}
	}
	if ws == nil {
		ws = []triagetype.WorkerInfo{}
	}
	return &triagetype.WorkerList{Workers: ws, GeneratedAt: s.d.Store.Now().UTC()}, nil
}

// SetPaused pauses (or resumes) task type typ, or every type when typ is
// empty.
func (s *Service) SetPaused(ctx context.Context, typ string, paused bool) (*control.Settings, error) {
	if err := CheckType(typ, "type"); err != nil {
		return nil, err
	}
	st, err := s.d.Controls.SetPaused(ctx, typ, paused)
	if err != nil {
		return nil, internal("set pause", err)
	}
	return &st, nil
}

// SetLimits sets task type typ's rate limit (starts per second, 0 to
// MaxRateLimitPerSecond) and concurrency limit (0 to
// MaxConcurrencyLimit); 0 is no limit.
func (s *Service) SetLimits(ctx context.Context, typ string, rate float64, conc int) (*control.Settings, error) {
	if typ == "" {
		return nil, fault.Invalid("type", "is required") // limits are per type
	}
	if err := CheckType(typ, "type"); err != nil {
		return nil, err
	}
	if rate < 0 || rate > triagetype.MaxRateLimitPerSecond {
		return nil, fault.Invalid("rate_limit_per_second", fmt.Sprintf("must be from 0 (no limit) to %d", triagetype.MaxRateLimitPerSecond))
	}
	if conc < 0 || conc > triagetype.MaxConcurrencyLimit {
		return nil, fault.Invalid("max_concurrency", fmt.Sprintf("must be from 0 (no limit) to %d", triagetype.MaxConcurrencyLimit))
	}
	st, err := s.d.Controls.SetLimits(ctx, typ, rate, conc)
	if err != nil {
		return nil, internal("set limits", err)
	}
	return &st, nil
}

// Controls lists the control settings, the global ones first.
func (s *Service) Controls(ctx context.Context) ([]control.Settings, error) {
	cs, err := s.d.Controls.List(ctx)
	if err != nil {
		return nil, internal("list controls", err)
	}
	return cs, nil
}

// RateUse is the use of the current window of each scope in cs with a
// rate limit, or nil when none has one: a type's under its name, a keyed
// scope's under its scope's name ("key#<key>", "tk#<type>#<key>"; types
// never contain '#'). One small read per such type, and per 500 starts a
// second of each such keyed scope's limit (control.KeyedUse).
func (s *Service) RateUse(ctx context.Context, cs []control.Settings) (map[string]triagetype.RateUse, error) {
	var out map[string]triagetype.RateUse
	ku, keyed := s.d.Controls.(keyedUser)
	for _, c := range cs {
		if c.RateLimitPerSecond <= 0 || (c.Type == "" && c.Key == "") || (c.Key != "" && !keyed) {
			continue
		}
		name, use := c.Type, triagetype.RateUse{}
		if c.Key != "" {
			_, u, err := ku.KeyedUse(ctx, c.Type, c.Key)
			if err != nil {
				return nil, internal("read rate use", err)
			}
			if u == nil {
				continue
			}
			name, use = control.TypeKeyScope(c.Type, c.Key).String(), *u
		} else {
			starts, limit, window, err := s.d.Controls.RateUse(ctx, c.Type, c.RateLimitPerSecond)
			if err != nil {
				return nil, internal("read rate use", err)
			}
			use = triagetype.RateUse{Starts: starts, Limit: limit, WindowSeconds: window.Seconds()}
		}
		if out == nil {
			out = map[string]triagetype.RateUse{}
		}
		out[name] = use
	}
	return out, nil
}

// keyedUser reads a keyed scope's rate use (*control.Controls).
type keyedUser interface {
	KeyedUse(ctx context.Context, typ, key string) (control.Settings, *triagetype.RateUse, error)
}

// SetKeyControls pauses, resumes or limits fairness key key, of every type
// or (r.Type) of one type's tasks; a weight is per key only.
func (s *Service) SetKeyControls(ctx context.Context, key string, r triagetype.KeyControlsRequest) (*control.Settings, error) {
	kc, ok := s.d.Controls.(KeyControls)
	if !ok {
		return nil, fault.NotImplemented("this API has no keyed controls")
	}
	if err := CheckKey(key); err != nil {
		return nil, err
	}
	if err := CheckType(r.Type, "type"); err != nil {
		return nil, err
	}
	if fe := control.CheckKeyLimits(r.RateLimitPerSecond, r.MaxConcurrency, r.Weight); fe != nil {
		return nil, fe.Fault("")
	}
	if r.Weight != nil && r.Type != "" {
		return nil, fault.Invalid("weight", "is per key; leave type out")
	}
	st, err := kc.SetKeyControls(ctx, r.Type, key, r.Paused, r.RateLimitPerSecond, r.MaxConcurrency, r.Weight)
	if err != nil {
		return nil, internal("set key controls", err)
	}
	return &st, nil
}

// CheckKey refuses a fairness key no task can have (naming "key").
func CheckKey(key string) error {
	if key == "" {
		return fault.Invalid("key", "is required")
	}
	if err := task.ValidateKey(key); err != nil {
		return fault.Invalid("key", err.Error())
	}
	return nil
}

// MaxReasonFilter bounds the reason filter: a DLQ reason is at most
// queue.MaxReasonBytes, so a longer filter could match nothing.
const MaxReasonFilter = 256

// MaxSelect bounds task_ids and message_ids: a page's worth.
const MaxSelect = triagetype.MaxListLimit

// DLQQuery filters a DLQ listing; empty fields match everything.
type DLQQuery struct {
	Priority string
	Type     string
	// Reason matches messages whose reason contains it (any case).
	Reason string
	// Limit is the most messages listed: 0 is DefaultListLimit, else 1
	// to MaxListLimit.
	Limit int
}

// DLQ reads up to q.Limit messages matching q without consuming them,
// and whether the read stopped at deadletter.MaxScan messages of a
// priority before the page filled.
func (s *Service) DLQ(ctx context.Context, q DLQQuery) ([]deadletter.Message, bool, error) {
	prios, err := priorities(q.Priority)
	if err != nil {
		return nil, false, err
	}
	if err := CheckType(q.Type, "type"); err != nil {
		return nil, false, err
	}
	if err := checkReason(q.Reason); err != nil {
		return nil, false, err
	}
	limit, err := pageSize(q.Limit)
	if err != nil {
		return nil, false, err
	}
	msgs, truncated, err := s.d.DLQ.Find(ctx, deadletter.Filter{Priorities: prios, Type: q.Type, Reason: q.Reason, Limit: limit})
	if err != nil {
		return nil, false, internal("list DLQ", err)
	}
	if msgs == nil {
		msgs = []deadletter.Message{}
	}
	return msgs, truncated, nil
}

// DLQSelection selects the dead tasks of a replay or a purge (the body of
// POST /dlq/replay and /dlq/purge); empty fields match everything.
type DLQSelection struct {
	Priority string `json:"priority"`
	Type     string `json:"type"`
	// Reason matches messages whose reason contains it (any case).
	Reason string `json:"reason"`
	// TaskIDs limits the call to the messages of these tasks (rows an
	// operator selected), at most MaxSelect.
	TaskIDs []string `json:"task_ids"`
	// MessageIDs limits the call to these messages (purge only: poison
	// bodies name no task), at most MaxSelect.
	MessageIDs []string `json:"message_ids"`
	// Limit is the most tasks acted on: nil is MaxListLimit, else 1 to
	// MaxReplayLimit.
	Limit *int `json:"limit"`
	// Confirm must be true for a purge: it deletes tasks for good.
	Confirm bool `json:"confirm"`
}

// ReplayDLQ sends the dead tasks sel matches back to queued, with their
// attempts reset, and deletes their DLQ messages.
func (s *Service) ReplayDLQ(ctx context.Context, sel DLQSelection) (*deadletter.ReplayResult, error) {
	f, err := selection(sel, false)
	if err != nil {
		return nil, err
	}
	res, err := s.d.DLQ.Replay(ctx, f)
	if err != nil {
		return nil, internal("replay DLQ", err)
	}
	return &res, nil
}

// PurgeDLQ deletes the dead tasks sel matches, and their DLQ messages,
// for good; sel.Confirm must be true.
func (s *Service) PurgeDLQ(ctx context.Context, sel DLQSelection) (*deadletter.PurgeResult, error) {
	f, err := selection(sel, true)
	if err != nil {
		return nil, err
	}
	res, err := s.d.DLQ.Purge(ctx, f)
	if err != nil {
		return nil, internal("purge DLQ", err)
	}
	return &res, nil
}

// selection checks a replay's or a purge's selection.
func selection(sel DLQSelection, purge bool) (deadletter.Filter, error) {
	prios, err := priorities(sel.Priority)
	if err != nil {
		return deadletter.Filter{}, err
	}
	if err := CheckType(sel.Type, "type"); err != nil {
		return deadletter.Filter{}, err
	}
	if err := checkReason(sel.Reason); err != nil {
		return deadletter.Filter{}, err
	}
	f := deadletter.Filter{Priorities: prios, Type: sel.Type, Reason: sel.Reason, TaskIDs: sel.TaskIDs, MessageIDs: sel.MessageIDs, Limit: triagetype.MaxListLimit}
	if len(sel.TaskIDs) > MaxSelect {
		return f, fault.Invalid("task_ids", fmt.Sprintf("at most %d", MaxSelect))
	}
	for i, id := range sel.TaskIDs {
		if fe := task.CheckID(id); fe != nil {
			e := fault.Invalid("task_ids", "")
			e.Message = fmt.Sprintf("task_ids[%d]: %s", i, fe.Message)
			return f, e
		}
	}
	if len(sel.MessageIDs) > MaxSelect {
		return f, fault.Invalid("message_ids", fmt.Sprintf("at most %d", MaxSelect))
	}
	for i, id := range sel.MessageIDs {
		if id == "" || len(id) > 100 || !utf8.ValidString(id) {
			e := fault.Invalid("message_ids", "")
			e.Message = fmt.Sprintf("message_ids[%d]: must be an SQS message id (1 to 100 characters)", i)
			return f, e
		}
	}
	if !purge && len(sel.MessageIDs) > 0 {
		return f, fault.Invalid("message_ids", "only a purge takes message ids (a replay selects by task_ids)")
	}
	if purge && !sel.Confirm {
		return f, fault.Invalid("confirm", "must be true: a purge deletes the dead tasks it matches for good")
	}
	if sel.Limit != nil {
		if *sel.Limit < 1 || *sel.Limit > triagetype.MaxReplayLimit {
			return f, fault.Invalid("limit", fmt.Sprintf("must be from 1 to %d", triagetype.MaxReplayLimit))
		}
		f.Limit = *sel.Limit
	}
	return f, nil
}

// priorities reads an optional priority filter: empty is all three.
func priorities(v string) ([]triagetype.Priority, error) {
	if v == "" {
		return triagetype.Priorities(), nil
	}
	p, err := triagetype.ParsePriority(v)
	if err != nil {
		return nil, fault.Invalid("priority", err.Error())
	}
	return []triagetype.Priority{p}, nil
}

func checkReason(reason string) error {
	if len(reason) > MaxReasonFilter || !utf8.ValidString(reason) {
		return fault.Invalid("reason", fmt.Sprintf("must be UTF-8 text of at most %d bytes", MaxReasonFilter))
	}
	return nil
}
