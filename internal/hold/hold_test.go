package hold_test

import (
	"context"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/control"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/hold"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// staleFlags is a consumer's flags whose cache still shows the scope's
// flag up: its MarkHeld writes nothing.
type staleFlags struct{ *control.Controls }

func (staleFlags) MarkHeld(context.Context, string) error { return nil }

// clearHook runs onClear once a ClearHeld has lowered the flag.
type clearHook struct {
	*control.Controls
	onClear func()
}

func (f clearHook) ClearHeld(ctx context.Context, scope string) error {
	err := f.Controls.ClearHeld(ctx, scope)
	if f.onClear != nil {
		f.onClear()
	}
	return err
}

// TestReleaseLooksAgainAfterLoweringTheFlag: a release (a task's end)
// that finds its scope empty lowers the flag and looks once more. A task set aside in
// between by a consumer whose cache still showed the flag up (so it did
// not raise it) is found by that second look, the flag raised again, and
// the task released; without the look it would wait for the promoter's
// sweep with the flag down. With nothing set aside in between, the flag
// stays down.
func TestReleaseLooksAgainAfterLoweringTheFlag(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		late       bool // a task set aside between the lowering and the second look
		wantCount  int
		wantRaised bool
	}{
		{"a set-aside between the lowering and the look", true, 1, true},
		{"nothing set aside meanwhile", false, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "again" + time.Now().Format("150405.000000")
			sc := control.KeyScope(key)
			scope := sc.String()
			// The scope's last set-aside task was released already: its
			// flag is still up and it holds nothing.
			if err := a.Controls.MarkHeld(ctx, scope); err != nil {
				t.Fatal(err)
			}
			var late *task.Task
			hook := clearHook{Controls: a.Controls}
			if tc.late {
				late = submit(t, a, key)
				stale := hold.New(a.Store, a.Enqueuer, staleFlags{a.Controls}, nil)
				hook.onClear = func() {
					if _, err := stale.Hold(ctx, late, scope); err != nil {
						t.Errorf("late set-aside: %v", err)
					}
				}
			}
			h := hold.New(a.Store, a.Enqueuer, hook, nil)
			n, err := h.Release(ctx, scope, 5)
			if err != nil {
				t.Fatal(err)
			}
			if n != tc.wantCount {
				t.Errorf("released %d, want %d", n, tc.wantCount)
			}
			if late != nil {
				got, err := a.Store.Get(ctx, late.ID)
				if err != nil {
					t.Fatal(err)
				}
				if got.Held != "" || !got.Released || got.Status != triagetype.Queued {
					t.Errorf("late task: held %q, released %v, status %s; want released and queued", got.Held, got.Released, got.Status)
				}
			}
			s, err := a.Controls.GetScope(ctx, sc)
			if err != nil {
				t.Fatal(err)
			}
			if s.Held != tc.wantRaised {
				t.Errorf("flag up after the release = %v, want %v", s.Held, tc.wantRaised)
			}
		})
	}
}

// submit records one queued task of type work with key.
func submit(t *testing.T, a *app.App, key string) *task.Task {
	t.Helper()
	r := task.Request{Type: "work", Key: key}
	res := a.Enqueuer.SubmitBatch(context.Background(), []*task.Task{r.NewTask(time.Now().UTC(), 15*time.Minute)})
	if res[0].Err != nil {
		t.Fatalf("submit: %v", res[0].Err)
	}
	got, err := a.Store.Get(context.Background(), res[0].Task.ID)
	if err != nil {
		t.Fatal(err)
	}
	return got
}
