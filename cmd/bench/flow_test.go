package main

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"testing"
	"time"
)

// TestMeasureFlow runs group 11 alone on its own emulators when
// TRIAGE_BENCH_FLOW names the tasks per kind (make bench runs it with the
// rest; this is for a quick look): TRIAGE_BENCH_FLOW=100 go test ./cmd/bench -run MeasureFlow -v.
func TestMeasureFlow(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("TRIAGE_BENCH_FLOW"))
	if n <= 0 {
		t.Skip("set TRIAGE_BENCH_FLOW to the tasks per kind")
	}
	nodes := 1000
	if v, err := strconv.Atoi(os.Getenv("TRIAGE_BENCH_FLOW_NODES")); err == nil && v > 2 {
		nodes = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	cl, cnt := testStack(t, ctx)
	f, err := measureFlow(ctx, cl, cnt, n, nodes)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	printFlow(&b, &f)
	t.Log(b.String())
	if f.ChildExtra <= 0 || f.MemberExtra <= 0 || f.PlainWrites < 4 {
		t.Fatalf("implausible write units: %+v", f)
	}
}
