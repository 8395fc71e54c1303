package task

import (
	"strings"
	"testing"

	"github.com/triagehq/triage/triagetype"
)

func TestKnownTypes(t *testing.T) {
	tests := []struct {
		types []string
		typ   string
		ok    bool
	}{
		{nil, "anything", true},
		{[]string{"echo", "fail"}, "echo", true},
		{[]string{"echo", "fail"}, "resize", false},
	}
	for _, tt := range tests {
		fe := NewKnownTypes(tt.types).Check(tt.typ)
		if (fe == nil) != tt.ok {
			t.Errorf("%v.Check(%q) = %v, want ok %v", tt.types, tt.typ, fe, tt.ok)
		}
		if fe != nil && (fe.Field != "type" || !strings.Contains(fe.Message, "echo, fail")) {
			t.Errorf("error %+v does not name the field and the known types", fe)
		}
	}
}

func TestFieldErrorAPIError(t *testing.T) {
	tests := []struct {
		fe     FieldError
		prefix string
		status int
		code   string
		field  string
	}{
		{FieldError{Field: "priority", Message: "bad"}, "", 400, triagetype.CodeInvalidField, "priority"},
		{FieldError{Field: "payload", Message: "big", TooLarge: true}, "tasks[2].", 413, "too_large", "tasks[2].payload"},
	}
	for _, tt := range tests {
		e := tt.fe.APIError(tt.prefix)
		if e.Status != tt.status || e.Code != tt.code || e.Field != tt.field || e.Message != tt.fe.Error() {
			t.Errorf("APIError(%+v) = %+v", tt.fe, e)
		}
	}
}
