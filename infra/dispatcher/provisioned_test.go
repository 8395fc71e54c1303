package dispatcher_test

import (
	"path/filepath"
	"testing"

	"github.com/triagehq/triage/infra/dispatcher"
	"github.com/triagehq/triage/internal/spec"
)

// TestProvisionedCapacity: with Props.Provisioned the table and each of
// its indexes get provisioned read and write units at the minimum, and
// one scalable target per dimension (table and every index, read and
// write) between the bounds, each tracking the target utilisation. The
// default stack stays on demand, with no scaling.
func TestProvisionedCapacity(t *testing.T) {
	def := stackUnderTest(t)
	for _, tbl := range def.ofType("AWS::DynamoDB::Table") {
		if tbl.Properties["BillingMode"] != "PAY_PER_REQUEST" {
			t.Errorf("default table billing mode %v, want PAY_PER_REQUEST", tbl.Properties["BillingMode"])
		}
	}
	if n := len(def.ofType("AWS::ApplicationAutoScaling::ScalableTarget")); n != 0 {
		t.Errorf("default stack has %d scalable targets, want none", n)
	}

	f, err := synth(filepath.Join(t.TempDir(), "provisioned"), false, &dispatcher.Props{
		Provisioned: &dispatcher.ProvisionedProps{MinRead: 2, MaxRead: 50, MaxWrite: 400},
	})
	if err != nil {
		t.Fatal(err)
	}
	tables := f.ofType("AWS::DynamoDB::Table")
	if len(tables) != 1 {
		t.Fatalf("%d tables", len(tables))
	}
	indexes := len(spec.New("").Table.Indexes)
	for _, tbl := range tables {
		if m := tbl.Properties["BillingMode"]; m != nil && m != "PROVISIONED" {
			t.Errorf("billing mode %v, want PROVISIONED", m)
		}
		equalJSON(t, "table throughput", tbl.Properties["ProvisionedThroughput"], map[string]any{"ReadCapacityUnits": 2, "WriteCapacityUnits": 5})
		gsis, _ := tbl.Properties["GlobalSecondaryIndexes"].([]any)
		if len(gsis) != indexes {
			t.Fatalf("%d indexes, want %d", len(gsis), indexes)
		}
		for _, g := range gsis {
			gm := g.(map[string]any)
			equalJSON(t, "index "+gm["IndexName"].(string)+" throughput", gm["ProvisionedThroughput"], map[string]any{"ReadCapacityUnits": 2, "WriteCapacityUnits": 5})
		}
	}
	targets := f.ofType("AWS::ApplicationAutoScaling::ScalableTarget")
	if want := 2 * (1 + indexes); len(targets) != want {
		t.Fatalf("%d scalable targets, want %d (read and write, table and every index)", len(targets), want)
	}
	dims := map[string]int{}
	for _, s := range targets {
		dim, _ := s.Properties["ScalableDimension"].(string)
		dims[dim]++
		lo, hi := s.Properties["MinCapacity"], s.Properties["MaxCapacity"]
		switch dim {
		case "dynamodb:table:ReadCapacityUnits", "dynamodb:index:ReadCapacityUnits":
			equalJSON(t, dim+" bounds", []any{lo, hi}, []any{2, 50})
		case "dynamodb:table:WriteCapacityUnits", "dynamodb:index:WriteCapacityUnits":
			equalJSON(t, dim+" bounds", []any{lo, hi}, []any{5, 400})
		default:
			t.Errorf("scalable dimension %q", dim)
		}
	}
	if dims["dynamodb:table:ReadCapacityUnits"] != 1 || dims["dynamodb:table:WriteCapacityUnits"] != 1 ||
		dims["dynamodb:index:ReadCapacityUnits"] != indexes || dims["dynamodb:index:WriteCapacityUnits"] != indexes {
		t.Errorf("scalable dimensions %v", dims)
	}
	policies := f.ofType("AWS::ApplicationAutoScaling::ScalingPolicy")
	if len(policies) != len(targets) {
		t.Fatalf("%d scaling policies for %d targets", len(policies), len(targets))
	}
	for id, p := range policies {
		cfg, _ := p.Properties["TargetTrackingScalingPolicyConfiguration"].(map[string]any)
		if cfg == nil || cfg["TargetValue"] != float64(70) {
			t.Errorf("scaling policy %s: %v, want target tracking at 70", id, p.Properties)
		}
	}
}
