package task

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/triagehq/triage/triagetype"
)

func TestTruncate(t *testing.T) {
	tests := []struct {
		name, in string
		n        int
		want     string
	}{
		{"short kept", "abc", 10, "abc"},
		{"exact kept", "abcd", 4, "abcd"},
		{"cut with mark", "abcdefgh", 6, "abc…"},
		{"never half a character", "aé" + strings.Repeat("x", 10), 5, "a…"},
		{"no room for the mark", "abcdef", 2, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Truncate(tc.in, tc.n)
			if got != tc.want || len(got) > tc.n && tc.n >= len(tc.in) || !utf8.ValidString(got) {
				t.Fatalf("Truncate(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
			}
		})
	}
}

func TestAddAttemptCapsErrorAndHistory(t *testing.T) {
	var tk Task
	for i := range MaxHistory + 3 {
		tk.AddAttempt(triagetype.Attempt{Attempt: i + 1, Error: strings.Repeat("e", 5000)})
	}
	if len(tk.History) != MaxHistory || tk.History[0].Attempt != 4 {
		t.Fatalf("history has %d entries starting at attempt %d", len(tk.History), tk.History[0].Attempt)
	}
	for _, a := range tk.History {
		if len(a.Error) > MaxAttemptErrorBytes {
			t.Fatalf("attempt error is %d bytes, over %d", len(a.Error), MaxAttemptErrorBytes)
		}
	}
	if e := NewError(strings.Repeat("x", 10000), true); len(e.Message) > MaxErrorBytes || !e.Retriable {
		t.Fatalf("NewError kept %d bytes", len(e.Message))
	}
}
