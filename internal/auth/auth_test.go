package auth

import (
	"errors"
	"net/http/httptest"
	"slices"
	"strings"
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

func TestCheckRequest(t *testing.T) {
	toks, err := Parse("adm,ro:read")
	if err != nil {
		t.Fatal(err)
	}
	const sigv4 = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261122/us-east-1/execute-api/aws4_request, SignedHeaders=host, Signature=abc"
	tests := []struct {
		name          string
		authorization string
		tokenHeader   string
		need          Scope
		want          error
	}{
		{"bearer", "Bearer adm", "", Admin, nil},
		{"token header beside SigV4", sigv4, "adm", Admin, nil},
		{"token header scope", sigv4, "ro", Admin, ErrForbidden},
		{"token header wins over bearer", "Bearer adm", "ro", Admin, ErrForbidden},
		{"unknown token header", "Bearer adm", "nope", Read, ErrUnauthenticated},
		{"SigV4 alone", sigv4, "", Read, ErrUnauthenticated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/api/v1/stats", nil)
			r.Header.Set("Authorization", tt.authorization)
			if tt.tokenHeader != "" {
				r.Header.Set(TokenHeader, tt.tokenHeader)
			}
			err := toks.CheckRequest(r, tt.need)
			if (tt.want == nil) != (err == nil) || (tt.want != nil && !errors.Is(err, tt.want)) {
				t.Errorf("CheckRequest = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestParseRejectsUnknownScope(t *testing.T) {
	if _, err := Parse("x:write"); err == nil {
		t.Fatal("Parse accepted scope write")
	}
}

func TestParseSecret(t *testing.T) {
	tests := []struct {
		secret string
		header string
		need   Scope
		want   error
	}{
		{"Ab3xYz0123456789", "Bearer Ab3xYz0123456789", Admin, nil},
		{"w:submit,r:read", "Bearer r", Read, nil},
		{"w:submit,r:read", "Bearer r", Submit, ErrForbidden},
		{`{"tokens":[{"token":"j1","scopes":["read"]},{"token":"j2"}]}`, "Bearer j1", Read, nil},
		{`{"tokens":[{"token":"j1","scopes":["read"]},{"token":"j2"}]}`, "Bearer j1", Admin, ErrForbidden},
		{`{"tokens":[{"token":"j1","scopes":["read"]},{"token":"j2"}]}`, "Bearer j2", Admin, nil},
	}
	for _, tt := range tests {
		toks, err := ParseSecret(tt.secret)
		if err != nil {
			t.Fatalf("ParseSecret(%q): %v", tt.secret, err)
		}
		if err := toks.Check(tt.header, tt.need); (tt.want == nil) != (err == nil) || (tt.want != nil && !errors.Is(err, tt.want)) {
			t.Errorf("%q: Check(%q, %s) = %v, want %v", tt.secret, tt.header, tt.need, err, tt.want)
		}
	}
	for _, bad := range []string{`{"tokens":[{"token":""}]}`, `{"tokens":[{"token":"a","scopes":["root"]}]}`, `{nope`} {
		if _, err := ParseSecret(bad); err == nil {
			t.Errorf("ParseSecret(%q) succeeded", bad)
		}
	}
}

func TestAddHash(t *testing.T) {
	tok, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, TokenPrefix) || len(tok) != len(TokenPrefix)+43 {
		t.Fatalf("NewToken() = %q, want %s and 43 base64url characters", tok, TokenPrefix)
	}
	if other, _ := NewToken(); other == tok {
		t.Fatal("two NewToken calls returned the same token")
	}
	toks := &Tokens{}
	if err := toks.AddHash(Hash(tok), Submit); err != nil {
		t.Fatal(err)
	}
	if err := toks.Check("Bearer "+tok, Submit); err != nil {
		t.Errorf("Check(token, submit) = %v", err)
	}
	if err := toks.Check("Bearer "+tok, Read); !errors.Is(err, ErrForbidden) {
		t.Errorf("Check(token, read) = %v, want ErrForbidden", err)
	}
	if err := toks.Check("Bearer "+Hash(tok), Submit); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("the hash itself was accepted as a token: %v", err)
	}
	for _, bad := range []string{"", "zz", Hash(tok)[:62]} {
		if err := toks.AddHash(bad); err == nil {
			t.Errorf("AddHash(%q) succeeded", bad)
		}
	}
}

func TestParseScopes(t *testing.T) {
	tests := []struct {
		in   string
		want []Scope
		ok   bool
	}{
		{"submit", []Scope{Submit}, true},
		{"submit, read,submit", []Scope{Submit, Read}, true},
		{"admin", []Scope{Admin}, true},
		{"", nil, false},
		{"write", nil, false},
	}
	for _, tt := range tests {
		got, err := ParseScopes(tt.in)
		if (err == nil) != tt.ok || !slices.Equal(got, tt.want) {
			t.Errorf("ParseScopes(%q) = %v, %v; want %v ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}
