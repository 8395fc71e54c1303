package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/app/consumerapp"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// slowGate admits every task after a pause, as a control check against a
// busy table does: the claim's time and the handler's start then differ.
type slowGate struct{ d time.Duration }

func (g slowGate) Admit(context.Context, *task.Task) (func(), time.Duration, error) {
	time.Sleep(g.d)
	return func() {}, 0, nil
}

// A task's started_at is when its current or last attempt started, and
// each history entry's started_at is its attempt's: the last entry's equals
// the task's, so a task run once shows one time in both places (issue 24
// saw ...03.05 against ...04.37), and a retried one shows each attempt's
// own start, in order. On the emulators, with a control check slow enough
// that the claim's time and the handler's start differ.
func TestAttemptStartIsTheTasksStartedAt(t *testing.T) {
	tests := []struct {
		name     string
		failures int // attempts that fail before one succeeds
	}{
		{"one attempt", 0},
		{"retried once", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := stacktest.New(t)
			a := env.App(t, nil)
			failed := 0
			h := handler.Func(func(context.Context, handler.Request) (json.RawMessage, error) {
				if failed < tt.failures {
					failed++
					return nil, errors.New("not yet")
				}
				return json.RawMessage(`1`), nil
			})
			ids := submit(t, a, "start", triagetype.High, 1, `{}`)
			opt := stacktest.FastDispatch()
			opt.Concurrency, opt.ReservedHigh = 1, 0
			stacktest.Run(t, consumerapp.New(a, stacktest.Registry("start", h), opt, dispatch.Deps{Gate: slowGate{200 * time.Millisecond}}))
			got := stacktest.WaitStatus(t, a.Store, ids[0], triagetype.Completed, 60*time.Second)
			if len(got.History) != tt.failures+1 || got.StartedAt == nil {
				t.Fatalf("history %+v, started_at %v; want %d attempts", got.History, got.StartedAt, tt.failures+1)
			}
			last := got.History[len(got.History)-1]
			if !last.StartedAt.Equal(*got.StartedAt) {
				t.Errorf("started_at %s, last attempt's %s: want the same", got.StartedAt.Format(time.RFC3339Nano), last.StartedAt.Format(time.RFC3339Nano))
			}
			for i := 1; i < len(got.History); i++ {
				if !got.History[i].StartedAt.After(got.History[i-1].FinishedAt) {
					t.Errorf("attempt %d started %s, before attempt %d finished at %s", i+1, got.History[i].StartedAt, i, got.History[i-1].FinishedAt)
				}
			}
		})
	}
}
