package task

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// A key follows the type's rules, is optional, and its error names "key".
func TestValidateKey(t *testing.T) {
	for _, c := range []struct {
		name, key string
		ok        bool
	}{
		{"absent", "", true},
		{"tenant id", "tenant-42", true},
		{"utf-8", "Zürich Bäckerei", true},
		{"longest", strings.Repeat("k", MaxTypeLength), true},
		{"too long", strings.Repeat("k", MaxTypeLength+1), false},
		{"blank", "   ", false},
		{"hash", "a#b", false},
		{"nul", "a\x00b", false},
		{"newline", "a\nb", false},
		{"invalid utf-8", "a\xffb", false},
		{"replacement char", "a\uFFFDb", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Request{Type: "echo", Key: c.key}
			err := r.Validate()
			if c.ok != (err == nil) {
				t.Fatalf("Validate(key %q) = %v, want ok %v", c.key, err, c.ok)
			}
			var fe *FieldError
			if err != nil && (!errors.As(err, &fe) || fe.Field != "key") {
				t.Fatalf("error %v does not name key", err)
			}
			if c.ok {
				tk := r.NewTask(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), 0)
				if tk.Key != c.key {
					t.Fatalf("task key %q, want %q", tk.Key, c.key)
				}
				want := c.key
				if want == "" {
					want = DefaultKey
				}
				if tk.FairKey() != want || tk.Public().Key != c.key {
					t.Fatalf("FairKey %q / public key %q, want %q / %q", tk.FairKey(), tk.Public().Key, want, c.key)
				}
			}
		})
	}
}
