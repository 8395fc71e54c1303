package task

import (
	"encoding/json"
	"strings"
	"testing"
)

// run_at's text keeps at most nanoseconds; the rule looks only at the
// fraction, the decoder having checked the rest.
func TestValidateRunAtText(t *testing.T) {
	for _, c := range []struct {
		name, raw string
		ok        bool
	}{
		{"absent", "", true},
		{"null", "null", true},
		{"whole seconds", `"2030-01-01T00:00:00Z"`, true},
		{"nanoseconds", `"2030-01-01T00:00:00.123456789Z"`, true},
		{"nanoseconds with an offset", `"2030-01-01T00:00:00.123456789+02:00"`, true},
		{"ten digits", `"2030-01-01T00:00:00.1234567891Z"`, false},
		{"a hundred digits", `"2030-01-01T00:00:00.` + strings.Repeat("1", 100) + `Z"`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := ValidateRunAtText(json.RawMessage(c.raw))
			if c.ok != (err == nil) {
				t.Fatalf("ValidateRunAtText(%.40s) = %v, want ok %v", c.raw, err, c.ok)
			}
			if fe, _ := err.(*FieldError); err != nil && (fe == nil || fe.Field != "run_at") {
				t.Fatalf("error %v does not name run_at", err)
			}
		})
	}
}
