package auth

import (
	"errors"
	"testing"
)

func TestCheck(t *testing.T) {
	toks, err := Parse("adm,sub:submit,ro:read,both:submit+read")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		header string
		need   Scope
		want   error
	}{
		{"Bearer adm", Admin, nil},
		{"Bearer adm", Submit, nil},
		{"Bearer sub", Submit, nil},
		{"Bearer sub", Read, ErrForbidden},
		{"Bearer ro", Read, nil},
		{"Bearer ro", Admin, ErrForbidden},
		{"Bearer both", Read, nil},
		{"Bearer nope", Read, ErrUnauthenticated},
		{"adm", Read, ErrUnauthenticated},
		{"", Read, ErrUnauthenticated},
		{"Bearer ", Read, ErrUnauthenticated},
	}
	for _, tt := range tests {
		err := toks.Check(tt.header, tt.need)
		if (tt.want == nil) != (err == nil) || (tt.want != nil && !errors.Is(err, tt.want)) {
			t.Errorf("Check(%q, %s) = %v, want %v", tt.header, tt.need, err, tt.want)
		}
	}
}

func TestParseRejectsUnknownScope(t *testing.T) {
	if _, err := Parse("x:write"); err == nil {
		t.Fatal("Parse accepted scope write")
	}
}
