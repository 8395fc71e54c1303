package main

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/task"
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
	small := map[string]ddbtypes.AttributeValue{
		"pk": str("TASK#1"), "gsi1pk": str("queued#high"), "gsi1sk": str("x"), "gsi2pk": str("noop"), "gsi2sk": str("y"),
	}
	put := c.capacity(&dynamodb.PutItemInput{Item: small}, &dynamodb.PutItemOutput{}, nil)
	if put.WriteTable != 1 || put.WriteIndex != 2 {
		t.Errorf("put: table %v index %v, want 1 and 2", put.WriteTable, put.WriteIndex)
	}
	// A status change rewrites the by-status key (2) and the by-type projection (1).
	claim := &dynamodb.UpdateItemInput{
		Key:                      map[string]ddbtypes.AttributeValue{"pk": str("TASK#1")},
		UpdateExpression:         aws.String("SET #0 = :0, #1 = :1"),
		ExpressionAttributeNames: map[string]string{"#0": "status", "#1": "gsi1pk"},
	}
	up := c.capacity(claim, &dynamodb.UpdateItemOutput{Attributes: small}, nil)
	if up.WriteTable != 1 || up.WriteIndex != 3 {
		t.Errorf("claim: table %v index %v, want 1 and 3", up.WriteTable, up.WriteIndex)
	}
	// An item in no index (the type registry) costs the table write only.
	reg := &dynamodb.UpdateItemInput{
		Key:                      map[string]ddbtypes.AttributeValue{"pk": str("TYPES")},
		UpdateExpression:         aws.String("ADD #t :t"),
		ExpressionAttributeNames: map[string]string{"#t": "types"},
	}
	if r := c.capacity(reg, &dynamodb.UpdateItemOutput{}, nil); r.WriteTable != 1 || r.WriteIndex != 0 {
		t.Errorf("registry: table %v index %v, want 1 and 0", r.WriteTable, r.WriteIndex)
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
	r := &Results{Submit: Submit{Single: []SubmitLevel{{Concurrency: 1}}}, EndToEnd: []E2E{{StoreCompleted: map[task.Priority]int{"low": 1, "high": 2, "medium": 3}}}}
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
