package queue_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/triagetype"
)

func TestGroupID(t *testing.T) {
	for _, c := range []struct{ key, want string }{
		{"tenant-42", "tenant-42"},
		{"a!b~c", "a!b~c"},
		{strings.Repeat("k", 128), strings.Repeat("k", 128)},
	} {
		if got := queue.GroupID(c.key); got != c.want {
			t.Errorf("GroupID(%q) = %q, want %q", c.key, got, c.want)
		}
	}
	// Keys SQS would refuse as a group id get a stable hash of their own.
	for _, k := range []string{"with space", "Zürich", strings.Repeat("k", 129), ""} {
		g := queue.GroupID(k)
		if !strings.HasPrefix(g, "h-") || len(g) != 42 || g != queue.GroupID(k) {
			t.Errorf("GroupID(%q) = %q, want a stable h-<40 hex>", k, g)
		}
	}
	if queue.GroupID("Zürich") == queue.GroupID("Zurich ") {
		t.Error("two keys share a hashed group id")
	}
}

// The emulator takes a MessageGroupId on each standard queue (SQS fair
// queues), so triage sends it everywhere, not behind an option.
func TestStandardQueuesTakeMessageGroupID(t *testing.T) {
	_, q := newQueues(t)
	for _, p := range triagetype.Priorities() {
		msgs := []queue.Outgoing{
			{ID: "0", Body: `{"n":0}`, Group: "tenant-a"},
			{ID: "1", Body: `{"n":1}`, Group: "Zürich"},
		}
		if err := q.SendBatch(context.Background(), p, msgs); err != nil {
			t.Fatalf("SendBatch(%s) with group ids: %v", p, err)
		}
		got := receiveAll(t, q, p, 2, 30*time.Second)
		if len(got) != 2 {
			t.Fatalf("%s: received %d, want 2", p, len(got))
		}
	}
}
