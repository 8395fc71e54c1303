// Package outcomes_test proves, on the emulators, that package workertest
// and the real consumer read an attempt alike: the same handlers, run once
// through workertest and once by a worker.Worker's consumer on fauxqs and
// DynamoDB Local, end the same way (completed, retried, snoozed, held by a
// Retry-After of each scope, cancelled, dead-lettered) with the same
// message. Both ask internal/execution.Decide; this holds them to it.
package outcomes_test

import (
	"testing"

	"github.com/triagehq/triage/internal/emulators/stacktest"
)

func TestMain(m *testing.M) { stacktest.Main(m) }
