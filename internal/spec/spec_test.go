package spec

import (
	"testing"

	"github.com/triagehq/triage/triagetype"
)

func TestNewCoversEveryPriority(t *testing.T) {
	s := New("acme")
	if s.Table.Name != "acme-tasks" {
		t.Fatalf("table name = %q", s.Table.Name)
	}
	seen := map[string]bool{}
	for _, p := range triagetype.Priorities() {
		q, ok := s.Queue(p)
		if !ok {
			t.Fatalf("no queue for %s", p)
		}
		if q.DLQName == q.Name || q.MaxReceiveCount < 1 {
			t.Errorf("queue %s: dlq %q, maxReceiveCount %d", q.Name, q.DLQName, q.MaxReceiveCount)
		}
		for _, n := range []string{q.Name, q.DLQName} {
			if seen[n] {
				t.Errorf("queue name %q used twice", n)
			}
			seen[n] = true
		}
	}
	if len(s.Table.Indexes) != 3 || s.Table.TTLAttribute != AttrTTL || s.Table.Stream != StreamNewAndOldImages {
		t.Errorf("table = %+v", s.Table)
	}
}

func TestNewDefaultsPrefix(t *testing.T) {
	if got := New("").Table.Name; got != "triage-tasks" {
		t.Fatalf("default table = %q", got)
	}
}
