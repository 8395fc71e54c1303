package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Every task is in exactly one submit, singles and batches of 5-40 both.
func TestSoakUnits(t *testing.T) {
	for _, n := range []int{1, 7, 100, 600} {
		us := soakUnits(n, rand.New(rand.NewPCG(uint64(n), 1)))
		next, singles, batches := 0, 0, 0
		for _, u := range us {
			if u.first != next || u.n < 1 {
				t.Fatalf("n=%d: unit %+v after task %d", n, u, next)
			}
			if u.batch {
				batches++
				if u.n > 40 || (u.n < 5 && u.first+u.n != n) {
					t.Fatalf("n=%d: batch of %d", n, u.n)
				}
			} else {
				singles++
			}
			next += u.n
		}
		if next != n {
			t.Fatalf("n=%d: units cover %d tasks", n, next)
		}
		if n >= 100 && (singles == 0 || batches == 0) {
			t.Fatalf("n=%d: %d singles, %d batches; want both", n, singles, batches)
		}
	}
}

// The traces give runs per task, runs a kill cut (ended at their
// process's exit), and overlaps of two runs in different processes, but
// not a run that starts after a killed one's process exited.
func TestSoakTraces(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	at := func(ms int) int64 { return t0.Add(time.Duration(ms) * time.Millisecond).UnixNano() }
	write := func(pid string, lines ...string) {
		if err := os.WriteFile(filepath.Join(dir, pid+".log"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("100",
		fmt.Sprintf("start A 100 %d 1", at(0)), fmt.Sprintf("done A 100 %d 1", at(100)), // overlaps 200's run of A
		fmt.Sprintf("start B 100 %d 1", at(0)), // cut by the kill at 200 ms
		fmt.Sprintf("start C 100 %d 1", at(0)), fmt.Sprintf("done C 100 %d 1", at(50)),
		"start D 100 12", // cut mid-write: ignored
	)
	write("200",
		fmt.Sprintf("start A 200 %d 2", at(50)), fmt.Sprintf("done A 200 %d 2", at(150)),
		fmt.Sprintf("start B 200 %d 2", at(300)), fmt.Sprintf("done B 200 %d 2", at(400)),
	)
	tr, err := readTraces(dir)
	if err != nil {
		t.Fatal(err)
	}
	exits := map[string]time.Time{"100": t0.Add(200 * time.Millisecond), "200": t0.Add(time.Second)}
	started := t0.Add(-20 * time.Millisecond)
	final := map[string]*task.Task{
		"A": {ID: "A", Status: triagetype.Completed, Attempts: 2, StartedAt: &started},
		"B": {ID: "B", Status: triagetype.Completed, Attempts: 2},
		"C": {ID: "C", Status: triagetype.Completed, Attempts: 1, StartedAt: &started},
		"E": {ID: "E", Status: triagetype.Completed, Attempts: 1},
	}
	var s Soak
	tr.judge(&s, []string{"A", "B", "C", "E"}, final, exits)
	if s.Runs != 5 || s.MaxRuns != 2 || s.RanMoreThanOnce != 2 || s.RunsCut != 1 || s.Overlapping != 1 || s.CompletedWithoutRun != 1 || s.RanNotAccepted != 0 {
		t.Fatalf("%+v", s)
	}
	if len(s.OverlapExamples) != 1 || !strings.HasPrefix(s.OverlapExamples[0], "A:") {
		t.Fatalf("overlaps %v, want A's", s.OverlapExamples)
	}
	if s.ClaimToStart.N != 2 || s.ClaimToStart.Max != 70 {
		t.Fatalf("claim to start %+v, want A's 70 ms and C's 20 ms", s.ClaimToStart)
	}
}
