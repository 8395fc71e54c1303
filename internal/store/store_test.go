package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dynamodbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

func TestMain(m *testing.M) { stacktest.Main(m) }

func newTask(typ string, p triagetype.Priority) *task.Task {
	now := time.Now().UTC()
	return &task.Task{
		ID: task.NewID(now), Type: typ, Payload: json.RawMessage(`{"x":1}`),
		Priority: p, EffectivePriority: p, Status: triagetype.Queued,
		MaxAttempts: 3, TimeoutSeconds: 30, CreatedAt: now, WaitingSince: now,
		Version: 1, DispatchVersion: 1,
	}
}

func TestCreateGetTransition(t *testing.T) {
	env := stacktest.New(t)
	ctx := context.Background()
	s := store.New(env.DynamoDB, env.Spec.Table.Name)

	tk := newTask("echo", triagetype.Low)
	if _, created, err := s.Create(ctx, tk); err != nil || !created {
		t.Fatalf("Create = %v, %v", created, err)
	}
	got, err := s.Get(ctx, tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != triagetype.Queued || got.Version != 1 || string(got.Payload) != `{"x":1}` {
		t.Fatalf("got %+v", got)
	}

	claimed, err := s.Transition(ctx, got, triagetype.Executing, func(n *task.Task) { n.Attempts++; n.WorkerID = "w1" })
	if err != nil {
		t.Fatal(err)
	}
	if claimed.Version != 2 || claimed.Attempts != 1 || claimed.WorkerID != "w1" {
		t.Fatalf("claimed %+v", claimed)
	}

	// A second writer holding the old snapshot loses, and learns the current state.
	_, err = s.Transition(ctx, got, triagetype.Executing, nil)
	var ce *store.ConflictError
	if !errors.Is(err, store.ErrConflict) || !errors.As(err, &ce) || ce.Current == nil || ce.Current.Version != 2 {
		t.Fatalf("stale transition err = %v", err)
	}

	// A forbidden move is refused before any write.
	if _, err := s.Transition(ctx, claimed, triagetype.Scheduled, nil); !errors.Is(err, task.ErrInvalidTransition) {
		t.Fatalf("executing->scheduled err = %v", err)
	}

	done, err := s.Transition(ctx, claimed, triagetype.Completed, func(n *task.Task) {
		n.Result = json.RawMessage(`{"ok":true}`)
		n.WorkerID = ""
	})
	if err != nil {
		t.Fatal(err)
	}
	if done.ExpiresAt < time.Now().Add(6*24*time.Hour).Unix() || done.WorkerID != "" {
		t.Fatalf("completed task: expires_at %d, worker %q", done.ExpiresAt, done.WorkerID)
	}

	if _, err := s.Get(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get(nope) err = %v", err)
	}
}

func TestIdempotentCreateRace(t *testing.T) {
	env := stacktest.New(t)
	ctx := context.Background()
	s := store.New(env.DynamoDB, env.Spec.Table.Name)

	const n = 20
	var wg sync.WaitGroup
	ids := make([]string, n)
	created := make([]bool, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk := newTask("echo", triagetype.High)
			tk.IdempotencyKey = "order-42"
			var saved *task.Task
			saved, created[i], errs[i] = s.Create(ctx, tk)
			if saved != nil {
				ids[i] = saved.ID
			}
		}()
	}
	wg.Wait()
	nCreated := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("submit %d: %v", i, errs[i])
		}
		if created[i] {
			nCreated++
		}
		if ids[i] != ids[0] {
			t.Fatalf("submit %d returned task %s, submit 0 returned %s", i, ids[i], ids[0])
		}
	}
	if nCreated != 1 {
		t.Fatalf("%d submits created a task, want exactly 1", nCreated)
	}
}

// Sharded reads return each task exactly once, newest first, across
// pages, for every kind of listing; the promoter's reads find what they
// should. A listing by type is the same with the by-type index as without it
// (where it walks by-created and keeps the type's tasks).
func TestShardedReads(t *testing.T) {
	for _, typeIndex := range []bool{false, true} {
		t.Run(fmt.Sprintf("type index %v", typeIndex), func(t *testing.T) { testShardedReads(t, typeIndex) })
	}
}

