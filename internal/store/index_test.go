package store

import (
	"testing"
	"time"
)

// The sweep of the waiting partitions reads the creation time from both
// sort keys they hold, and skips what it cannot parse.
func TestWaitingCreated(t *testing.T) {
	at := time.Date(2026, 11, 28, 3, 0, 0, 123, time.UTC)
	for _, c := range []struct {
		sk     string
		id     string
		parsed bool
	}{
		{sortKey(at, "01CHILD"), "01CHILD", true},                            // no edge parent; the layout before edge keys
		{edgePrefixOf("01PARENT") + sortKey(at, "01CHILD"), "01CHILD", true}, // an edge key
		{"01PARENT#01CHILD", "", false},
		{"garbage", "", false},
	} {
		got, id, ok := waitingCreated(c.sk)
		if ok != c.parsed || ok && (!got.Equal(at) || id != c.id) {
			t.Errorf("waitingCreated(%q) = %v, %q, %v; want %v, %q, %v", c.sk, got, id, ok, at, c.id, c.parsed)
		}
	}
}
