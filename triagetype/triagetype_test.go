package triagetype_test

import (
	"errors"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/triagehq/triage/triagetype"
)

// TestStandardLibraryOnly holds the package's invariant: anything may
// import it, internal/task included, without a cycle or a heavy
// dependency.
func TestStandardLibraryOnly(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if first, _, _ := strings.Cut(path, "/"); strings.Contains(first, ".") {
				t.Errorf("%s imports %s", name, path)
			}
		}
	}
}

func TestBatchResult(t *testing.T) {
	tests := []struct {
		r       triagetype.BatchResult
		created bool
		is      error
		field   string
	}{
		{triagetype.BatchResult{Status: 201, Task: &triagetype.Task{}}, true, nil, ""},
		{triagetype.BatchResult{Status: 200, Task: &triagetype.Task{}}, false, nil, ""},
		{triagetype.BatchResult{Status: 400, Error: &triagetype.ErrorDetail{Code: triagetype.CodeInvalidField, Message: "m", Field: "tasks[0].type"}}, false, triagetype.ErrBadRequest, "tasks[0].type"},
		{triagetype.BatchResult{Status: 429, Error: &triagetype.ErrorDetail{Code: triagetype.CodeTooMany, Message: "m"}}, false, triagetype.ErrTooMany, ""},
		{triagetype.BatchResult{Status: 503}, false, triagetype.ErrUnavailable, ""},
	}
	for _, tt := range tests {
		err := tt.r.Err()
		if tt.r.Created() != tt.created || (tt.is == nil) != (err == nil) || (tt.is != nil && !errors.Is(err, tt.is)) {
			t.Errorf("%+v: Created %v, Err %v", tt.r, tt.r.Created(), err)
		}
		var e *triagetype.Error
		if err != nil && (!errors.As(err, &e) || e.Field != tt.field || e.Status != tt.r.Status) {
			t.Errorf("%+v: Err = %#v", tt.r, err)
		}
	}
}

func TestPriorityAndStatus(t *testing.T) {
	for i, p := range triagetype.Priorities() {
		if got, err := triagetype.ParsePriority(string(p)); err != nil || got != p || p.Rank() != i {
			t.Errorf("%s: parse %v %v, rank %d", p, got, err, p.Rank())
		}
	}
	if _, err := triagetype.ParsePriority("urgent"); err == nil || !strings.Contains(err.Error(), "high, medium or low") {
		t.Errorf("ParsePriority(urgent) = %v", err)
	}
	for _, s := range triagetype.Statuses() {
		if got, err := triagetype.ParseStatus(string(s)); err != nil || got != s {
			t.Errorf("%s: parse %v %v", s, got, err)
		}
		if s.Terminal() && s.Claimable() {
			t.Errorf("%s is terminal and claimable", s)
		}
	}
}
