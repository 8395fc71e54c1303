package triage

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/triagehq/triage/internal/task"
)

// Signaller is the part of a Transport that delivers signals. Both of
// triage's transports have it; a Transport without it makes Client.Signal
// answer ErrNotImplemented.
type Signaller interface {
	Signal(ctx context.Context, id, name string, payload json.RawMessage) (*Task, error)
}

// Signal delivers signal name to task id with payload (encoded to JSON
// unless it is a json.RawMessage; nil: null), for a handler that waits
// for it (worker.WaitSignal) now or later: a signal sent before the wait
// is kept and consumed by it. The task is woken at once if it waits.
// name is 1 to 64 letters, digits, '_', '.', ':' or '-' and the payload at
// most 3 KiB (ErrBadRequest naming the field); an unknown task is
// ErrNotFound, a finished one ErrConflict, and so is a second signal of
// the same name (the first is kept).
func (c *Client) Signal(ctx context.Context, id, name string, payload any) (*Task, error) {
	s, ok := c.t.(Signaller)
	if !ok {
		return nil, fmt.Errorf("signal: %w", ErrNotImplemented)
	}
	raw, ok := payload.(json.RawMessage)
	if !ok {
		b, err := json.Marshal(payload)
		if err != nil {
			return nil, fmt.Errorf("signal %q: encode payload: %w", name, err)
		}
		raw = b
	}
	return s.Signal(ctx, id, name, raw)
}

// Signal implements Signaller: POST /tasks/{id}/signals/{name}.
func (h *HTTPTransport) Signal(ctx context.Context, id, name string, payload json.RawMessage) (*Task, error) {
	if fe := task.CheckID(id); fe != nil {
		return nil, fe.APIError("")
	}
	if fe := task.CheckStepName("name", name); fe != nil {
		return nil, fe.APIError("")
	}
	var t Task
	if _, err := h.do(ctx, http.MethodPost, "/tasks/"+url.PathEscape(id)+"/signals/"+url.PathEscape(name), nil, payload, &t); err != nil {
		return nil, err
	}
	return &t, nil
}
