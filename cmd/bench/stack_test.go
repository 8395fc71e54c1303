package main

import (
	"context"
	"os"
	"testing"

	"github.com/triagehq/triage/internal/emulators"
)

// testStack starts fresh emulators for one bench group run as a test and
// returns counted clients on them; the emulators stop when the test ends.
func testStack(t *testing.T, ctx context.Context) (clients, *counter) {
	t.Helper()
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1"} {
		if os.Getenv(k) == "" {
			t.Setenv(k, v)
		}
	}
	root, err := emulators.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	emu, err := startEmulators(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emu.Stop)
	cnt := newCounter(specIndexes())
	cfg, err := loadAWS(ctx, cnt)
	if err != nil {
		t.Fatal(err)
	}
	cl := newClients(cfg)
	cl.cnt = cnt
	return cl, cnt
}
