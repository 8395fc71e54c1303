package answer

import (
	"errors"
	"testing"

	"github.com/triagehq/triage/internal/submit"
	"github.com/triagehq/triage/triagetype"
)

// Each kind's status maps back to that kind, and only that one, in the
// public error (what a client of either transport matches with errors.Is).
func TestStatusesRoundTrip(t *testing.T) {
	for _, k := range kinds {
		e := Error(&submit.Refused{Kind: k.kind, Code: "c"})
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
	for _, tt := range []struct {
		o    submit.Outcome
		want int
	}{
		{submit.Outcome{Created: true}, 201},
		{submit.Outcome{}, 200},
		{submit.Outcome{Err: &submit.Refused{Kind: triagetype.ErrTooMany}}, 429},
	} {
		if got := OutcomeStatus(tt.o); got != tt.want {
			t.Errorf("OutcomeStatus(%+v) = %d, want %d", tt.o, got, tt.want)
		}
	}
}
