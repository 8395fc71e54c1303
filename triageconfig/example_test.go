package triageconfig_test

import (
	"errors"
	"fmt"

	"github.com/triagehq/triage/triageconfig"
	"github.com/triagehq/triage/triagetype"
)

// A configuration from code: unset fields take their defaults, and
// Validate names the field (and its variable) that breaks a rule.
func ExampleConfig() {
	cfg := triageconfig.Config{Prefix: "acme", Concurrency: 4, ReservedHigh: triageconfig.Off}.WithDefaults()
	fmt.Println(cfg.Table, cfg.Lease, cfg.Weights[triagetype.High], cfg.Validate())

	cfg.ReservedHigh = 4
	err := cfg.Validate()
	var fe *triageconfig.Error
	fmt.Println(errors.As(err, &fe), fe.Field)
	fmt.Println(err)
	// Output:
	// acme-tasks 30s 6 <nil>
	// true ReservedHigh
	// ReservedHigh (TRIAGE_RESERVED_HIGH): must be less than Concurrency (4), got 4
}
