package blob

import (
	"strings"
	"testing"
)

func TestKeys(t *testing.T) {
	id := "01J0ABCDEFGHJKMNPQRSTVWXYZ"
	for _, c := range []struct {
		name, key, suffix string
	}{
		{"payload", PayloadKey(id), "/" + id + "/payload"},
		{"result", ResultKey(id, 7), "/" + id + "/result-7"},
	} {
		t.Run(c.name, func(t *testing.T) {
			// t/<two hex digits>/<id>/...: under the t/ prefix the CDK grants on.
			if !strings.HasPrefix(c.key, "t/") || len(c.key) != len("t/00")+len(c.suffix) || !strings.HasSuffix(c.key, c.suffix) {
				t.Fatalf("key %q, want t/<hh>%s", c.key, c.suffix)
			}
		})
	}
	if ResultKey(id, 7) == ResultKey(id, 8) {
		t.Fatal("two claims share a result key")
	}
	// The hash prefix spreads ids that share a time prefix.
	seen := map[string]bool{}
	for _, suffix := range []string{"A", "B", "C", "D", "E", "F", "G", "H"} {
		seen[PayloadKey(id[:25] + suffix)[:5]] = true
	}
	if len(seen) < 4 {
		t.Fatalf("8 neighbouring ids share %d prefixes", len(seen))
	}
}
