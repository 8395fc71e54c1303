package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/task"
)

// ticks lists the expression's times in (from, to], in RFC 3339 with the
// zone's offset, so a table can say exactly which instants fire.
func ticks(t *testing.T, c *Cron, from, to time.Time) []string {
	t.Helper()
	var out []string
	for at := c.Next(from); !at.IsZero() && !at.After(to); at = c.Next(at) {
		out = append(out, at.In(c.Location()).Format(time.RFC3339))
		if len(out) > 500 {
			t.Fatal("too many ticks")
		}
	}
	return out
}

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// TestNextDST pins the DST semantics of the package doc with the
// transitions of Europe/Berlin (2026-03-29 02:00 CET -> 03:00 CEST,
// 2026-10-25 03:00 CEST -> 02:00 CET) and America/New_York (2026-03-08
// 02:00 EST -> 03:00 EDT, 2026-11-01 02:00 EDT -> 01:00 EST).
func TestNextDST(t *testing.T) {
	cases := []struct {
		name, zone, expr string
		gap              DSTGap
		from, to         string // local wall-clock times, in the zone
		want             []string
	}{
		{
			name: "Berlin daily 02:30 runs shifted to 03:30 CEST on the lost hour", zone: "Europe/Berlin", expr: "30 2 * * *",
			from: "2026-03-28T00:00", to: "2026-03-30T23:00",
			want: []string{"2026-03-28T02:30:00+01:00", "2026-03-29T03:30:00+02:00", "2026-03-30T02:30:00+02:00"},
		},
		{
			name: "Berlin daily 02:30 skipped on the lost hour when asked", zone: "Europe/Berlin", expr: "30 2 * * *", gap: DSTGapSkip,
			from: "2026-03-28T00:00", to: "2026-03-30T23:00",
			want: []string{"2026-03-28T02:30:00+01:00", "2026-03-30T02:30:00+02:00"},
		},
		{
			name: "Berlin daily 02:30 runs once in the repeated hour", zone: "Europe/Berlin", expr: "30 2 * * *",
			from: "2026-10-24T00:00", to: "2026-10-26T23:00",
			want: []string{"2026-10-24T02:30:00+02:00", "2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"},
		},
		{
			name: "Berlin 02:00 and 02:45 shifted, 03:00 not doubled by the shift", zone: "Europe/Berlin", expr: "0,45 2,3 * * *",
			from: "2026-03-29T00:00", to: "2026-03-29T05:00",
			want: []string{"2026-03-29T03:00:00+02:00", "2026-03-29T03:45:00+02:00"},
		},
		{
			name: "New York daily 02:30 runs at 03:30 EDT on the lost hour", zone: "America/New_York", expr: "30 2 * * *",
			from: "2026-03-07T12:00", to: "2026-03-09T12:00",
			want: []string{"2026-03-08T03:30:00-04:00", "2026-03-09T02:30:00-04:00"},
		},
		{
			name: "New York daily 01:30 runs once on the fall-back day (EDT pass)", zone: "America/New_York", expr: "30 1 * * *",
			from: "2026-10-31T12:00", to: "2026-11-02T12:00",
			want: []string{"2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"},
		},
		{
			name: "New York every minute is every real minute through the repeated hour", zone: "America/New_York", expr: "*/20 * * * *",
			from: "2026-11-01T00:30", to: "2026-11-01T02:10",
			want: []string{
				"2026-11-01T00:40:00-04:00", "2026-11-01T01:00:00-04:00", "2026-11-01T01:20:00-04:00", "2026-11-01T01:40:00-04:00",
				"2026-11-01T01:00:00-05:00", "2026-11-01T01:20:00-05:00", "2026-11-01T01:40:00-05:00", "2026-11-01T02:00:00-05:00",
			},
		},
		{
			name: "New York every 30 minutes keeps 30 real minutes across the lost hour", zone: "America/New_York", expr: "*/30 * * * *",
			from: "2026-03-08T00:50", to: "2026-03-08T04:00",
			want: []string{"2026-03-08T01:00:00-05:00", "2026-03-08T01:30:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T03:30:00-04:00", "2026-03-08T04:00:00-04:00"},
		},
		{
			name: "Berlin hourly at :15 fires each real hour of the repeated hour", zone: "Europe/Berlin", expr: "15 * * * *",
			from: "2026-10-25T01:30", to: "2026-10-25T03:30",
			want: []string{"2026-10-25T02:15:00+02:00", "2026-10-25T02:15:00+01:00", "2026-10-25T03:15:00+01:00"},
		},
		{
			name: "day-of-month or day-of-week when both are restricted", zone: "UTC", expr: "0 9 1 * MON",
			from: "2026-06-01T10:00", to: "2026-06-16T00:00",
			want: []string{"2026-06-08T09:00:00Z", "2026-06-15T09:00:00Z"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseCron(tc.expr, tc.zone, tc.gap)
			if err != nil {
				t.Fatal(err)
			}
			loc := mustZone(t, tc.zone)
			from, _ := time.ParseInLocation("2006-01-02T15:04", tc.from, loc)
			to, _ := time.ParseInLocation("2006-01-02T15:04", tc.to, loc)
			got := ticks(t, c, from, to)
			if len(got) != len(tc.want) {
				t.Fatalf("ticks %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("ticks %v, want %v", got, tc.want)
				}
			}
		})
	}
}

