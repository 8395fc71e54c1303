package store_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// TestClaimWritesWhatTransitionWrites claims twin tasks, one with the
// read-then-Transition claim the consumer made before, one with Claim
// from its message alone, and compares the items attribute by attribute.
func TestClaimWritesWhatTransitionWrites(t *testing.T) {
	env := stacktest.New(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	s := store.New(env.DynamoDB, env.Spec.Table.Name, store.WithClock(func() time.Time { return now }))
	lease := now.Add(35 * time.Second)

	cases := []struct {
		name string
		edit func(*task.Task)
		// admitted, when set, is the started_at the claimer gives (a rate
		// limit's clock, Claim.StartedAt) instead of the store's now.
		admitted time.Time
	}{
		{"queued", func(*task.Task) {}, time.Time{}},
		{"queued, admitted by a rate limit a moment before", func(*task.Task) {}, now.Add(-300 * time.Millisecond)},
		{"queued with a key, tracked for aging", func(tk *task.Task) { tk.Key = "acme"; tk.Tracked = true }, time.Time{}},
		{"released from a hold", func(tk *task.Task) { tk.Released = true; tk.Attempts = 1 }, time.Time{}},
		{"retrying, with its due entry", func(tk *task.Task) {
			tk.Status = triagetype.Retrying
			at := now.Add(-time.Second)
			tk.RetryAt = &at
			tk.Attempts = 1
			tk.Suspend = &task.Suspend{Kind: "sleep", WakeAt: at}
		}, time.Time{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, b := newTask("echo", triagetype.Medium), newTask("echo", triagetype.Medium)
			tc.edit(a)
			tc.edit(b)
			for _, tk := range []*task.Task{a, b} {
				if _, _, err := s.Create(ctx, tk); err != nil {
					t.Fatal(err)
				}
			}
			cur, err := s.Get(ctx, a.ID)
			if err != nil {
				t.Fatal(err)
			}
			started := now
			if !tc.admitted.IsZero() {
				started = tc.admitted
			}
			if _, err := s.Transition(ctx, cur, triagetype.Executing, func(n *task.Task) {
				n.Attempts++
				n.WorkerID = "w1"
				n.LeaseUntil = &lease
				n.StartedAt = &started
				n.RetryAt = nil
				n.Held, n.Released = "", false
				n.ProgressToken = "tok"
				n.Suspend = nil
			}); err != nil {
				t.Fatal(err)
			}
			got, err := s.Claim(ctx, store.Claim{ID: b.ID, DispatchVersion: b.DispatchVersion, Type: b.Type, Key: b.Key,
				TimeoutSeconds: b.TimeoutSeconds, WorkerID: "w1", LeaseUntil: lease, StartedAt: tc.admitted, ProgressToken: "tok"})
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != triagetype.Executing || got.Attempts != b.Attempts+1 || got.Version != b.Version+1 {
				t.Fatalf("Claim returned %s, attempts %d, version %d", got.Status, got.Attempts, got.Version)
			}
			if got.StartedAt == nil || !got.StartedAt.Equal(started) {
				t.Fatalf("Claim wrote started_at %v, want %v", got.StartedAt, started)
			}
			ia, ib := rawItem(t, env, a.ID), rawItem(t, env, b.ID)
			for _, k := range []string{spec.AttrPK, "id", spec.AttrCreatedPK, spec.AttrCreatedSK, spec.AttrTypePK, "created_at"} {
				delete(ia, k)
				delete(ib, k)
			}
			for k := range mergeKeys(ia, ib) {
				if !reflect.DeepEqual(ia[k], ib[k]) {
					t.Errorf("attribute %q: Transition wrote %#v, Claim %#v", k, ia[k], ib[k])
				}
			}
		})
	}
}

// TestClaimRefusals checks that a refused claim returns the item as it
// was (ALL_OLD), and nothing when there is no item.
func TestClaimRefusals(t *testing.T) {
	env := stacktest.New(t)
	ctx := context.Background()
	s := store.New(env.DynamoDB, env.Spec.Table.Name)
	tk := newTask("echo", triagetype.Low)
	if _, _, err := s.Create(ctx, tk); err != nil {
		t.Fatal(err)
	}
	claim := func(edit func(*store.Claim)) error {
		c := store.Claim{ID: tk.ID, DispatchVersion: tk.DispatchVersion, Type: tk.Type, TimeoutSeconds: tk.TimeoutSeconds,
			WorkerID: "w", LeaseUntil: time.Now().Add(time.Minute), ProgressToken: "p"}
		edit(&c)
		_, err := s.Claim(ctx, c)
		return err
	}
	for _, tc := range []struct {
		name   string
		edit   func(*store.Claim)
		status triagetype.Status // of ConflictError.Current; "" for none
	}{
		{"stale message", func(c *store.Claim) { c.DispatchVersion = 0 }, triagetype.Queued},
		{"another type", func(c *store.Claim) { c.Type = "other" }, triagetype.Queued},
		{"another timeout", func(c *store.Claim) { c.TimeoutSeconds = 5 }, triagetype.Queued},
		{"a key the task lacks", func(c *store.Claim) { c.Key = "k" }, triagetype.Queued},
		{"no task yet", func(c *store.Claim) { c.ID = task.NewID(time.Now()) }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := claim(tc.edit)
			var ce *store.ConflictError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want a *ConflictError", err)
			}
			if tc.status == "" && ce.Current != nil || tc.status != "" && (ce.Current == nil || ce.Current.Status != tc.status) {
				t.Fatalf("Current = %+v, want status %q", ce.Current, tc.status)
			}
		})
	}
	if err := claim(func(*store.Claim) {}); err != nil {
		t.Fatal(err)
	}
	// The second claim of the same message loses to the first and sees it
	// running.
	err := claim(func(*store.Claim) {})
	var ce *store.ConflictError
	if !errors.As(err, &ce) || ce.Current == nil || ce.Current.Status != triagetype.Executing || ce.Current.Attempts != 1 {
		t.Fatalf("second claim err = %v", err)
	}
}

func rawItem(t *testing.T, env *stacktest.Env, id string) map[string]types.AttributeValue {
	t.Helper()
	out, err := env.DynamoDB.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(env.Spec.Table.Name), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{spec.AttrPK: &types.AttributeValueMemberS{Value: spec.TaskKeyPrefix + id}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

func mergeKeys(ms ...map[string]types.AttributeValue) map[string]bool {
	keys := map[string]bool{}
	for _, m := range ms {
		for k := range m {
			keys[k] = true
		}
	}
	return keys
}
