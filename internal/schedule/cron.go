package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/triagehq/triage/internal/task"
)

// Cron is a parsed 5-field cron expression (minute hour day-of-month month
// day-of-week) in one IANA time zone, with the DST rules below. The
// parsing is robfig/cron's; the next-time computation is this package's,
// because robfig/cron's Next runs a fixed-time job twice in a repeated
// (fall-back) hour and has no choice for the lost (spring-forward) one.
//
// DST semantics, pinned by TestNextDST:
//
//   - An expression whose hour field is every hour ("*", "*/1", "0-23")
//     is an interval: it fires at every real instant whose local time
//     matches, so "* * * * *" fires every real minute through both passes
//     of a repeated hour and "*/15 * * * *" keeps its 15 real minutes
//     across a lost one. Nothing is doubled or lost, because nothing
//     names a wall-clock hour.
//   - Any other expression names wall-clock times, and fires once per
//     matching local time: in a repeated hour, only in its first pass
//     (no double run); a time that does not exist (the lost hour) runs
//     shifted forward by the gap, 02:30 becoming 03:30 (no skipped run),
//     unless DSTGapSkip was asked for, which skips it. A shifted time that
//     lands on or before a run already due is not run twice.
type Cron struct {
	spec *cron.SpecSchedule
	loc  *time.Location
	gap  DSTGap
	// interval: the hour field matches every hour (see above).
	interval bool
}

// DSTGap says what a wall-clock schedule does with a time that a
// spring-forward transition skips.
type DSTGap string

// The DST gap policies.
const (
	DSTGapRun  DSTGap = "run"  // run it shifted forward by the gap (the default)
	DSTGapSkip DSTGap = "skip" // skip it
)

// parser takes exactly the five standard fields: no seconds, no
// descriptors (@daily, @every), whose meaning differs between crons.
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// starBit is robfig/cron's mark of a field written "*" (or "?"): with both
// day fields restricted a day matches either, as in every cron.
const starBit = 1 << 63

// lookahead bounds how far Next searches: an expression with no time in
// the next 5 years (February 30th) never fires, and is refused.
const lookahead = 5 * 366 * 24 * time.Hour

// ErrNever is the error of an expression that matches no time.
var ErrNever = errors.New("matches no time in the next 5 years")

// ParseCron parses expr in the IANA zone named zone ("" is UTC). Errors
// say which of the two is wrong: *FieldError naming "cron" or "timezone".
func ParseCron(expr, zone string, gap DSTGap) (*Cron, error) {
	if zone == "" {
		zone = "UTC"
	}
	loc, err := time.LoadLocation(zone)
	if err != nil || zone == "Local" {
		return nil, &task.FieldError{Field: "timezone", Message: fmt.Sprintf("%q is not an IANA time zone name (e.g. Europe/Berlin, America/New_York, UTC)", short(zone))}
	}
	e := strings.TrimSpace(expr)
	if strings.HasPrefix(e, "TZ=") || strings.HasPrefix(e, "CRON_TZ=") {
		return nil, &task.FieldError{Field: "cron", Message: "give the zone in timezone, not in the expression"}
	}
	if len(strings.Fields(e)) != 5 {
		return nil, &task.FieldError{Field: "cron", Message: fmt.Sprintf("%q must have 5 fields (minute hour day-of-month month day-of-week)", short(expr))}
	}
	sch, err := parser.Parse(e)
	if err != nil {
		return nil, &task.FieldError{Field: "cron", Message: fmt.Sprintf("%q: %v", short(expr), err)}
	}
	spec, ok := sch.(*cron.SpecSchedule)
	if !ok {
		return nil, &task.FieldError{Field: "cron", Message: fmt.Sprintf("%q is not a 5-field expression", short(expr))}
	}
	switch gap {
	case "":
		gap = DSTGapRun
	case DSTGapRun, DSTGapSkip:
	default:
		return nil, &task.FieldError{Field: "dst_gap", Message: fmt.Sprintf("must be %q (the default) or %q, got %q", DSTGapRun, DSTGapSkip, short(string(gap)))}
	}
	c := &Cron{spec: spec, loc: loc, gap: gap, interval: spec.Hour&(1<<24-1) == 1<<24-1}
	if c.Next(time.Now()).IsZero() {
		return nil, &task.FieldError{Field: "cron", Message: fmt.Sprintf("%q %v", short(expr), ErrNever)}
	}
	return c, nil
}

// Location is the schedule's time zone.
func (c *Cron) Location() *time.Location { return c.loc }

