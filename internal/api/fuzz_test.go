package api_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/api"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// FuzzSubmitDecode feeds arbitrary bodies through the submit path's
// decoding and validation: it must never panic, every rejection must name a
// field or say the JSON is bad, and every accepted request must build a
// task within the documented limits.
func FuzzSubmitDecode(f *testing.F) {
	for _, seed := range []string{
		`{"type":"echo","payload":{"x":1},"priority":"high"}`,
		`{"type":"echo","max_attempts":0}`,
		`{"type":"echo","timeout_seconds":-5,"priority":"urgent"}`,
		`{"type":"","payload":[1,2,3]}`,
		`{"type":"a#b"}`,
		`{"type":"x","run_at":"2030-01-01T00:00:00Z","delay_seconds":4}`,
		`{"type":"x","run_at":"2030-01-01T00:00:00.1234567891Z"}`,
		`{"type":"x","delay_seconds":99999999999}`,
		`{"type":"x","idempotency_key":"k","extra":true}`,
		`{"type":5}`, `null`, `[]`, `{`, ``, `{"type":"x"} trailing`,
		`{"type":"x","payload":"\u0000"}`,
	} {
		f.Add([]byte(seed))
	}
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, body []byte) {
		var req task.Request
		err := api.DecodeStrict(body, &req)
		if err == nil {
			err = req.Validate()
		}
		if err != nil {
			var fe *task.FieldError
			if errors.As(err, &fe) && fe.Field == "" {
				t.Fatalf("field error without a field: %v", err)
			}
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		tk := req.NewTask(now, 15*time.Minute)
		if err := tk.Priority.Validate(); err != nil {
			t.Fatalf("accepted task has priority %q", tk.Priority)
		}
		if tk.MaxAttempts < 1 || tk.MaxAttempts > task.MaxMaxAttempts || tk.TimeoutSeconds < 1 || tk.TimeoutSeconds > task.MaxTimeoutSeconds {
			t.Fatalf("accepted task out of limits: %+v", tk)
		}
		if len(tk.Payload) > task.MaxPayloadBytes || (len(tk.Payload) > 0 && !json.Valid(tk.Payload)) {
			t.Fatalf("accepted payload %q", tk.Payload)
		}
		if tk.Status != triagetype.Queued && tk.Status != triagetype.Scheduled {
			t.Fatalf("new task is %s", tk.Status)
		}
		if _, err := json.Marshal(tk); err != nil {
			t.Fatalf("task does not marshal: %v", err)
		}
	})
}
