package devserver_test

import (
	"testing"

	"github.com/triagehq/triage/internal/devserver/devtest"
)

// startDev runs `triage dev` in process with vars over the process
// environment and returns its base URL once it is ready; it is stopped
// (and must stop within 30 s) when the test ends.
func startDev(t *testing.T, vars map[string]string) string {
	t.Helper()
	return devtest.Start(t, vars)
}

// apiCall sends an API request to the dev server at base with the test's
// admin token and returns the status and the decoded JSON body.
func apiCall(t *testing.T, base, method, path, body string) (int, map[string]any) {
	t.Helper()
	var out map[string]any
	code := devtest.Call(t, base, "dev-test", method, path, body, &out)
	return code, out
}