// Next is the first time the expression fires strictly after after, or
// the zero time if none comes within 5 years. Times are whole minutes.
func (c *Cron) Next(after time.Time) time.Time {
	if c.interval {
		return c.nextInterval(after)
	}
	return c.nextWallClock(after)
}

// nextInterval walks real minutes, skipping months and days that cannot
// match, and tests each minute's local time.
func (c *Cron) nextInterval(after time.Time) time.Time {
	t := after.Truncate(time.Minute).Add(time.Minute)
	end := after.Add(lookahead)
	for t.Before(end) {
		l := t.In(c.loc)
		switch {
		case c.spec.Month&(1<<uint(l.Month())) == 0:
			t = time.Date(l.Year(), l.Month()+1, 1, 0, 0, 0, 0, c.loc)
		case !c.dayMatches(l):
			t = time.Date(l.Year(), l.Month(), l.Day()+1, 0, 0, 0, 0, c.loc)
		case c.spec.Hour&(1<<uint(l.Hour())) == 0 || c.spec.Minute&(1<<uint(l.Minute())) == 0:
			t = t.Add(time.Minute)
		default:
			return t
		}
		t = t.Truncate(time.Minute) // zones with non-whole-minute offsets are long gone, but stay on minutes
	}
	return time.Time{}
}

// nextWallClock walks local (civil) minutes from after's local time,
// skipping months, days and hours that cannot match, and turns each match
// into its instant: the first pass of a repeated time, a lost time
// shifted by the gap (or skipped), and nothing at or before after.
func (c *Cron) nextWallClock(after time.Time) time.Time {
	a := after.In(c.loc)
	// civil is a wall-clock time, kept as a UTC time.Time for its arithmetic.
	civil := time.Date(a.Year(), a.Month(), a.Day(), a.Hour(), a.Minute(), 0, 0, time.UTC).Add(time.Minute)
	end := civil.Add(lookahead)
	for civil.Before(end) {
		switch {
		case c.spec.Month&(1<<uint(civil.Month())) == 0:
			civil = time.Date(civil.Year(), civil.Month()+1, 1, 0, 0, 0, 0, time.UTC)
			continue
		case !c.dayMatches(civil):
			civil = time.Date(civil.Year(), civil.Month(), civil.Day()+1, 0, 0, 0, 0, time.UTC)
			continue
		case c.spec.Hour&(1<<uint(civil.Hour())) == 0:
			civil = civil.Truncate(time.Hour).Add(time.Hour)
			continue
		case c.spec.Minute&(1<<uint(civil.Minute())) == 0:
			civil = civil.Add(time.Minute)
			continue
		}
		if at, ok := c.instant(civil); ok && at.After(after) {
			return at
		}
		civil = civil.Add(time.Minute)
	}
	return time.Time{}
}

// instant is the real time of the wall-clock time civil in the zone: its
// earliest occurrence when it occurs twice, and when it does not occur,
// the time shifted forward by the gap (ok false under DSTGapSkip).
func (c *Cron) instant(civil time.Time) (time.Time, bool) {
	// The zone's offsets a day either side cover any one transition.
	var first time.Time
	for _, probe := range []time.Time{civil.Add(-24 * time.Hour), civil.Add(24 * time.Hour)} {
		_, off := probe.In(c.loc).Zone()
		at := civil.Add(-time.Duration(off) * time.Second)
		if l := at.In(c.loc); l.Hour() == civil.Hour() && l.Minute() == civil.Minute() && l.Day() == civil.Day() {
			if first.IsZero() || at.Before(first) {
				first = at
			}
		}
	}
	if !first.IsZero() {
		return first, true
	}
	if c.gap == DSTGapSkip {
		return time.Time{}, false
	}
	// Not a local time: read with the offset in force before the
	// transition it is the time shifted forward by the gap. (time.Date
	// does not promise which offset it picks for such a time, and picks
	// differently for different zones.)
	_, before := civil.Add(-24 * time.Hour).In(c.loc).Zone()
	return civil.Add(-time.Duration(before) * time.Second), true
}

// dayMatches is cron's day rule: with both day fields restricted, a day
// matching either fires; otherwise both must match.
func (c *Cron) dayMatches(t time.Time) bool {
	dom := c.spec.Dom&(1<<uint(t.Day())) != 0
	dow := c.spec.Dow&(1<<uint(t.Weekday())) != 0
	if c.spec.Dom&starBit != 0 || c.spec.Dow&starBit != 0 {
		return dom && dow
	}
	return dom || dow
}

func short(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