// TestEveryMinuteAcrossDST: "* * * * *" fires once per real minute through
// both transitions of both zones, never twice at one instant.
func TestEveryMinuteAcrossDST(t *testing.T) {
	for _, tc := range []struct{ zone, at string }{
		{"Europe/Berlin", "2026-03-29T00:55:00Z"}, {"Europe/Berlin", "2026-10-25T00:55:00Z"},
		{"America/New_York", "2026-03-08T06:55:00Z"}, {"America/New_York", "2026-11-01T05:55:00Z"},
	} {
		c, err := ParseCron("* * * * *", tc.zone, "")
		if err != nil {
			t.Fatal(err)
		}
		from, _ := time.Parse(time.RFC3339, tc.at)
		prev := from
		for i := range 130 {
			next := c.Next(prev)
			if next.Sub(prev) != time.Minute {
				t.Fatalf("%s from %s: tick %d is %s after the previous", tc.zone, tc.at, i, next.Sub(prev))
			}
			prev = next
		}
	}
}

func TestParseCronRefusals(t *testing.T) {
	for _, tc := range []struct{ expr, zone, gap, field string }{
		{"* * * *", "UTC", "", "cron"},
		{"* * * * * *", "UTC", "", "cron"},
		{"61 * * * *", "UTC", "", "cron"},
		{"@daily", "UTC", "", "cron"},
		{"TZ=UTC * * * * *", "UTC", "", "cron"},
		{"0 0 30 2 *", "UTC", "", "cron"},
		{"* * * * *", "Mars/Olympus", "", "timezone"},
		{"* * * * *", "Local", "", "timezone"},
		{"* * * * *", "UTC", "sometimes", "dst_gap"},
	} {
		_, err := ParseCron(tc.expr, tc.zone, DSTGap(tc.gap))
		var fe *task.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("ParseCron(%q, %q, %q) = %v, want a field error naming %s", tc.expr, tc.zone, tc.gap, err, tc.field)
		}
	}
}

