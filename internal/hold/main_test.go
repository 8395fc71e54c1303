package hold_test

import (
	"testing"

	"github.com/triagehq/triage/internal/emulators/stacktest"
)

func TestMain(m *testing.M) { stacktest.Main(m) }
