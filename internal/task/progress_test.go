package task

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCheckProgress(t *testing.T) {
	for _, tc := range []struct {
		name    string
		percent int
		message string
		field   string // "" when valid
	}{
		{"zero", 0, "", ""},
		{"hundred with message", 100, "done", ""},
		{"message at the limit", 50, strings.Repeat("x", MaxProgressMessageBytes), ""},
		{"negative", -1, "", "percent"},
		{"over 100", 101, "", "percent"},
		{"message too long", 5, strings.Repeat("x", MaxProgressMessageBytes+1), "message"},
		{"message not UTF-8", 5, "\xff", "message"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fe := CheckProgress(tc.percent, tc.message)
			switch {
			case tc.field == "" && fe != nil:
				t.Fatalf("CheckProgress = %v, want valid", fe)
			case tc.field != "" && (fe == nil || fe.Field != tc.field):
				t.Fatalf("CheckProgress = %v, want an error naming %s", fe, tc.field)
			}
		})
	}
}

func TestCheckCheckpoint(t *testing.T) {
	big := json.RawMessage(`"` + strings.Repeat("x", MaxCheckpointBytes-1) + `"`)
	for _, tc := range []struct {
		name     string
		data     json.RawMessage
		ok       bool
		tooLarge bool
	}{
		{"object", json.RawMessage(`{"row":4}`), true, false},
		{"null", json.RawMessage(`null`), true, false},
		{"empty", nil, false, false},
		{"not JSON", json.RawMessage(`{row}`), false, false},
		{"over the limit", big, false, true},
		{"at the limit", big[1:], false, false}, // not JSON without its opening quote
	} {
		t.Run(tc.name, func(t *testing.T) {
			fe := CheckCheckpoint(tc.data)
			if (fe == nil) != tc.ok {
				t.Fatalf("CheckCheckpoint = %v, want ok=%v", fe, tc.ok)
			}
			if fe != nil && (fe.Field != "checkpoint" || fe.TooLarge != tc.tooLarge) {
				t.Fatalf("CheckCheckpoint = %+v, want field checkpoint, too large %v", fe, tc.tooLarge)
			}
		})
	}
}

func TestNewProgressTokenIsUnguessable(t *testing.T) {
	a, b := NewProgressToken(), NewProgressToken()
	if a == b || len(a) != 43 {
		t.Fatalf("tokens %q and %q: want two different 43-character tokens (256 bits)", a, b)
	}
}
