// Package handlertest checks a handler call's outcome the same way for
// every handler kind's tests: the result on success, and on failure whether
// the error is retriable and what it says.
package handlertest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/triagehq/triage/internal/handler"
)

// Outcome is what one handler call should produce.
type Outcome struct {
	WantResult  string // compared when WantErr is false
	WantErr     bool
	Permanent   bool     // the error is not retriable
	ErrContains []string // substrings of the error message
}

// Check fails t unless res and err match o. It reports whether the call
// failed, so a caller can make further checks of err.
func Check(t testing.TB, res json.RawMessage, err error, o Outcome) bool {
	t.Helper()
	if !o.WantErr {
		if err != nil {
			t.Fatalf("Handle: %v", err)
		}
		if string(res) != o.WantResult {
			t.Fatalf("result %s, want %s", res, o.WantResult)
		}
		return false
	}
	if err == nil {
		t.Fatalf("Handle: result %s, want an error", res)
	}
	if got := !handler.Retriable(err); got != o.Permanent {
		t.Errorf("permanent = %v, want %v (err %v)", got, o.Permanent, err)
	}
	for _, s := range o.ErrContains {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not contain %q", err, s)
		}
	}
	return true
}
