package main

import (
	"fmt"
	"strings"
)

// CrossCheck is one row of group 10: a phase's DynamoDB units per task as
// the bench computes them and as DynamoDB reported them
// (ReturnConsumedCapacity=INDEXES), over the calls that came back with a
// report.
type CrossCheck struct {
	Phase         string  `json:"phase"`
	Tasks         int     `json:"tasks"`
	ShareReported float64 `json:"share_of_calls_reported"`
	ComputedWrite float64 `json:"computed_write_units"`
	ReportedWrite float64 `json:"reported_write_units"`
	ReportedIndex float64 `json:"reported_write_units_indexes"`
	ComputedRead  float64 `json:"computed_read_units"`
	ReportedRead  float64 `json:"reported_read_units"`
	WriteDiff     float64 `json:"write_difference_percent"`
	ReadDiff      float64 `json:"read_difference_percent"`
}

// crossRow compares a phase's computed and reported units.
func crossRow(name string, p Phase) CrossCheck {
	r := p.Reported
	return CrossCheck{
		Phase: name, Tasks: p.Tasks, ShareReported: r.CallsShare,
		ComputedWrite: r.ComputedWrite, ReportedWrite: r.WriteUnits, ReportedIndex: r.WriteUnitsIndex,
		ComputedRead: r.ComputedRead, ReportedRead: r.ReadUnits,
		WriteDiff: diffPercent(r.ComputedWrite, r.WriteUnits), ReadDiff: diffPercent(r.ComputedRead, r.ReadUnits),
	}
}

// diffPercent is how far computed is from reported, in percent of reported
// (0 when both are 0; 100 when only computed has units).
func diffPercent(computed, reported float64) float64 {
	switch {
	case reported == 0 && computed == 0:
		return 0
	case reported == 0:
		return 100
	}
	return round((computed-reported)/reported*100, 1)
}

// crossCheck builds group 10 from the phases of the other groups.
func crossCheck(r *Results, steady, counters Phase) []CrossCheck {
	rows := []CrossCheck{
		crossRow("steady state with batching: submit + consume (3)", steady),
		crossRow("counters catching up (3)", counters),
	}
	for _, p := range r.Payloads {
		rows = append(rows, crossRow(fmt.Sprintf("%s payload: submit + consume (7)", bytesText(p.PayloadBytes)), p.Total))
	}
	for _, x := range r.Direct {
		name, _, _ := strings.Cut(x.Path, ":")
		rows = append(rows, crossRow(name+": submit + consume + counters (8)", x.Total))
	}
	for _, s := range r.Stats.Runs {
		// Per request: the phase's "tasks" are the requests.
		rows = append(rows, crossRow(fmt.Sprintf("GET /stats, %d retained, per request (9)", s.Retained), Phase{Tasks: r.Stats.Requests, Reported: s.Reported}))
	}
	return rows
}

// sizesText lists sizes as "1 KB, 10 KB, 200 KB".
func sizesText(sizes []int) string {
	var parts []string
	for _, n := range sizes {
		parts = append(parts, bytesText(n))
	}
	return strings.Join(parts, ", ")
}
