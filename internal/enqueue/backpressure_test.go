package enqueue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/enqueue"
	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/triagetype"
)

// TestBackpressure fills real queues and checks each priority against its
// limit: waiting messages (visible and delayed) count, the high limit
// applies to high only, and no limit means no refusal.
func TestBackpressure(t *testing.T) {
	env := stacktest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	q, err := queue.Resolve(ctx, env.SQS, env.Spec, env.QueueURLs, env.DLQURLs)
	if err != nil {
		t.Fatal(err)
	}
	send := func(p triagetype.Priority, n int, delay time.Duration) {
		for range n {
			if _, err := q.Send(ctx, p, `{}`, delay); err != nil {
				t.Fatal(err)
			}
		}
	}
	send(triagetype.Low, 1, 0)
	send(triagetype.Low, 1, time.Minute) // delayed messages are waiting too
	send(triagetype.High, 2, 0)
	tests := []struct {
		name             string
		limit, limitHigh int
		p                triagetype.Priority
		refused          bool
	}{
		{"at the limit", 2, 0, triagetype.Low, true},
		{"under the limit", 3, 0, triagetype.Low, false},
		{"empty queue", 1, 0, triagetype.Medium, false},
		{"high uses the high limit", 2, 3, triagetype.High, false},
		{"high over the high limit", 1, 2, triagetype.High, true},
		{"high without its own limit", 2, 0, triagetype.High, true},
		{"no limit", 0, 0, triagetype.Low, false},
		{"high with no limit of its own", 1, -1, triagetype.High, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := enqueue.NewBackpressure(q, tt.limit, tt.limitHigh, nil).Check(ctx, tt.p)
			if !tt.refused {
				if err != nil {
					t.Fatalf("Check = %v, want nil", err)
				}
				return
			}
			var oe *enqueue.OverloadedError
			if !errors.Is(err, enqueue.ErrOverloaded) || !errors.As(err, &oe) || oe.Priority != tt.p || oe.RetryAfter != enqueue.OverloadBackoff {
				t.Fatalf("Check = %v, want an OverloadedError for %s", err, tt.p)
			}
		})
	}
}

type failingDepths struct{ calls int }

func (f *failingDepths) Depth(context.Context, triagetype.Priority) (queue.Depth, error) {
	f.calls++
	return queue.Depth{}, errors.New("throttled")
}

// A depth that cannot be read admits the task, and is read again next time.
func TestBackpressureAdmitsWhenBlind(t *testing.T) {
	d := &failingDepths{}
	b := enqueue.NewBackpressure(d, 1, 0, nil)
	for range 2 {
		if err := b.Check(context.Background(), triagetype.Low); err != nil {
			t.Fatalf("Check = %v, want nil", err)
		}
	}
	if d.calls != 2 {
		t.Fatalf("%d depth reads, want 2 (a failure is not cached)", d.calls)
	}
}
