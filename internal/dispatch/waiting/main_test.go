// Package waiting_test proves, on the emulators, how the consumer makes
// tasks wait: set aside while their type or key is paused or at a limit and
// released in submit order, keyed concurrency and rate limits held across
// two consumers, a handler's Retry-After holding its whole key, and fair
// windows that keep one key's flood from burying another's. The tests sit
// apart from package dispatch's own so that the two run side by side within
// the suite's per-package timeout.
package waiting_test

import (
	"testing"

	"github.com/triagehq/triage/internal/emulators/stacktest"
)

func TestMain(m *testing.M) { stacktest.Main(m) }
