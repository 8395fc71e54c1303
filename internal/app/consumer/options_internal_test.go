package consumer

import (
	"testing"

	"github.com/triagehq/triage/triageconfig"

	"github.com/triagehq/triage/internal/dispatch"
)

// A consumer's Options.Strict, when set, wins over TRIAGE_STRICT either way;
// unset, the configuration decides.
func TestConsumerStrictMode(t *testing.T) {
	tests := []struct {
		name string
		cfg  bool  // TRIAGE_STRICT
		opt  *bool // dispatch.Options.Strict
		want bool
	}{
		{"unset, config off", false, nil, false},
		{"unset, config on", true, nil, true},
		{"on, config off", false, new(true), true},
		{"off, config on", true, new(false), false},
		{"off, config off", false, new(false), false},
		{"on, config on", true, new(true), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := dispatch.Options{Strict: tt.opt}.Over(dispatch.OptionsFrom(triageconfig.Config{Strict: tt.cfg})).Strict
			if got == nil || *got != tt.want {
				t.Fatalf("strict = %v, want %v", deref(got), tt.want)
			}
		})
	}
}

func deref(b *bool) any {
	if b == nil {
		return nil
	}
	return *b
}
