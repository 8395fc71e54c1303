package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/triagehq/triage/triagetype"
)

func TestItemSize(t *testing.T) {
	item := map[string]ddbtypes.AttributeValue{
		"pk":   &ddbtypes.AttributeValueMemberS{Value: "TASK#1"},                             // 2 + 6
		"n":    &ddbtypes.AttributeValueMemberN{Value: "12345"},                              // 1 + 4
		"ok":   &ddbtypes.AttributeValueMemberBOOL{Value: true},                              // 2 + 1
		"list": &ddbtypes.AttributeValueMemberL{Value: []ddbtypes.AttributeValue{str("ab")}}, // 4 + 3 + 1 + 2
	}
	if got, want := itemSize(item), 8+5+3+10; got != want {
		t.Fatalf("itemSize = %d, want %d", got, want)
	}
}

func TestCapacityOfTaskWrites(t *testing.T) {
	c := newCounter(specIndexes())
	table := aws.String("t")
	item := func(status string, due bool) map[string]ddbtypes.AttributeValue {
		it := map[string]ddbtypes.AttributeValue{
			"pk": str("TASK#1"), "status": str(status), "priority": str("low"),
			"cpk": str("c#3"), "csk": str("2026#1"), "tpk": str("noop#3"),
		}
		if due {
			it["dpk"], it["dsk"] = str(status+"#3"), str("2026#1")
		}
		return it
	}
	update := func(names ...string) *dynamodb.UpdateItemInput {
		in := &dynamodb.UpdateItemInput{TableName: table, Key: map[string]ddbtypes.AttributeValue{"pk": str("TASK#1")}, UpdateExpression: aws.String("SET"), ExpressionAttributeNames: map[string]string{}}
		for i, n := range names {
			ph := fmt.Sprintf("#%d", i)
			*in.UpdateExpression += " " + ph + " = :v,"
			in.ExpressionAttributeNames[ph] = n
		}
		return in
	}
	steps := []struct {
		name       string
		st         opStats
		table, idx float64
	}{
		// Created: one entry in by-created and one in by-type.
		{"put", c.capacity(&dynamodb.PutItemInput{TableName: table, Item: item("queued", false)}, &dynamodb.PutItemOutput{}, nil), 1, 2},
		// Claimed: no index key and no projected attribute changes.
		{"claim", c.capacity(update("status", "version"), &dynamodb.UpdateItemOutput{Attributes: item("executing", false)}, nil), 1, 0},
		// Retrying: enters by-due.
		{"retry", c.capacity(update("status", "dpk", "dsk"), &dynamodb.UpdateItemOutput{Attributes: item("retrying", true)}, nil), 1, 1},
		// Dead-lettered: its by-due entry moves (delete + put).
		{"dead", c.capacity(update("status", "dpk", "dsk"), &dynamodb.UpdateItemOutput{Attributes: item("dead_letter", true)}, nil), 1, 2},
		// Deleted: its three entries go.
		{"delete", c.capacity(&dynamodb.DeleteItemInput{TableName: table, Key: map[string]ddbtypes.AttributeValue{"pk": str("TASK#1")}}, &dynamodb.DeleteItemOutput{}, nil), 1, 3},
	}
	for _, s := range steps {
		if s.st.WriteTable != s.table || s.st.WriteIndex != s.idx {
			t.Errorf("%s: table %v index %v, want %v and %v", s.name, s.st.WriteTable, s.st.WriteIndex, s.table, s.idx)
		}
	}
	// An item in no index (a control) costs the table write only.
	ctl := &dynamodb.UpdateItemInput{
		TableName: table, Key: map[string]ddbtypes.AttributeValue{"pk": str("CONTROL#x")},
		UpdateExpression:         aws.String("ADD #t :t"),
		ExpressionAttributeNames: map[string]string{"#t": "n"},
	}
	if r := c.capacity(ctl, &dynamodb.UpdateItemOutput{}, nil); r.WriteTable != 1 || r.WriteIndex != 0 {
		t.Errorf("control: table %v index %v, want 1 and 0", r.WriteTable, r.WriteIndex)
	}
	big := map[string]ddbtypes.AttributeValue{"pk": str("TASK#2"), "payload": str(string(make([]byte, 2500)))}
	if w := c.capacity(&dynamodb.PutItemInput{Item: big}, &dynamodb.PutItemOutput{}, nil); w.WriteTable != 3 {
		t.Errorf("2.5 KB put: %v write units, want 3", w.WriteTable)
	}
}

func TestDistOf(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	got := distOf(ds)
	if got.P50 != 50 || got.P95 != 95 || got.P99 != 99 || got.Max != 100 || got.N != 100 {
		t.Fatalf("distOf = %+v", got)
	}
}

