package dispatch_test

import (
	"testing"
	"time"

	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/triageconfig"
	"github.com/triagehq/triage/triagetype"
)

// OptionsFrom is the consumer's one projection of the configuration, and
// Over lays a caller's few choices on it.
func TestOptionsFromAndOver(t *testing.T) {
	cfg := triageconfig.Config{Concurrency: 6, ReservedHigh: 2, Lease: 9 * time.Second, UnhandledAfter: time.Minute,
		Weights: map[triagetype.Priority]int{triagetype.High: 9}, APIURL: "https://api.example.com", Strict: true}
	base := dispatch.OptionsFrom(cfg)
	want := cfg.WithDefaults()
	if base.Concurrency != 6 || base.ReservedHigh != 2 || base.Lease != 9*time.Second || base.UnhandledAfter != time.Minute ||
		base.Weights[triagetype.High] != 9 || base.Weights[triagetype.Low] != want.Weights[triagetype.Low] ||
		base.APIURL != cfg.APIURL || base.Strict == nil || !*base.Strict || base.PollWait != want.PollWait ||
		base.Backoff[triagetype.Low] != want.RetryBackoff[triagetype.Low] {
		t.Errorf("OptionsFrom(%+v) = %+v", cfg, base)
	}
	if base.MaxReceiveCount <= 0 || base.EmptyBackoff <= 0 || base.DrainTimeout <= 0 || base.OrphanAfter <= 0 {
		t.Errorf("the consumer's own settings lack their defaults: %+v", base)
	}
	if off := dispatch.OptionsFrom(triageconfig.Config{ReservedHigh: triageconfig.Off}); off.ReservedHigh != 0 {
		t.Errorf("ReservedHigh Off projects to %d, want 0", off.ReservedHigh)
	}

	for _, tt := range []struct {
		name           string
		over           dispatch.Options
		conc, reserved int
		poll           time.Duration
	}{
		{"nothing set: the base", dispatch.Options{}, 6, 2, base.PollWait},
		{"one setting", dispatch.Options{PollWait: time.Second}, 6, 2, time.Second},
		{"Concurrency alone reserves none", dispatch.Options{Concurrency: 3}, 3, 0, base.PollWait},
		{"Concurrency with ReservedHigh", dispatch.Options{Concurrency: 3, ReservedHigh: 1}, 3, 1, base.PollWait},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.over.Over(base)
			if got.Concurrency != tt.conc || got.ReservedHigh != tt.reserved || got.PollWait != tt.poll || got.Lease != base.Lease || got.Strict != base.Strict {
				t.Errorf("Over = %+v", got)
			}
		})
	}
}
