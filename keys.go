package triage

import (
	"context"
	"github.com/triagehq/triage/triagetype"
	"net/http"
	"net/url"
)

// KeyControlsTransport is a Transport that can set a fairness key's
// controls (both of this module's transports are).
type KeyControlsTransport interface {
	SetKeyControls(ctx context.Context, key string, r KeyControlsRequest) (*ControlSettings, error)
}

// SetKeyControls pauses, resumes or limits fairness key key: of every
// type, or with r.Type of that type's tasks only. A nil field keeps its
// setting; a zero limit removes it. Limits hold across every consumer, as
// a type's do.
func (c *Client) SetKeyControls(ctx context.Context, key string, r KeyControlsRequest) (*ControlSettings, error) {
	kt, ok := c.t.(KeyControlsTransport)
	if !ok {
		return nil, &Error{Status: http.StatusNotImplemented, Code: triagetype.CodeNotImplemented, Message: "this transport has no keyed controls"}
	}
	return kt.SetKeyControls(ctx, key, r)
}

// SetKeyControls implements KeyControlsTransport: PUT /control/keys/{key}.
func (h *HTTPTransport) SetKeyControls(ctx context.Context, key string, r KeyControlsRequest) (*ControlSettings, error) {
	if key == "" {
		return nil, invalid("key", "is required")
	}
	var s ControlSettings
	if _, err := h.do(ctx, http.MethodPut, "/control/keys/"+url.PathEscape(key), nil, r, &s); err != nil {
		return nil, err
	}
	return &s, nil
}
