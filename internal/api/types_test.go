package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/triagehq/triage/internal/api"
)

// A deployment that knows its task types (TRIAGE_TYPES; triage dev: its
// handlers) refuses a submit of another type at once, naming the field and
// the types it runs, instead of accepting it and dead-lettering it later.
func TestUnknownTypesRefusedWhenTypesAreKnown(t *testing.T) {
	f := newFix2(t, nil, api.Options{KnownTypes: []string{"echo", "resize"}})
	if code, body := f.do(t, "POST", "/api/v1/tasks", "sub", `{"type":"echo"}`); code != http.StatusCreated {
		t.Fatalf("known type: %d %v", code, body)
	}
	code, body := f.do(t, "POST", "/api/v1/tasks", "sub", `{"type":"ecoh"}`)
	e, _ := body["error"].(map[string]any)
	if code != http.StatusBadRequest || e["field"] != "type" || !strings.Contains(e["message"].(string), "echo, resize") {
		t.Fatalf("unknown type: %d %v", code, body)
	}
	code, body = f.do(t, "POST", "/api/v1/tasks/batch", "sub", `{"tasks":[{"type":"resize"},{"type":"ecoh"}]}`)
	results, _ := body["results"].([]any)
	if code != http.StatusOK || len(results) != 2 {
		t.Fatalf("batch: %d %v", code, body)
	}
	first, second := results[0].(map[string]any), results[1].(map[string]any)
	if first["status"] != 201.0 || second["status"] != 400.0 || second["error"].(map[string]any)["field"] != "tasks[1].type" {
		t.Fatalf("batch items: %v", results)
	}
}
