package emulators

import (
	"context"
	"errors"
	"os/exec"
	"testing"
)

// launch tells a process that lost its port (Java's BindException) from
// one that failed otherwise: Start tries another port only for the first.
func TestLaunchTellsATakenPort(t *testing.T) {
	cases := []struct {
		name   string
		stderr string
		want   error
		not    error
	}{
		{"bind", "java.io.IOException: Failed to bind to /127.0.0.1:40993\nCaused by: java.net.BindException: Address already in use", errPortTaken, nil},
		{"other", "Error: could not find or load main class DynamoDBLoopback", errExited, errPortTaken},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := &Emulators{}
			defer e.Stop()
			cmd := exec.Command("sh", "-c", `printf '%s\n' "$1" >&2; exit 1`, "sh", c.stderr)
			_, err := e.launch(context.Background(), cmd, "LISTENING")
			if !errors.Is(err, c.want) {
				t.Fatalf("launch: %v, want %v", err, c.want)
			}
			if c.not != nil && errors.Is(err, c.not) {
				t.Fatalf("launch: %v, is %v too", err, c.not)
			}
		})
	}
}
