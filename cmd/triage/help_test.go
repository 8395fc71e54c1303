package main

import (
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Every flag of every command shows a placeholder that names its value's
// kind, never words of its usage: pflag takes a backquoted word in a usage
// string as the placeholder, which made the help read "--url triage dev".
func TestHelpPlaceholders(t *testing.T) {
	_, root := newRoot(io.Discard, io.Discard)
	var walk func(cmd *cobra.Command)
	walk = func(cmd *cobra.Command) {
		check := func(f *pflag.Flag) {
			name, _ := pflag.UnquoteUsage(f)
			if strings.ContainsAny(name, " `") || strings.Contains(f.Usage, "`") {
				t.Errorf("%s --%s: placeholder %q from usage %q", cmd.CommandPath(), f.Name, name, f.Usage)
			}
		}
		cmd.LocalFlags().VisitAll(check)
		cmd.InheritedFlags().VisitAll(check)
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(root)

	// The help text as a user sees it.
	var out strings.Builder
	_, root = newRoot(&out, &out)
	root.SetArgs([]string{"get", "--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--url string", "--token string"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("triage get --help lacks %q:\n%s", want, out.String())
		}
	}
}
