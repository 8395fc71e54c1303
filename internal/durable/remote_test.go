package durable

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/task"
)

// memJournal keeps records in memory, as the store would on the item.
type memJournal struct{ recs map[int]task.Step }

func (j *memJournal) Record(_ context.Context, st task.Step, _ int) error {
	j.recs[st.Seq] = st
	return nil
}

func (j *memJournal) Result(_ context.Context, st task.Step) ([]byte, error) { return st.Result, nil }

func (j *memJournal) steps() []task.Step {
	var out []task.Step
	for i := range len(j.recs) {
		out = append(out, j.recs[i])
	}
	return out
}

var errPermanent = errors.New("permanent")

func permanent(err error) error { return errors.Join(err, errPermanent) }

// saga is a remote handler as the protocol asks one to be written: it
// replays by name and returns after each step it runs.
func saga(ran map[string]int) func(context.Context, Records) (json.RawMessage, error) {
	return func(_ context.Context, r Records) (json.RawMessage, error) {
		done := map[string]RemoteStep{}
		for _, st := range r.Steps {
			done[st.Name] = st
		}
		for _, name := range []string{"charge", "reserve"} {
			if _, ok := done[name]; !ok {
				ran[name]++
				return json.RawMessage(`{"triage_durable":{"steps":[{"name":"` + name + `","result":"` + name + `-ok"}]}}`), nil
			}
		}
		if _, ok := done["nap"]; !ok {
			return json.RawMessage(`{"triage_durable":{"sleep":{"name":"nap","seconds":60}}}`), nil
		}
		ok, found := done["approval"]
		if !found {
			return json.RawMessage(`{"triage_durable":{"wait":{"signal":"approval","timeout_seconds":3600}}}`), nil
		}
		if ok.TimedOut {
			return json.RawMessage(`"timed out"`), nil
		}
		return json.RawMessage(`{"charge":` + string(done["charge"].Result) + `,"approval":` + string(ok.Result) + `}`), nil
	}
}

func TestDriveSaga(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	j := &memJournal{recs: map[int]task.Step{}}
	ran := map[string]int{}
	call := saga(ran)
	ctx := context.Background()

	// Attempt 1: both steps run (one call each), then the sleep suspends.
	_, err := Drive(ctx, New(nil, nil, 1, j, clock), 1, call, permanent)
	se, ok := SuspendOf(err)
	if !ok || !se.WakeAt.Equal(now.Add(time.Minute)) || se.Signal != "" {
		t.Fatalf("attempt 1: %v; want a sleep until %v", err, now.Add(time.Minute))
	}
	// Woken early (a stray message): it sleeps again, running nothing.
	_, err = Drive(ctx, New(j.steps(), nil, 1, j, clock), 1, call, permanent)
	if _, ok := SuspendOf(err); !ok {
		t.Fatalf("woken early: %v; want the sleep again", err)
	}
	// After the sleep: the wait suspends for the signal.
	now = now.Add(2 * time.Minute)
	_, err = Drive(ctx, New(j.steps(), nil, 1, j, clock), 1, call, permanent)
	if se, ok := SuspendOf(err); !ok || se.Signal != "approval" {
		t.Fatalf("after the sleep: %v; want a wait for approval", err)
	}
	// The signal arrived: the wait is consumed before the call.
	sig := []task.Signal{{Name: "approval", Payload: json.RawMessage(`{"ok":true}`), At: now}}
	res, err := Drive(ctx, New(j.steps(), sig, 1, j, clock), 1, call, permanent)
	if err != nil || string(res) != `{"charge":"charge-ok","approval":{"ok":true}}` {
		t.Fatalf("resumed: %s, %v", res, err)
	}
	if ran["charge"] != 1 || ran["reserve"] != 1 {
		t.Fatalf("ran %v; want each step once", ran)
	}
	kinds := []string{}
	for _, st := range j.steps() {
		kinds = append(kinds, st.Name+":"+st.Outcome())
	}
	if got := strings.Join(kinds, " "); got != "charge:ok reserve:ok nap:slept approval:signalled" {
		t.Fatalf("records %s", got)
	}
}

