package flow_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/triagetype"
)

// TestReleaseByMessage: a child of one pending parent is released by its
// message alone when the parent completes (no write: its version is what
// its submit wrote, and it is waiting until its claim); a release message
// naming a parent that did not complete (forged, by anyone who may send to
// the queue) is dropped and its child keeps waiting; a child released
// while its type is paused is set aside (the claim writes its release
// then) and runs once after the resume; every child runs exactly once.
func TestReleaseByMessage(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	ctx := context.Background()

	P := submit(t, a, "P", "")
	C := submit(t, a, "C", "", P.ID)
	P2 := submit(t, a, "P2", "")
	F := submit(t, a, "F", "", P2.ID)

	// The forged release: F's own version, type and timeout, naming its
	// parent P2, which is still queued.
	forged := fmt.Sprintf(`{"id":%q,"v":%d,"p":%q,"t":%q,"s":%d,"r":%q}`,
		F.ID, F.DispatchVersion, F.EffectivePriority, F.Type, F.TimeoutSeconds, P2.ID)
	if _, err := a.Queues.Send(ctx, F.EffectivePriority, forged, 0); err != nil {
		t.Fatal(err)
	}

	finish(t, a.Store, P.ID) // with its walk: C's release message
	c, err := a.Store.Get(ctx, C.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c.Status != triagetype.Waiting || c.Version != C.Version || len(c.WaitingOn) != 1 || c.WaitingOn[0] != P.ID {
		t.Fatalf("after its parent's walk C is %s at version %d waiting on %v; want waiting, version %d (no write), on %s",
			c.Status, c.Version, c.WaitingOn, C.Version, P.ID)
	}

	if _, err := a.Controls.SetPaused(ctx, "node", true); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	consume(t, a, rec)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c, err = a.Store.Get(ctx, C.ID); err != nil {
			t.Fatal(err)
		}
		if c.Status != triagetype.Waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("C is still waiting 30 s after the consumer started (paused type): its release message was not taken")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if c.Status != triagetype.Queued || c.Held == "" || len(c.WaitingOn) != 0 {
		t.Fatalf("C released while paused is %s, held %q, waiting on %v; want queued, set aside, waiting on nothing", c.Status, c.Held, c.WaitingOn)
	}
	time.Sleep(2 * time.Second) // the forged message had its receives too
	if f, _ := a.Store.Get(ctx, F.ID); f.Status != triagetype.Waiting || f.Version != F.Version {
		t.Fatalf("F after a forged release is %s at version %d, want waiting at %d", f.Status, f.Version, F.Version)
	}

	if _, err := a.Controls.SetPaused(ctx, "node", false); err != nil {
		t.Fatal(err)
	}
	stacktest.WaitStatus(t, a.Store, C.ID, triagetype.Completed, time.Minute)
	// P2 runs now (resumed); its walk releases F, which runs.
	stacktest.WaitStatus(t, a.Store, F.ID, triagetype.Completed, time.Minute)
	f, _ := a.Store.Get(ctx, F.ID)
	if f.Attempts != 1 || f.EnqueuedAt == nil || f.StartedAt == nil || f.StartedAt.Before(*f.EnqueuedAt) {
		t.Fatalf("F: attempts %d, enqueued %v, started %v; want one attempt started after its release", f.Attempts, f.EnqueuedAt, f.StartedAt)
	}
	time.Sleep(time.Second)
	n := map[string]int{}
	for _, x := range rec.ran() {
		n[x]++
	}
	if n["C"] != 1 || n["F"] != 1 || n["P2"] != 1 || n["P"] != 0 {
		t.Fatalf("runs %v, want C, F and P2 once each and P (finished by hand) never", n)
	}
}