func TestValidateNamesTheField(t *testing.T) {
	ok := func() Schedule {
		return Schedule{Name: "nightly", Cron: "0 2 * * *", Timezone: "Europe/Berlin", Task: SubmitRequest{Type: "cleanup"}}
	}
	one := 1
	for _, tc := range []struct {
		field string
		edit  func(*Schedule)
	}{
		{"name", func(s *Schedule) { s.Name = "" }},
		{"name", func(s *Schedule) { s.Name = "a/b" }},
		{"cron", func(s *Schedule) { s.Cron = "nope" }},
		{"timezone", func(s *Schedule) { s.Timezone = "Europe/Nowhere" }},
		{"task.type", func(s *Schedule) { s.Task.Type = "" }},
		{"task.type", func(s *Schedule) { s.Task.Type = "unknown" }},
		{"task.priority", func(s *Schedule) { s.Task.Priority = "urgent" }},
		{"task.run_at", func(s *Schedule) { now := time.Now(); s.Task.RunAt = &now }},
		{"task.delay_seconds", func(s *Schedule) { s.Task.DelaySeconds = &one }},
		{"task.idempotency_key", func(s *Schedule) { s.Task.IdempotencyKey = "k" }},
		{"missed", func(s *Schedule) { s.Missed = "sometimes" }},
		{"catch_up_limit", func(s *Schedule) { s.Missed = MissedCatchUp; s.CatchUpLimit = 101 }},
		{"catch_up_limit", func(s *Schedule) { s.CatchUpLimit = 3 }},
		{"task.payload", func(s *Schedule) { s.Task.Payload = []byte(`"` + strings.Repeat("a", MaxTaskPayload) + `"`) }},
		{"task.payload", func(s *Schedule) { s.Task.Payload = []byte(`{`) }},
	} {
		s := ok()
		tc.edit(&s)
		_, err := Validate(&s, task.NewKnownTypes([]string{"cleanup"}))
		var fe *task.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%+v: got %v, want a field error naming %s", s, err, tc.field)
		}
	}
	s := ok()
	s.Task.Payload = []byte(`{ "days" : 30 }`)
	if _, err := Validate(&s, task.KnownTypes{}); err != nil || string(s.Task.Payload) != `{"days":30}` {
		t.Fatalf("payload kept as %s (%v), want it compacted", s.Task.Payload, err)
	}
	s = ok()
	s.Missed = MissedCatchUp
	if _, err := Validate(&s, task.KnownTypes{}); err != nil || s.CatchUpLimit != DefaultCatchUpLimit || s.DSTGap != "run" {
		t.Fatalf("valid schedule: %v, %+v", err, s)
	}
}

// TestPlan: on-time ticks run; missed ones are skipped or, under
// catch_up, the newest CatchUpLimit of them run.
func TestPlan(t *testing.T) {
	c, _ := ParseCron("* * * * *", "UTC", "")
	next := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	now := next.Add(10*time.Minute + 30*time.Second) // ticks 10:00..10:10; 10:08, 10:09, 10:10 within Grace
	for _, tc := range []struct {
		missed       string
		limit        int
		runs, skips  int
		firstRunMins int
	}{
		{MissedSkip, 0, 3, 8, 8},
		{MissedCatchUp, 5, 8, 3, 3},
		{MissedCatchUp, 100, 11, 0, 0},
	} {
		p := Plan(c, Schedule{Cron: "* * * * *", NextTick: &next, Missed: tc.missed, CatchUpLimit: tc.limit}, now)
		if len(p.Run) != tc.runs || p.Skipped != tc.skips || !p.Run[0].Equal(next.Add(time.Duration(tc.firstRunMins)*time.Minute)) {
			t.Errorf("%s/%d: run %v skipped %d, want %d runs from +%dm and %d skipped", tc.missed, tc.limit, p.Run, p.Skipped, tc.runs, tc.firstRunMins, tc.skips)
		}
		if !p.Next.Equal(next.Add(11*time.Minute)) || !p.Last.Equal(next.Add(10*time.Minute)) {
			t.Errorf("next %s last %s", p.Next, p.Last)
		}
	}
}

func TestTickIDIsDeterministicAndDistinct(t *testing.T) {
	at := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	a, b := TickID("nightly", at), TickID("nightly", at)
	if a != b || !task.ValidID(a) {
		t.Fatalf("TickID not stable or not a task id: %s %s", a, b)
	}
	if TickID("nightly", at.Add(time.Minute)) == a || TickID("hourly", at) == a {
		t.Fatal("distinct ticks share an id")
	}
}