func testShardedReads(t *testing.T, typeIndex bool) {
	env := stacktest.New(t)
	ctx := context.Background()
	s := store.New(env.DynamoDB, env.Spec.Table.Name, store.WithShards(7), store.WithTypeIndex(typeIndex))
	base := time.Now().UTC().Add(-time.Hour)
	var all, lows []string // newest first
	for i := range 60 {
		p := []triagetype.Priority{triagetype.High, triagetype.Medium, triagetype.Low}[i%3]
		typ := []string{"a", "b"}[i%2]
		at := base.Add(time.Duration(i) * time.Second)
		tk := &task.Task{ID: task.NewID(at), Type: typ, Priority: p, EffectivePriority: p, Status: triagetype.Queued,
			MaxAttempts: 3, TimeoutSeconds: 30, CreatedAt: at, WaitingSince: at, Version: 1, DispatchVersion: 1}
		if i%10 == 9 {
			done := at.Add(time.Second)
			tk.Status, tk.CompletedAt = triagetype.DeadLetter, &done
		}
		if _, _, err := s.Create(ctx, tk); err != nil {
			t.Fatal(err)
		}
		all = append([]string{tk.ID}, all...)
		if p == triagetype.Low && tk.Status == triagetype.Queued {
			lows = append(lows, tk.ID)
		}
	}
	// The by-type index holds the tasks only when the store indexes types.
	indexed := int32(0)
	for sh := range s.Shards() {
		out, err := env.DynamoDB.Query(ctx, &dynamodb.QueryInput{
			TableName: aws.String(env.Spec.Table.Name), IndexName: aws.String(spec.IndexByType),
			KeyConditionExpression:    aws.String("#k = :v"),
			ExpressionAttributeNames:  map[string]string{"#k": spec.AttrTypePK},
			ExpressionAttributeValues: map[string]dynamodbtypes.AttributeValue{":v": &dynamodbtypes.AttributeValueMemberS{Value: fmt.Sprintf("b#%d", sh)}},
			Select:                    "COUNT",
		})
		if err != nil {
			t.Fatal(err)
		}
		indexed += out.Count
	}
	if want := map[bool]int32{false: 0, true: 30}[typeIndex]; indexed != want {
		t.Fatalf("by-type holds %d entries of type b, want %d", indexed, want)
	}
	tests := []struct {
		name   string
		filter store.ListFilter
		keep   func(i int) bool // by creation index
	}{
		{"all", store.ListFilter{}, func(int) bool { return true }},
		{"by type", store.ListFilter{Type: "b"}, func(i int) bool { return i%2 == 1 }},
		{"by status in by-due", store.ListFilter{Status: triagetype.DeadLetter}, func(i int) bool { return i%10 == 9 }},
		{"by status, filtered", store.ListFilter{Status: triagetype.Queued}, func(i int) bool { return i%10 != 9 }},
		{"by priority", store.ListFilter{Priority: triagetype.Medium}, func(i int) bool { return i%3 == 1 }},
		{"type and status", store.ListFilter{Type: "a", Status: triagetype.Queued}, func(i int) bool { return i%2 == 0 && i%10 != 9 }},
		{"several statuses", store.ListFilter{Statuses: []triagetype.Status{triagetype.DeadLetter, triagetype.Queued}}, func(int) bool { return true }},
		{"several statuses, one matching", store.ListFilter{Statuses: []triagetype.Status{triagetype.DeadLetter, triagetype.Cancelled}}, func(i int) bool { return i%10 == 9 }},
		{"several statuses and a type", store.ListFilter{Type: "b", Statuses: []triagetype.Status{triagetype.DeadLetter, triagetype.Retrying}}, func(i int) bool { return i%2 == 1 && i%10 == 9 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var want []string
			for i := 59; i >= 0; i-- {
				if tc.keep(i) {
					want = append(want, all[59-i])
				}
			}
			var got []string
			cursor := ""
			for pages := 0; ; pages++ {
				if pages > 100 {
					t.Fatal("listing never ended")
				}
				ts, next, err := s.List(ctx, tc.filter, 7, cursor)
				if err != nil {
					t.Fatal(err)
				}
				for _, tk := range ts {
					got = append(got, tk.ID)
				}
				if cursor = next; cursor == "" {
					break
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("listed %d tasks %v\nwant %d, newest first, each once %v", len(got), got, len(want), want)
			}
		})
	}
	for _, c := range []string{"x", "eyJhIjoiZm9vIn0", "eyJhIjoiMjAyNi0wMS0wMVQwMDowMDowMC4wMDAwMDAwMDBaI25vdC1hbi1pZCJ9"} {
		if _, _, err := s.List(ctx, store.ListFilter{}, 5, c); !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("cursor %q: %v, want ErrBadCursor", c, err)
		}
	}

	// The promoter's sweep of new tasks sees each untracked low task once,
	// oldest first, across its pages.
	var swept []string
	for sh := range s.Shards() {
		for after := ""; ; {
			ts, next, err := s.Created(ctx, triagetype.Low, sh, after, time.Now(), 3)
			if err != nil {
				t.Fatal(err)
			}
			for _, tk := range ts {
				if tk.Status == triagetype.Queued {
					swept = append(swept, tk.ID)
				}
			}
			if after = next; after == "" {
				break
			}
		}
	}
	slices.Sort(swept)
	slices.Sort(lows)
	if !slices.Equal(swept, lows) {
		t.Fatalf("swept %v, want the queued low tasks %v", swept, lows)
	}
}
