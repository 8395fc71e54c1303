// Package demo provides the built-in demo handlers echo, sleep, fail and
// noop. `triage dev`, the tests and the bench always register them; the
// deployed consumer function registers them only when TRIAGE_DEMO_HANDLERS
// is true.
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/triagehq/triage/internal/handler"
)

// Register adds the demo handlers to r.
func Register(r *handler.Registry) {
	r.Register("echo", handler.Func(Echo))
	r.Register("sleep", handler.Func(Sleep))
	r.Register("fail", handler.Func(Fail))
	r.Register("noop", handler.Func(func(context.Context, handler.Request) (json.RawMessage, error) { return nil, nil }))
}

// Echo returns its payload.
func Echo(_ context.Context, r handler.Request) (json.RawMessage, error) {
	if len(r.Payload) == 0 {
		return json.RawMessage("null"), nil
	}
	return r.Payload, nil
}

// Sleep waits {"ms": N} milliseconds, or until its context ends.
func Sleep(ctx context.Context, r handler.Request) (json.RawMessage, error) {
	var p struct {
		MS int `json:"ms"`
	}
	if err := decode(r.Payload, &p); err != nil {
		return nil, err
	}
	t := time.NewTimer(time.Duration(p.MS) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return json.RawMessage(fmt.Sprintf(`{"slept_ms":%d}`, p.MS)), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Fail fails on its first {"times": N} attempts, then succeeds. With
// {"permanent": true} its failures are not retriable.
func Fail(_ context.Context, r handler.Request) (json.RawMessage, error) {
	var p struct {
		Times     int    `json:"times"`
		Permanent bool   `json:"permanent"`
		Message   string `json:"message"`
	}
	if err := decode(r.Payload, &p); err != nil {
		return nil, err
	}
	if r.Attempt <= p.Times {
		msg := p.Message
		if msg == "" {
			msg = fmt.Sprintf("demo failure %d of %d", r.Attempt, p.Times)
		}
		if p.Permanent {
			return nil, handler.Permanent(errors.New(msg))
		}
		return nil, errors.New(msg)
	}
	return json.RawMessage(fmt.Sprintf(`{"succeeded_on_attempt":%d}`, r.Attempt)), nil
}

func decode(payload json.RawMessage, v any) error {
	if len(payload) == 0 || string(payload) == "null" {
		return nil
	}
	if err := json.Unmarshal(payload, v); err != nil {
		return handler.Permanent(fmt.Errorf("payload: %w", err))
	}
	return nil
}
