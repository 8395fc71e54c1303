package service

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/triagehq/triage/internal/fault"
	"github.com/triagehq/triage/triagetype"
)

// The refusals each operation makes before it reads or writes anything:
// the kind, and the field named. (The emulator tests in internal/api and
// direct cover the rest, through both transports.)
func TestRefusals(t *testing.T) {
	s := New(Deps{}, Options{})
	ctx := context.Background()
	n := func(v int) *int { return &v }
	tests := []struct {
		name  string
		call  func() error
		kind  error
		field string
	}{
		{"get a malformed id", func() error { _, err := s.Get(ctx, "nope", false); return err }, triagetype.ErrBadRequest, "id"},
		{"delete without an id", func() error { return s.Delete(ctx, "") }, triagetype.ErrBadRequest, "id"},
		{"list an unknown status", func() error { _, _, err := s.List(ctx, ListQuery{Statuses: []string{"done"}}); return err }, triagetype.ErrBadRequest, "status"},
		{"list a bad type", func() error { _, _, err := s.List(ctx, ListQuery{Type: "a#b"}); return err }, triagetype.ErrBadRequest, "type"},
		{"list a page of 0 as sent", func() error { _, _, err := s.List(ctx, ListQuery{Limit: -1}); return err }, triagetype.ErrBadRequest, "limit"},
		{"pause a bad type", func() error { _, err := s.SetPaused(ctx, "a\nb", true); return err }, triagetype.ErrBadRequest, "type"},
		{"limits without a type", func() error { _, err := s.SetLimits(ctx, "", 1, 1); return err }, triagetype.ErrBadRequest, "type"},
		{"rate over the limit", func() error { _, err := s.SetLimits(ctx, "t", 1e6, 0); return err }, triagetype.ErrBadRequest, "rate_limit_per_second"},
		{"negative concurrency", func() error { _, err := s.SetLimits(ctx, "t", 0, -1); return err }, triagetype.ErrBadRequest, "max_concurrency"},
		{"keyed controls without them", func() error {
			_, err := s.SetKeyControls(ctx, "k", triagetype.KeyControlsRequest{})
			return err
		}, triagetype.ErrNotImplemented, ""},
		{"dlq reason too long", func() error {
			_, _, err := s.DLQ(ctx, DLQQuery{Reason: strings.Repeat("r", MaxReasonFilter+1)})
			return err
		}, triagetype.ErrBadRequest, "reason"},
		{"replay by message id", func() error { _, err := s.ReplayDLQ(ctx, DLQSelection{MessageIDs: []string{"m"}}); return err }, triagetype.ErrBadRequest, "message_ids"},
		{"replay a task id that is none", func() error { _, err := s.ReplayDLQ(ctx, DLQSelection{TaskIDs: []string{"x"}}); return err }, triagetype.ErrBadRequest, "task_ids"},
		{"replay too many", func() error {
			_, err := s.ReplayDLQ(ctx, DLQSelection{Limit: n(triagetype.MaxReplayLimit + 1)})
			return err
		}, triagetype.ErrBadRequest, "limit"},
		{"purge unconfirmed", func() error { _, err := s.PurgeDLQ(ctx, DLQSelection{}); return err }, triagetype.ErrBadRequest, "confirm"},
		{"workflows without flows", func() error { _, _, err := s.SubmitWorkflow(ctx, triagetype.WorkflowRequest{}); return err }, triagetype.ErrNotImplemented, ""},
		{"batches without flows", func() error { _, err := s.Batch(ctx, "x"); return err }, triagetype.ErrNotImplemented, ""},
		{"schedules without a store", func() error { _, err := s.GetSchedule(ctx, "x"); return err }, triagetype.ErrNotImplemented, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			var e *fault.Error
			if !errors.As(err, &e) || !errors.Is(err, tt.kind) || e.Field != tt.field {
				t.Fatalf("err = %v, want a *fault.Error of kind %v naming %q", err, tt.kind, tt.field)
			}
			if e.Field != "" && !strings.HasPrefix(e.Message, strings.SplitN(tt.field, "[", 2)[0]) {
				t.Errorf("message %q does not start with its field", e.Message)
			}
		})
	}
}