func TestDriveDirectives(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name      string
		responses []string
		want      string // the result, or the error's text
		permanent bool
		steps     int
	}{
		{"plain result", []string{`{"a":1}`}, `{"a":1}`, false, 0},
		{"not an object", []string{`"triage_durable"`}, `"triage_durable"`, false, 0},
		{"steps and result in one", []string{`{"triage_durable":{"steps":[{"name":"a","result":1},{"name":"b","error":"declined"}],"result":{"done":true}}}`}, `{"done":true}`, false, 2},
		{"null result", []string{`{"triage_durable":{"result":null}}`}, `null`, false, 0},
		{"empty directive", []string{`{"triage_durable":{}}`}, "records nothing", true, 0},
		{"bad step name", []string{`{"triage_durable":{"steps":[{"name":"no spaces"}]}}`}, "steps[0].name", true, 0},
		{"unknown field", []string{`{"triage_durable":{"sleeep":{}}}`}, "unknown field", true, 0},
		{"two asks", []string{`{"triage_durable":{"sleep":{"seconds":1},"result":1}}`}, "at most one", true, 0},
		{"bad timeout", []string{`{"triage_durable":{"wait":{"signal":"x"}}}`}, "wait.timeout_seconds", true, 0},
		{"reported twice", []string{`{"triage_durable":{"steps":[{"name":"a","result":1}]}}`, `{"triage_durable":{"steps":[{"name":"a","result":1}]}}`}, "non-determinism", true, 1},
		{"elapsed sleep continues", []string{`{"triage_durable":{"sleep":{"seconds":0}}}`, `7`}, `7`, false, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := &memJournal{recs: map[int]task.Step{}}
			n := 0
			res, err := Drive(ctx, New(nil, nil, 1, j, time.Now), 1, func(context.Context, Records) (json.RawMessage, error) {
				if n >= len(c.responses) {
					t.Fatalf("call %d: only %d responses", n+1, len(c.responses))
				}
				n++
				return json.RawMessage(c.responses[n-1]), nil
			}, permanent)
			if err != nil {
				if !strings.Contains(err.Error(), c.want) || errors.Is(err, errPermanent) != c.permanent {
					t.Fatalf("error %v (permanent %v); want %q, permanent %v", err, errors.Is(err, errPermanent), c.want, c.permanent)
				}
			} else if string(res) != c.want {
				t.Fatalf("result %s; want %s", res, c.want)
			}
			if len(j.recs) != c.steps {
				t.Fatalf("%d records; want %d", len(j.recs), c.steps)
			}
		})
	}
}

// An early signal is consumed when the wait is asked for, and the handler
// is called again in the same attempt with the payload recorded.
func TestDriveEarlySignal(t *testing.T) {
	j := &memJournal{recs: map[int]task.Step{}}
	sig := []task.Signal{{Name: "go", Payload: json.RawMessage(`5`), At: time.Now()}}
	var seen []Records
	res, err := Drive(context.Background(), New(nil, sig, 1, j, time.Now), 1, func(_ context.Context, r Records) (json.RawMessage, error) {
		seen = append(seen, r)
		if len(r.Steps) == 0 {
			return json.RawMessage(`{"triage_durable":{"wait":{"signal":"go","timeout_seconds":60}}}`), nil
		}
		return r.Steps[0].Result, nil
	}, permanent)
	if err != nil || string(res) != "5" || len(seen) != 2 || len(seen[0].Signals) != 1 || seen[1].Steps[0].Kind != task.StepSignal {
		t.Fatalf("result %s err %v calls %+v", res, err, seen)
	}
}

type fakeSpawner struct {
	spawned []string
	done    *ChildOutcome // what a read of the child finds
	reads   int
}

func (f *fakeSpawner) ChildOutcome(context.Context, string) (*ChildOutcome, error) {
	f.reads++
	return f.done, nil
}

func (f *fakeSpawner) Spawn(_ context.Context, step string, r task.Request) (string, *ChildOutcome, error) {
	f.spawned = append(f.spawned, step+":"+r.Type)
	return "c-" + step, nil, nil
}

func (f *fakeSpawner) ChildResult(context.Context, string) (json.RawMessage, error) {
	return nil, errors.New("not here")
}

// A remote handler's child directive submits the child once and waits;
// its outcome reaches the handler as the record "child:<name>".
func TestDriveChild(t *testing.T) {
	ctx := context.Background()
	j := &memJournal{recs: map[int]task.Step{}}
	sp := &fakeSpawner{}
	call := func(_ context.Context, r Records) (json.RawMessage, error) {
		for _, st := range r.Steps {
			if st.Name == "child:ship" {
				var o ChildOutcome
				if err := json.Unmarshal(st.Result, &o); err != nil {
					return nil, err
				}
				return json.RawMessage(`{"shipped":` + string(o.Result) + `}`), nil
			}
		}
		return json.RawMessage(`{"triage_durable":{"child":{"name":"ship","request":{"type":"ship","payload":{"order":1}}}}}`), nil
	}
	st := New(nil, nil, 1, j, time.Now)
	st.SetSpawner(sp)
	_, err := Drive(ctx, st, 1, call, permanent)
	if se, ok := SuspendOf(err); !ok || se.Signal != "child:ship" {
		t.Fatalf("first: %v; want a wait for child:ship", err)
	}
	out, _ := json.Marshal(ChildOutcome{ID: "c-ship", Status: "completed", Result: json.RawMessage(`"1Z"`)})
	st = New(j.steps(), []task.Signal{{Name: "child:ship", Payload: out, At: time.Now()}}, 1, j, time.Now)
	st.SetSpawner(sp)
	res, err := Drive(ctx, st, 1, call, permanent)
	if err != nil || string(res) != `{"shipped":"1Z"}` || len(sp.spawned) != 1 || sp.spawned[0] != "ship:ship" {
		t.Fatalf("resumed: %s, %v, spawned %v", res, err, sp.spawned)
	}
}
