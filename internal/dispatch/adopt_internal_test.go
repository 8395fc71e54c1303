package dispatch

import (
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/triagehq/triage/internal/queue"
)

// A direct send's task id is the same on every receive of the message,
// different for every other message, and a valid ULID of its send time.
func TestAdoptedID(t *testing.T) {
	sent := time.UnixMilli(1_790_000_000_123)
	a := adoptedID(queue.Received{MessageID: "m-1", SentAt: sent, ReceiveCount: 1})
	again := adoptedID(queue.Received{MessageID: "m-1", SentAt: sent, ReceiveCount: 4})
	other := adoptedID(queue.Received{MessageID: "m-2", SentAt: sent})
	if a != again {
		t.Fatalf("redelivery derived %s, first receive %s", again, a)
	}
	if a == other {
		t.Fatal("two messages derived one id")
	}
	if AdoptedIDSuffix("m-1") != a[10:] || AdoptedIDSuffix("m-2") == a[10:] {
		t.Fatalf("AdoptedIDSuffix does not name the id's message part")
	}
	id, err := ulid.ParseStrict(a)
	if err != nil {
		t.Fatal(err)
	}
	if got := ulid.Time(id.Time()); !got.Equal(sent) {
		t.Fatalf("id time %v, want the send time %v", got, sent)
	}
}
