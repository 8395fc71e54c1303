package workers_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/workers"
	"github.com/triagehq/triage/triagetype"
)

// fakeRegistrar logs the beacon's writes ("register", "beat active 2",
// "deregister") and fails those its fail function names.
type fakeRegistrar struct {
	mu   sync.Mutex
	log  []string
	fail func(call string, n int) error // n: how many calls of this kind came before
	seen map[string]int
}

func (f *fakeRegistrar) call(c string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen == nil {
		f.seen = map[string]int{}
	}
	kind, _, _ := strings.Cut(c, " ")
	n := f.seen[kind]
	f.seen[kind]++
	var err error
	if f.fail != nil {
		err = f.fail(kind, n)
	}
	if err == nil {
		f.log = append(f.log, c)
	} else {
		f.log = append(f.log, c+" FAILED")
	}
	return err
}

func (f *fakeRegistrar) Register(_ context.Context, _ workers.Instance) error {
	return f.call("register")
}

func (f *fakeRegistrar) Heartbeat(_ context.Context, _ workers.Instance, busy int, st triagetype.WorkerState) error {
	return f.call(fmt.Sprintf("beat %s %d", st, busy))
}

func (f *fakeRegistrar) Deregister(context.Context, string) error { return f.call("deregister") }

func (f *fakeRegistrar) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.log)
}

// waitFor polls until the log has an entry equal to want after index
// from, and returns its index.
func (f *fakeRegistrar) waitFor(t *testing.T, want string, from int) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		log := f.calls()
		for i := from; i < len(log); i++ {
			if log[i] == want {
				return i
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no %q after call %d; calls: %v", want, from, f.calls())
	return 0
}

// The beacon registers, heartbeats the busy count, says draining at once
// when asked, and deregisters at Stop; a failed write, of any kind, is
// retried at the next tick and never stops it.
func TestBeacon(t *testing.T) {
	errBoom := errors.New("boom")
	tests := []struct {
		name string
		fail func(call string, n int) error
		// want is a sequence of calls that must appear in this order
		// before Drain is called.
		want []string
	}{
		{"writes succeed", nil, []string{"register", "beat active 2", "beat active 2"}},
		{"registration fails, then succeeds at the next tick", func(c string, n int) error {
			if c == "register" && n == 0 {
				return errBoom
			}
			return nil
		}, []string{"register FAILED", "register", "beat active 2"}},
		{"a failed heartbeat is retried, not re-registered", func(c string, n int) error {
			if c == "beat" && n == 0 {
				return errBoom
			}
			return nil
		}, []string{"register", "beat active 2 FAILED", "beat active 2"}},
		{"an item gone is registered again", func(c string, n int) error {
			if c == "beat" && n == 0 {
				return fmt.Errorf("heartbeat: %w", workers.ErrNotRegistered)
			}
			return nil
		}, []string{"register", "beat active 2 FAILED", "register", "beat active 2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeRegistrar{fail: tt.fail}
			b := workers.Start(context.Background(), f, workers.Instance{ID: "w", Every: 20 * time.Millisecond}, func() int { return 2 }, nil)
			at := 0
			for _, w := range tt.want {
				at = f.waitFor(t, w, at) + 1
			}
			b.Drain()
			at = f.waitFor(t, "beat draining 2", at) + 1
			b.Stop()
			log := f.calls()
			if log[len(log)-1] != "deregister" {
				t.Errorf("last call %q, want deregister; calls: %v", log[len(log)-1], log)
			}
			if slices.Contains(log[at:], "beat active 2") {
				t.Errorf("an active heartbeat after Drain: %v", log[at:])
			}
			n := len(log)
			time.Sleep(60 * time.Millisecond)
			if got := f.calls(); len(got) != n {
				t.Errorf("calls after Stop: %v", got[n:])
			}
		})
	}
}

// An instance with RegisterAfter writes nothing when it stops sooner, and
// registers and heartbeats as usual once it has run that long.
func TestBeaconRegisterAfter(t *testing.T) {
	f := &fakeRegistrar{}
	b := workers.Start(context.Background(), f, workers.Instance{ID: "w", Every: 20 * time.Millisecond, RegisterAfter: time.Hour}, func() int { return 0 }, nil)
	b.Drain()
	b.Stop()
	if got := f.calls(); len(got) != 0 {
		t.Errorf("stopped before RegisterAfter: calls %v, want none", got)
	}

	f = &fakeRegistrar{}
	b = workers.Start(context.Background(), f, workers.Instance{ID: "w", Every: 20 * time.Millisecond, RegisterAfter: 30 * time.Millisecond}, func() int { return 1 }, nil)
	at := f.waitFor(t, "register", 0) + 1
	f.waitFor(t, "beat active 1", at)
	b.Stop()
	if log := f.calls(); log[len(log)-1] != "deregister" {
		t.Errorf("last call %q, want deregister; calls: %v", log[len(log)-1], log)
	}
}

// A nil beacon (a consumer with no registry) does nothing.
func TestNilBeacon(t *testing.T) {
	var b *workers.Beacon
	b.Drain()
	b.Stop()
}
