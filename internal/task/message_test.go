package task

import (
	"encoding/json"
	"testing"

	"github.com/triagehq/triage/triagetype"
)

// A task's message carries what a claim without a read decides on, and an
// older producer's message (id, version, priority alone) is not claimable
// from the message.
func TestMessageFor(t *testing.T) {
	tk := &Task{ID: "01A", Type: "email", Key: "acme", Priority: triagetype.Low, EffectivePriority: triagetype.Medium, TimeoutSeconds: 30}
	for _, c := range []struct {
		name      string
		body      string
		claimable bool
	}{
		{"triage's message", mustJSON(t, MessageFor(tk, 4)), true},
		{"without a key", mustJSON(t, MessageFor(&Task{ID: "01B", Type: "x", TimeoutSeconds: 5}, 1)), true},
		{"an older producer's", `{"id":"01A","v":4,"p":"medium"}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var m Message
			if err := json.Unmarshal([]byte(c.body), &m); err != nil {
				t.Fatal(err)
			}
			if m.Claimable() != c.claimable {
				t.Fatalf("%s: Claimable = %t, want %t", c.body, m.Claimable(), c.claimable)
			}
		})
	}
	m := MessageFor(tk, 4)
	if m.Priority != triagetype.Medium || m.Version != 4 {
		t.Fatalf("MessageFor = %+v: want the effective priority and the version given", m)
	}
	got := m.Task()
	if got.ID != tk.ID || got.Type != tk.Type || got.Key != tk.Key || got.TimeoutSeconds != tk.TimeoutSeconds || got.EffectivePriority != triagetype.Medium || got.FairKey() != "acme" {
		t.Fatalf("Message.Task = %+v", got)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
