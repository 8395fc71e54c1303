package consumerapp_test

import (
	"slices"
	"testing"

	"github.com/triagehq/triage/internal/app/consumerapp"
	"github.com/triagehq/triage/triageconfig"

	"github.com/triagehq/triage/internal/app"
)

// The consumer function registers the demo handlers only when
// TRIAGE_DEMO_HANDLERS is true.
func TestHandlersRegisterDemoOnlyWhenAsked(t *testing.T) {
	for _, tt := range []struct {
		env  string
		want []string
	}{
		{"", []string{}},
		{"false", []string{}},
		{"true", []string{"echo", "fail", "noop", "sleep"}},
	} {
		cfg, err := triageconfig.FromEnv(func(k string) string {
			if k == triageconfig.EnvDemoHandlers {
				return tt.env
			}
			return ""
		})
		if err != nil {
			t.Fatal(err)
		}
		reg, err := consumerapp.Handlers(&app.App{Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		got := reg.Types()
		slices.Sort(got)
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s=%q: handlers %v, want %v", triageconfig.EnvDemoHandlers, tt.env, got, tt.want)
		}
	}
}
