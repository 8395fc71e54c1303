package direct

import (
	"context"
	"fmt"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/internal/control"
	"github.com/triagehq/triage/internal/deadletter"
	"github.com/triagehq/triage/internal/stats"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Stats implements triage.Transport.
func (d *Transport) Stats(ctx context.Context) (*triage.Stats, error) {
	st, err := stats.Collect(ctx, d.counters, d.queues, d.store.Now())
	if err == nil {
		err = d.withWorkers(ctx, &st)
	}
	if err != nil {
		return nil, internal("collect stats", err)
	}
	return &st, nil
}

// SetPaused implements triage.Transport.
func (d *Transport) SetPaused(ctx context.Context, typ string, paused bool) (*triage.ControlSettings, error) {
	if err := checkType(typ, "type"); err != nil {
		return nil, err
	}
	s, err := d.controls.SetPaused(ctx, typ, paused)
	if err != nil {
		return nil, internal("set pause", err)
	}
	return &s, nil
}

// SetLimits implements triage.Transport.
func (d *Transport) SetLimits(ctx context.Context, typ string, l triage.LimitsRequest) (*triage.ControlSettings, error) {
	if typ == "" {
		return nil, invalid("type", "is required") // limits are per type
	}
	if err := checkType(typ, "type"); err != nil {
		return nil, err
	}
	if l.RateLimitPerSecond < 0 || l.RateLimitPerSecond > triagetype.MaxRateLimitPerSecond {
		return nil, invalid("rate_limit_per_second", fmt.Sprintf("must be from 0 (no limit) to %d", triagetype.MaxRateLimitPerSecond))
	}
	if l.MaxConcurrency < 0 || l.MaxConcurrency > triagetype.MaxConcurrencyLimit {
		return nil, invalid("max_concurrency", fmt.Sprintf("must be from 0 (no limit) to %d", triagetype.MaxConcurrencyLimit))
	}
	s, err := d.controls.SetLimits(ctx, typ, l.RateLimitPerSecond, l.MaxConcurrency)
	if err != nil {
		return nil, internal("set limits", err)
	}
	return &s, nil
}

// Controls implements triage.Transport.
func (d *Transport) Controls(ctx context.Context) ([]triage.ControlSettings, error) {
	cs, err := d.controls.List(ctx)
	if err != nil {
		return nil, internal("list controls", err)
	}
	return cs, nil
}

// priorities reads an optional DLQ priority: empty is all three.
func priorities(p triage.Priority) ([]triagetype.Priority, error) {
	if p == "" {
		return triagetype.Priorities(), nil
	}
	pr, err := triagetype.ParsePriority(string(p))
	if err != nil {
		return nil, invalid("priority", err.Error())
	}
	return []triagetype.Priority{pr}, nil
}

// DLQ implements triage.Transport.
func (d *Transport) DLQ(ctx context.Context, priority triage.Priority, limit int) ([]triage.DLQMessage, error) {
	prios, err := priorities(priority)
	if err != nil {
		return nil, err
	}
	n, err := listLimit(limit)
	if err != nil {
		return nil, err
	}
	msgs, err := d.dlq.List(ctx, prios, n)
	if err != nil {
		return nil, internal("list DLQ", err)
	}
	if msgs == nil {
		msgs = []triage.DLQMessage{}
	}
	return msgs, nil
}

// ReplayDLQ implements triage.Transport.
func (d *Transport) ReplayDLQ(ctx context.Context, r triage.ReplayRequest) (*triage.ReplayResult, error) {
	prios, err := priorities(r.Priority)
	if err != nil {
		return nil, err
	}
	if err := checkType(r.Type, "type"); err != nil {
		return nil, err
	}
	limit := triagetype.MaxListLimit
	if r.Limit != 0 {
		if r.Limit < 1 || r.Limit > triagetype.MaxReplayLimit {
			return nil, invalid("limit", fmt.Sprintf("must be from 1 to %d", triagetype.MaxReplayLimit))
		}
		limit = r.Limit
	}
	res, err := d.dlq.Replay(ctx, deadletter.ReplayFilter{Priorities: prios, Type: r.Type, Limit: limit})
	if err != nil {
		return nil, internal("replay DLQ", err)
	}
	return &res, nil
}

// SetKeyControls implements triage.Transport.
func (d *Transport) SetKeyControls(ctx context.Context, key string, r triage.KeyControlsRequest) (*triage.ControlSettings, error) {
	if key == "" {
		return nil, invalid("key", "is required")
	}
	if err := task.ValidateKey(key); err != nil {
		return nil, invalid("key", err.Error())
	}
	if err := checkType(r.Type, "type"); err != nil {
		return nil, err
	}
	if fe := control.CheckKeyLimits(r.RateLimitPerSecond, r.MaxConcurrency, r.Weight); fe != nil {
		return nil, invalid(fe.Field, fe.Message)
	}
	if r.Weight != nil && r.Type != "" {
		return nil, invalid("weight", "is per key; leave type out")
	}
	s, err := d.controls.SetKeyControls(ctx, r.Type, key, r.Paused, r.RateLimitPerSecond, r.MaxConcurrency, r.Weight)
	if err != nil {
		return nil, internal("set key controls", err)
	}
	return &s, nil
}
