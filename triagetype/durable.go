package triagetype

import (
	"encoding/json"
	"time"
)

// The kinds of step a task records (durable execution, see package
// worker's Step, Sleep and WaitSignal).
const (
	StepRun    = "run"    // a function's result or permanent error
	StepSleep  = "sleep"  // a durable sleep until Until
	StepWait   = "wait"   // waiting for signal Signal until Until
	StepSignal = "signal" // the wait for Signal consumed: its payload, or TimedOut
)

// Step is one recorded step of a task.
type Step struct {
	Seq  int    `json:"seq"`
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Type is the Go type (or the handler's declared type) of a run
	// step's result: replaying it as another type is non-determinism.
	Type string `json:"-"`
	// Result is the step's JSON result (run), or the consumed signal's
	// payload; ResultRef names it in the blob store when it is larger
	// than the inline limit (3 KiB). ResultSize is its length either way.
	Result     json.RawMessage `json:"-"`
	ResultRef  string          `json:"-"`
	ResultSize int             `json:"result_size"`
	// Error is a run step's permanent error, replayed as one.
	Error string `json:"error,omitempty"`
	// Until is when a sleep ends or a wait times out.
	Until    *time.Time `json:"until,omitempty"`
	Signal   string     `json:"signal,omitempty"`
	TimedOut bool       `json:"timed_out,omitempty"`
	Attempt  int        `json:"attempt"`
	At       time.Time  `json:"at"`
	// DurationMS is how long a run step's function ran.
	DurationMS int64 `json:"duration_ms"`
}

// Outcome names what the step came to, for the API and the dashboard:
// ok, error, sleeping, waiting, signalled or timed_out.
func (s Step) Outcome() string {
	switch {
	case s.Kind == StepRun && s.Error != "":
		return "error"
	case s.Kind == StepRun:
		return "ok"
	case s.Kind == StepSleep:
		return "slept"
	case s.Kind == StepWait:
		return "waiting"
	case s.TimedOut:
		return "timed_out"
	}
	return "signalled"
}

// MarshalJSON adds the outcome to the API's step object.
func (s Step) MarshalJSON() ([]byte, error) {
	type plain Step
	return json.Marshal(struct {
		plain
		Outcome string `json:"outcome"`
	}{plain(s), s.Outcome()})
}

// Signal is a signal delivered to a task: its JSON payload and when it
// arrived.
type Signal struct {
	Name    string          `json:"name"`
	Payload json.RawMessage `json:"payload"`
	At      time.Time       `json:"at"`
}

// Suspend says why a task that ended an attempt durably (a sleep or a
// signal wait) waits and until when; it is set while the task waits, in
// status retrying (its retry_at is WakeAt), and cleared by the claim that
// resumes it.
type Suspend struct {
	Kind   string    `json:"kind"` // StepSleep or StepWait
	Signal string    `json:"signal,omitempty"`
	WakeAt time.Time `json:"wake_at"`
}
