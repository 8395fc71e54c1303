package main

import (
	"errors"
	"testing"

	"github.com/triagehq/triage/internal/devserver"
)

// Values are quoted only when a shell would split or expand them.
func TestShellQuote(t *testing.T) {
	tests := []struct{ in, want string }{
		{"http://127.0.0.1:4566", "http://127.0.0.1:4566"},
		{"us-east-1", "us-east-1"},
		{"", "''"},
		{"a b", "'a b'"},
		{"it's $HOME", `'it'\''s $HOME'`},
	}
	for _, tt := range tests {
		if got := shellQuote(tt.in); got != tt.want {
			t.Errorf("shellQuote(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// triage env takes the server --url (or TRIAGE_URL) names, else the one
// running; none, or an unknown URL, is errNoDevServer; several and none
// chosen is the usage error naming them.
func TestDevServerFor(t *testing.T) {
	a := devserver.Server{Path: "/s/a.env", URL: "http://127.0.0.1:1"}
	b := devserver.Server{Path: "/s/b.env", URL: "http://127.0.0.1:2"}
	tests := []struct {
		name      string
		url       string
		all       []devserver.Server
		wantPath  string
		wantNoDev bool
		wantUsage bool
	}{
		{name: "the one running", all: []devserver.Server{a}, wantPath: a.Path},
		{name: "the one named", url: "http://127.0.0.1:2/", all: []devserver.Server{a, b}, wantPath: b.Path},
		{name: "none running", wantNoDev: true},
		{name: "named but not running", url: "http://127.0.0.1:3", all: []devserver.Server{a}, wantNoDev: true},
		{name: "several, none named", all: []devserver.Server{a, b}, wantUsage: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("TRIAGE_URL", "")
			s, err := devServerFor(tt.url, tt.all)
			var ue usageError
			switch {
			case tt.wantNoDev && !errors.Is(err, errNoDevServer), tt.wantUsage && !errors.As(err, &ue):
				t.Fatalf("err = %v", err)
			case tt.wantPath != "" && (err != nil || s.Path != tt.wantPath):
				t.Fatalf("devServerFor = %+v, %v; want %s", s, err, tt.wantPath)
			}
		})
	}
}
