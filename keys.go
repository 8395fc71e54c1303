package triage

import (
	"context"
	"net/http"
	"net/url"

	"github.com/triagehq/triage/triagetype"
)

// SetKeyControls pauses, resumes or limits fairness key key: of every
// type, or with r.Type of that type's tasks only. A nil field keeps its
// setting; a zero limit removes it. Limits hold across every consumer, as
// a type's do.
func (c *Client) SetKeyControls(ctx context.Context, key string, r triagetype.KeyControlsRequest) (*triagetype.ControlSettings, error) {
	return c.t.SetKeyControls(ctx, key, r)
}

// SetKeyControls implements Transport: PUT /control/keys/{key}.
func (h *HTTPTransport) SetKeyControls(ctx context.Context, key string, r triagetype.KeyControlsRequest) (*triagetype.ControlSettings, error) {
	if key == "" {
		return nil, invalid("key", "is required")
	}
	var s triagetype.ControlSettings
	if _, err := h.do(ctx, http.MethodPut, "/control/keys/"+url.PathEscape(key), nil, r, &s); err != nil {
		return nil, err
	}
	return &s, nil
}
