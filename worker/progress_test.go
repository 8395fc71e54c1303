package worker

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/triagehq/triage/internal/handler"
)

// fakeReporter records what reaches the dispatcher's reporter.
type fakeReporter struct {
	percents    []int
	checkpoints []string
}

func (f *fakeReporter) Progress(_ context.Context, p int, _ string) error {
	f.percents = append(f.percents, p)
	return nil
}

func (f *fakeReporter) Checkpoint(_ context.Context, data json.RawMessage) error {
	f.checkpoints = append(f.checkpoints, string(data))
	return nil
}

func TestTaskProgressAndCheckpoint(t *testing.T) {
	type state struct{ Row int }
	for _, tc := range []struct {
		name     string
		previous string // the checkpoint the attempt was given
		reporter bool
	}{
		{"first attempt", "", true},
		{"retry with a checkpoint", `{"Row":3}`, true},
		{"no reporter (a unit test's Task)", `{"Row":3}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := &fakeReporter{}
			r := handler.Request{ID: "t1", Checkpoint: json.RawMessage(tc.previous)}
			if tc.reporter {
				r.Reporter = rep
			}
			tk := taskOf(r)
			var s state
			had, err := tk.LastCheckpoint(&s)
			if err != nil || had != (tc.previous != "") || (had && s.Row != 3) {
				t.Fatalf("LastCheckpoint = %v, %v (%+v); want %v", had, err, s, tc.previous != "")
			}
			if err := tk.Progress(context.Background(), 40, "rows"); err != nil {
				t.Fatalf("Progress(40) = %v", err)
			}
			if err := tk.Progress(context.Background(), 140, ""); err == nil {
				t.Error("Progress(140) was accepted")
			}
			if err := tk.Checkpoint(context.Background(), state{Row: 9}); err != nil {
				t.Fatalf("Checkpoint = %v", err)
			}
			if had, err := tk.LastCheckpoint(&s); !had || err != nil || s.Row != 9 {
				t.Errorf("after Checkpoint, LastCheckpoint = %v, %v (%+v); want Row 9", had, err, s)
			}
			if tc.reporter && (len(rep.percents) != 1 || rep.percents[0] != 40 || len(rep.checkpoints) != 1 || rep.checkpoints[0] != `{"Row":9}`) {
				t.Errorf("reporter got progress %v checkpoints %v; want [40] and [{\"Row\":9}]", rep.percents, rep.checkpoints)
			}
		})
	}
}
