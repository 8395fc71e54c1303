package direct_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/triagehq/triage"
)

// TestSameSchedules runs the schedule calls through both transports: the
// same answers, errors (status, code, field) included, and each sees what
// the other wrote.
func TestSameSchedules(t *testing.T) {
	d := newDeployment(t, nil)
	for _, nc := range d.both() {
		t.Run(nc.name, func(t *testing.T) {
			c := ctx(t)
			name := "s-" + nc.name
			sc, created, err := nc.c.PutSchedule(c, triage.Schedule{Name: name, Cron: "30 2 * * *", Timezone: "America/New_York", Task: triage.SubmitRequest{Type: "cleanup"}})
			if err != nil || !created || sc.NextTick == nil || sc.Missed != "skip" {
				t.Fatalf("create: %+v %v %v", sc, created, err)
			}
			if _, created, err := nc.c.PutSchedule(c, *sc); err != nil || created {
				t.Fatalf("replace: created %v, %v", created, err)
			}
			seen, err := nc.other.GetSchedule(c, name)
			if err != nil || !seen.NextTick.Equal(*sc.NextTick) {
				t.Fatalf("the other transport reads %+v, %v", seen, err)
			}
			if p, err := nc.c.PauseSchedule(c, name); err != nil || !p.Paused || p.NextTick != nil {
				t.Fatalf("pause: %+v %v", p, err)
			}
			if p, err := nc.other.ResumeSchedule(c, name); err != nil || p.Paused || p.NextTick == nil {
				t.Fatalf("resume: %+v %v", p, err)
			}
			for _, tc := range []struct {
				s     triage.Schedule
				field string
			}{
				{triage.Schedule{Name: name, Cron: "0 0 30 2 *", Task: triage.SubmitRequest{Type: "a"}}, "cron"},
				{triage.Schedule{Name: name, Cron: "* * * * *", Timezone: "Nowhere/Land", Task: triage.SubmitRequest{Type: "a"}}, "timezone"},
				{triage.Schedule{Name: name, Cron: "* * * * *", Task: triage.SubmitRequest{Type: "a#b"}}, "task.type"},
			} {
				_, _, err := nc.c.PutSchedule(c, tc.s)
				if e := asError(t, err); e.Status != http.StatusBadRequest || e.Field != tc.field {
					t.Errorf("%+v: %d naming %q, want 400 naming %s", tc.s, e.Status, e.Field, tc.field)
				}
			}
			if err := nc.c.DeleteSchedule(c, name); err != nil {
				t.Fatal(err)
			}
			_, err = nc.c.GetSchedule(c, name)
			if e := asError(t, err); e.Status != http.StatusNotFound || !errors.Is(err, triage.ErrNotFound) {
				t.Fatalf("after delete: %v", err)
			}
		})
	}
	// Both list the same page.
	for _, n := range []string{"a", "b"} {
		if _, _, err := d.http.PutSchedule(ctx(t), triage.Schedule{Name: n, Cron: "0 * * * *", Task: triage.SubmitRequest{Type: "x"}}); err != nil {
			t.Fatal(err)
		}
	}
	hp, err1 := d.http.ListSchedules(ctx(t), 1, "")
	dp, err2 := d.direct.ListSchedules(ctx(t), 1, "")
	if err1 != nil || err2 != nil || len(hp.Schedules) != 1 || hp.Cursor != "a" {
		t.Fatalf("list: %+v %v / %v", hp, err1, err2)
	}
	sameJSON(t, "first pages", hp, dp)
}
