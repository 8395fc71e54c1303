package waiting_test

import (
	"context"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/control"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/hold"
)

// TestSweepTakesItsTurnInRateWindows: the promoter's sweep claims a
// rate-limited scope's next window as the consumers' window releasers do.
// While a releaser has the next windows claimed, the sweep releases none of
// the scope's set-aside tasks (they would be refused by the spent window and
// set aside again); with no releaser (its consumer crashed), the sweep wins
// the next window and releases exactly that window's starts, no more. A
// paused scope gets nothing.
func TestSweepTakesItsTurnInRateWindows(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	ctx := context.Background()
	const rate = 2.0
	if _, err := a.Controls.SetLimits(ctx, "metered", rate, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Controls.SetPaused(ctx, "paused", true); err != nil {
		t.Fatal(err)
	}
	metered := control.TypeScope("metered").String()
	holdAll := func(typ string, n int) []string {
		t.Helper()
		ids := submitKeyed(t, a, typ, "", n)
		for _, id := range ids {
			tk, err := a.Store.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := a.Holds.Hold(ctx, tk, control.TypeScope(typ).String()); err != nil {
				t.Fatal(err)
			}
		}
		return ids
	}
	ids := holdAll("metered", 8)
	stillHeld := func() int {
		t.Helper()
		n := 0
		for _, id := range ids {
			tk, err := a.Store.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if tk.Held != "" {
				n++
			}
		}
		return n
	}
	sweeper := hold.Sweeper{Holds: a.Holds, Scopes: a.Controls}

	// A live releaser: it claims the next two windows, as it does.
	w, err := a.Controls.RateHeld(ctx, metered)
	if err != nil || w.N <= 0 || !w.Runnable {
		t.Fatalf("RateHeld = %+v, %v; want a runnable rate scope", w, err)
	}
	for k := range 2 {
		if won, err := a.Controls.ClaimWindow(ctx, metered, w.Next.Add(time.Duration(k)*w.Window)); err != nil || !won {
			t.Fatalf("claim window %d: %v, %v", k, won, err)
		}
	}
	if _, err := sweeper.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if n := stillHeld(); n != len(ids) {
		t.Fatalf("with a releaser's windows claimed, the sweep released %d tasks; want 0", len(ids)-n)
	}

	// The releaser is gone: once its windows have passed, the sweep wins
	// the next one and releases that window's starts.
	time.Sleep(time.Until(w.Next.Add(2 * w.Window)))
	if _, err := sweeper.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if got := len(ids) - stillHeld(); got != w.N {
		t.Fatalf("with no releaser, the sweep released %d tasks; want the window's %d", got, w.N)
	}

	// A paused scope is not released (its resume releases it).
	paused := holdAll("paused", 3)
	if _, err := sweeper.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range paused {
		if tk, _ := a.Store.Get(ctx, id); tk == nil || tk.Held == "" {
			t.Fatalf("the sweep released %s of a paused type", id)
		}
	}
}
