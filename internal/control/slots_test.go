package control

import (
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/triagetype"
)

// TestRunEnded: a slot passes on only when its holder's record shows
// that the run naming it can no longer be executing.
func TestRunEnded(t *testing.T) {
	run := slotRun{task: "T", token: "k", dv: 4}
	rec := func(st triagetype.Status, token string, dv int64) map[string]types.AttributeValue {
		m := map[string]types.AttributeValue{
			"status":           &types.AttributeValueMemberS{Value: string(st)},
			"dispatch_version": &types.AttributeValueMemberN{Value: strconv.FormatInt(dv, 10)},
		}
		if token != "" {
			m["progress_token"] = &types.AttributeValueMemberS{Value: token}
		}
		return m
	}
	for _, c := range []struct {
		name string
		rec  map[string]types.AttributeValue
		run  slotRun
		want bool
	}{
		{"not recorded yet (a direct send's create on its way)", nil, run, false},
		{"claim on its way", rec(triagetype.Queued, "", 4), run, false},
		{"claim on its way after a retry cleared the token", rec(triagetype.Retrying, "", 4), run, false},
		{"running", rec(triagetype.Executing, "k", 4), run, false},
		{"another consumer's claim of the same message won", rec(triagetype.Executing, "other", 4), run, false},
		{"completed", rec(triagetype.Completed, "", 4), run, true},
		{"cancelled before its claim", rec(triagetype.Cancelled, "", 4), run, true},
		{"dead-lettered", rec(triagetype.DeadLetter, "", 4), run, true},
		{"retrying with a new message", rec(triagetype.Retrying, "", 5), run, true},
		{"waiting without a message", rec(triagetype.Queued, "", -1), run, true},
		{"a later attempt runs", rec(triagetype.Executing, "next", 6), run, true},
		{"a holder that names no run", rec(triagetype.Completed, "", 4), slotRun{task: "T"}, false},
	} {
		if got := runEnded(c.rec, c.run); got != c.want {
			t.Errorf("%s: runEnded = %v, want %v", c.name, got, c.want)
		}
	}
}
