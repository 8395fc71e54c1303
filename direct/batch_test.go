package direct_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/triageconfig"
)

// TestSameBatches runs a batch's life through both transports, crossing
// over at each step: created open through one with a member and an
// on_complete, a member added through the other and one more with
// WithBatch, sealed, its members cancelled (each a finish), and then read
// completed with its callback through both. The refusals are the same on
// both, field by field.
func TestSameBatches(t *testing.T) {
	d := newDeployment(t, map[string]string{triageconfig.EnvTypes: "member,report"})
	c := ctx(t)
	var refusals [2][]*triage.Error
	for i, nc := range d.both() {
		t.Run(nc.name, func(t *testing.T) {
			b, err := nc.c.CreateBatch(c, triage.BatchCreate{
				Open:       true,
				Tasks:      []triage.SubmitRequest{{Type: "member", Payload: json.RawMessage(`{"n":1}`), DelaySeconds: new(600)}},
				OnComplete: &triage.SubmitRequest{Type: "report", Payload: json.RawMessage(`{"campaign":7}`)},
			})
			if err != nil {
				t.Fatal(err)
			}
			if b.State != triage.BatchOpen || len(b.Results) != 1 || !b.Results[0].Created() || b.Results[0].Task.BatchID != b.ID || b.Progress.Total != 1 {
				t.Fatalf("create: %+v", b)
			}
			added, err := nc.other.AddToBatch(c, b.ID, []triage.SubmitRequest{{Type: "member", DelaySeconds: new(600)}})
			if err != nil || added.Progress.Total != 2 || len(added.Results) != 1 || !added.Results[0].Created() {
				t.Fatalf("add through the other transport: %+v, %v", added, err)
			}
			third, _, err := nc.c.Submit(c, "member", nil, triage.WithBatch(b.ID), triage.WithDelay(10*time.Minute))
			if err != nil || third.BatchID != b.ID {
				t.Fatalf("submit WithBatch: %+v, %v", third, err)
			}
			sealed, err := nc.other.SealBatch(c, b.ID)
			if err != nil || sealed.State != triage.BatchSealed || sealed.Progress.Total != 3 || sealed.Progress.Done != 0 {
				t.Fatalf("seal: %+v, %v", sealed, err)
			}
			late, err := nc.c.AddToBatch(c, b.ID, []triage.SubmitRequest{{Type: "member"}})
			if err != nil || late.Results[0].Created() || asError(t, late.Results[0].Err()).Field != "tasks[0].batch_id" || late.Progress.Total != 3 {
				t.Fatalf("add to a sealed batch: %+v, %v", late, err)
			}
			// Each member's finish counts: cancel them, alternating transports.
			for j, id := range []string{b.Results[0].Task.ID, added.Results[0].Task.ID, third.ID} {
				cl := nc.c
				if j%2 == 1 {
					cl = nc.other
				}
				if _, err := cl.Cancel(c, id); err != nil {
					t.Fatal(err)
				}
			}
			var done *triage.Batch
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
				if done, err = nc.c.Batch(c, b.ID); err != nil {
					t.Fatal(err)
				}
				if done.State == triage.BatchCompleted || time.Now().After(deadline) {
					break
				}
			}
			want := triage.BatchProgress{Total: 3, Done: 3, Cancelled: 3}
			if done.State != triage.BatchCompleted || done.Progress != want || done.CallbackID == "" || done.CompletedAt == nil {
				t.Fatalf("batch after its members were cancelled: %+v", done)
			}
			read, err := nc.other.Batch(c, b.ID)
			if err != nil {
				t.Fatal(err)
			}
			sameJSON(t, "the completed batch read through each transport", done, read)
			cb, err := nc.other.Get(c, done.CallbackID)
			if err != nil || cb.Type != "report" {
				t.Fatalf("callback task: %+v, %v", cb, err)
			}
			var payload triage.BatchCallback
			if err := json.Unmarshal(cb.Payload, &payload); err != nil || payload.BatchID != b.ID || payload.Counts != want || string(payload.Payload) != `{"campaign":7}` {
				t.Fatalf("callback payload %s: %+v, %v", cb.Payload, payload, err)
			}
			// Sealing a completed batch changes nothing.
			if again, err := nc.c.SealBatch(c, b.ID); err != nil || again.State != triage.BatchCompleted || again.CallbackID != done.CallbackID {
				t.Fatalf("seal again: %+v, %v", again, err)
			}

			many := make([]triage.SubmitRequest, triage.MaxBatch+1)
			for k := range many {
				many[k] = triage.SubmitRequest{Type: "member"}
			}
			for _, tc := range []struct {
				name  string
				call  func(context.Context, *triage.Client) error
				want  error
				field string
			}{
				{"too many", func(ctx context.Context, c *triage.Client) error {
					_, err := c.CreateBatch(ctx, triage.BatchCreate{Tasks: many})
					return err
				}, triage.ErrBadRequest, "tasks"},
				{"sealed and empty", func(ctx context.Context, c *triage.Client) error {
					_, err := c.CreateBatch(ctx, triage.BatchCreate{})
					return err
				}, triage.ErrBadRequest, "tasks"},
				{"callback with after", func(ctx context.Context, c *triage.Client) error {
					_, err := c.CreateBatch(ctx, triage.BatchCreate{Open: true, OnComplete: &triage.SubmitRequest{Type: "report", After: []string{b.ID}}})
					return err
				}, triage.ErrBadRequest, "on_complete"},
				{"callback of an unknown type", func(ctx context.Context, c *triage.Client) error {
					_, err := c.CreateBatch(ctx, triage.BatchCreate{Open: true, OnComplete: &triage.SubmitRequest{Type: "resize"}})
					return err
				}, triage.ErrBadRequest, "on_complete.type"},
				{"add nothing", func(ctx context.Context, c *triage.Client) error {
					_, err := c.AddToBatch(ctx, b.ID, nil)
					return err
				}, triage.ErrBadRequest, "tasks"},
				{"bad id", func(ctx context.Context, c *triage.Client) error {
					_, err := c.Batch(ctx, "nope")
					return err
				}, triage.ErrBadRequest, "id"},
				{"unknown batch", func(ctx context.Context, c *triage.Client) error {
					_, err := c.SealBatch(ctx, third.ID) // a task, not a batch
					return err
				}, triage.ErrNotFound, "id"},
			} {
				err := tc.call(c, nc.c)
				e := asError(t, err)
				if !errors.Is(err, tc.want) || e.Field != tc.field {
					t.Errorf("%s: %v (field %q), want %v naming %q", tc.name, err, e.Field, tc.want, tc.field)
				}
				// The ids differ between the runs; the rest must not.
				msg := strings.ReplaceAll(e.Message, third.ID, "<id>")
				refusals[i] = append(refusals[i], &triage.Error{Status: e.Status, Code: e.Code, Field: e.Field, Message: msg})
			}
		})
	}
	sameJSON(t, "refusals", refusals[0], refusals[1])
}
