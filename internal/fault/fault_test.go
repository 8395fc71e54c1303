package fault

import (
	"errors"
	"testing"
)

// Each kind's status maps back to that kind, and only that one, in the
// public error (what a client of either transport matches with errors.Is).
func TestStatusesRoundTrip(t *testing.T) {
	for _, k := range kinds {
		e := (&Error{Kind: k.kind, Code: "c"}).Public()
		if e.Status != k.status {
			t.Errorf("%v: status %d, want %d", k.kind, e.Status, k.status)
		}
		for _, other := range kinds {
			if got := errors.Is(e, other.kind); got != (other.kind == k.kind) {
				t.Errorf("status %d: errors.Is(%v) = %v", e.Status, other.kind, got)
			}
		}
	}
	if Status(errors.New("other")) != 500 {
		t.Error("an unknown kind is not 500")
	}
}