func TestParseSetups(t *testing.T) {
	got, err := parseSetups("1x32, 2x16r0")
	if err != nil {
		t.Fatal(err)
	}
	want := []consumerSetup{{1, 32, -1}, {2, 16, 0}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("parseSetups = %+v, want %+v", got, want)
	}
	for _, bad := range []string{"", "32", "0x4", "1x4r4", "1x32,"} {
		if _, err := parseSetups(bad); err == nil {
			t.Errorf("parseSetups(%q) accepted", bad)
		}
	}
}

func TestParseOptionsResultsFile(t *testing.T) {
	for _, c := range []struct {
		args    []string
		want    string // results file; "" means the arguments are refused
		quick   bool
		comment string
	}{
		{nil, defaultOut, false, "default: the ignored path"},
		{[]string{"-quick"}, defaultOut, true, "make bench QUICK=1"},
		{[]string{"-update"}, sampleOut, false, "make bench UPDATE=1"},
		{[]string{"-out", "x/y.json"}, "x/y.json", false, "explicit file"},
		{[]string{"-update", "-quick"}, "", false, "a smoke run must not become the committed sample"},
		{[]string{"-update", "-out", "x.json"}, "", false, "two names for one file"},
		{[]string{"--", "-quick"}, "", false, "stray arguments"},
	} {
		o, err := parseOptions(c.args)
		switch {
		case c.want == "" && err == nil:
			t.Errorf("%v (%s): accepted, out=%q", c.args, c.comment, o.Out)
		case c.want != "" && err != nil:
			t.Errorf("%v (%s): %v", c.args, c.comment, err)
		case c.want != "" && (o.Out != c.want || o.Quick != c.quick):
			t.Errorf("%v (%s): out=%q quick=%v, want %q %v", c.args, c.comment, o.Out, o.Quick, c.want, c.quick)
		}
	}
}

// A bench run must not dirty the checkout: the default results file is
// ignored by git, and the committed sample is not.
func TestResultsPathsAgainstGitignore(t *testing.T) {
	root := filepath.Join("..", "..") // tests run in cmd/bench/; the paths are relative to the root
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		t.Skip("not a git checkout:", err)
	}
	for path, ignored := range map[string]bool{defaultOut: true, sampleOut: false} {
		// check-ignore exits 0 when the path is ignored, 1 when it is not.
		err := exec.Command("git", "-C", root, "check-ignore", "-q", "--no-index", path).Run()
		var exit *exec.ExitError
		if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) {
			t.Fatalf("git check-ignore %s: %v", path, err)
		}
		if got := err == nil; got != ignored {
			t.Errorf("%s: ignored by git = %v, want %v (cmd/bench/out/ holds runs; cmd/bench/results.json is the committed sample)", path, got, ignored)
		}
	}
}

func TestSettled(t *testing.T) {
	if settled([]float64{100, 200, 205, 210}) != true {
		t.Error("a flat tail should count as settled")
	}
	if settled([]float64{100, 150, 200, 250}) {
		t.Error("a rising tail should not count as settled")
	}
}

// The results file is committed as a sample run, so its key order must not
// depend on map iteration.
func TestResultsJSONIsDeterministic(t *testing.T) {
	r := &Results{Submit: Submit{Single: []SubmitLevel{{Concurrency: 1}}}, EndToEnd: []E2E{{StoreCompleted: map[triagetype.Priority]int{"low": 1, "high": 2, "medium": 3}}}}
	a, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		b, _ := json.Marshal(r)
		if !bytes.Equal(a, b) {
			t.Fatal("two encodings differ")
		}
	}
}

// The counter charges each write to its partition key, and hotKeys ranks
// the keys by units per task with the ceiling a 1,000 WCU/s partition gives.
func TestHotKeys(t *testing.T) {
	c := newCounter(specIndexes())
	before := c.keySnapshot()
	table := aws.String("t")
	for i := range 4 {
		item := map[string]ddbtypes.AttributeValue{
			"pk": str(fmt.Sprintf("TASK#%d", i)), "priority": str("low"),
			"cpk": str(fmt.Sprintf("c#%d", i%2)), "csk": str(fmt.Sprintf("2026#%d", i)), "tpk": str("noop#0"),
		}
		c.capacity(&dynamodb.PutItemInput{TableName: table, Item: item}, &dynamodb.PutItemOutput{}, nil)
	}
	hot := hotKeys(before, c.keySnapshot(), 4, 2, false)
	if len(hot) != 2 || hot[0].Key != "by-type noop#0" || hot[0].WriteUnitsPerTask != 1 || hot[0].CeilingTasksPerSec != 1000 {
		t.Fatalf("hot keys %+v: want by-type noop#0 first, 1 unit per task, ceiling 1000", hot)
	}
	if hot[1].Key != "by-created c#0" || hot[1].WriteUnitsPerTask != 0.5 || hot[1].CeilingTasksPerSec != 2000 {
		t.Fatalf("second hot key %+v: want by-created c#0 at 0.5 units per task", hot[1])
	}
}
