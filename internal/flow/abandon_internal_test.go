package flow

import (
	"testing"

	"github.com/triagehq/triage/internal/store"
)

// TestDeepestFirst: every node comes before each of its parents, so an
// abandoned workflow's parents are cancelled only after their children.
func TestDeepestFirst(t *testing.T) {
	for _, tc := range []struct {
		name string
		recs []store.WorkflowNodeRecord
	}{
		{"diamond", []store.WorkflowNodeRecord{{Name: "A"}, {Name: "B", After: []string{"A"}}, {Name: "C", After: []string{"A"}}, {Name: "D", After: []string{"B", "C"}}}},
		{"listed children first", []store.WorkflowNodeRecord{{Name: "D", After: []string{"B", "C"}}, {Name: "C", After: []string{"B"}}, {Name: "B", After: []string{"A"}}, {Name: "A"}}},
		{"a long and a short branch", []store.WorkflowNodeRecord{{Name: "r"}, {Name: "x", After: []string{"r"}}, {Name: "y", After: []string{"x"}}, {Name: "z", After: []string{"y", "r"}}, {Name: "s", After: []string{"r"}}}},
		{"a parent never listed", []store.WorkflowNodeRecord{{Name: "b", After: []string{"gone"}}, {Name: "c", After: []string{"b"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			order := deepestFirst(tc.recs)
			if len(order) != len(tc.recs) {
				t.Fatalf("order %v of %d nodes", order, len(tc.recs))
			}
			pos := map[string]int{}
			for k, i := range order {
				pos[tc.recs[i].Name] = k
			}
			for _, r := range tc.recs {
				for _, p := range r.After {
					if k, ok := pos[p]; ok && k < pos[r.Name] {
						t.Errorf("parent %s (at %d) before its child %s (at %d): %v", p, k, r.Name, pos[r.Name], order)
					}
				}
			}
		})
	}
}
