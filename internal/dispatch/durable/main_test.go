// Package durable_test proves durable execution on the emulators: steps
// that run once across SIGKILLed consumers, sleeps that hold no slot,
// signal waits woken by a signal, by an early signal or by their timeout,
// and non-determinism reported. The handlers run in a worker.Worker's own
// consumer; the crash test's victims are this test binary, re-executed.
package durable_test

import (
	"os"
	"testing"

	"github.com/triagehq/triage/internal/emulators/stacktest"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		runChild() // a crash test victim
		return
	}
	stacktest.Main(m)
}
