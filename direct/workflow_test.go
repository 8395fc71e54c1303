package direct_test

import (
	"context"
	"errors"
	"testing"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/triageconfig"
)

// TestSameWorkflow submits and reads a workflow through both transports,
// and gets the same refusals from both.
func TestSameWorkflow(t *testing.T) {
	d := newDeployment(t, map[string]string{triageconfig.EnvTypes: "echo"})
	c := ctx(t)
	for _, nc := range d.both() {
		t.Run(nc.name, func(t *testing.T) {
			req := triage.WorkflowRequest{Name: "pair", IdempotencyKey: "wf-" + nc.name, Nodes: []triage.WorkflowNode{
				{Name: "a", SubmitRequest: triage.SubmitRequest{Type: "echo"}},
				{Name: "b", After: []string{"a"}, SubmitRequest: triage.SubmitRequest{Type: "echo"}},
			}}
			w, created, err := nc.c.SubmitWorkflow(c, req)
			if err != nil || !created || len(w.Nodes) != 2 || w.State != triage.WorkflowRunning {
				t.Fatalf("submit: %+v, %v, %v", w, created, err)
			}
			again, created, err := nc.other.SubmitWorkflow(c, req)
			if err != nil || created || again.ID != w.ID {
				t.Fatalf("the same key through the other transport: %+v, %v, %v", again, created, err)
			}
			read, err := nc.other.Workflow(c, w.ID)
			if err != nil {
				t.Fatal(err)
			}
			if read.Nodes[1].Status != triage.Waiting || read.Nodes[1].After[0] != "a" || read.Progress.Total != 2 {
				t.Fatalf("read: %+v", read)
			}
			for _, tc := range []struct {
				name  string
				call  func(context.Context, *triage.Client) error
				want  error
				field string
			}{
				{"cycle", func(ctx context.Context, c *triage.Client) error {
					_, _, err := c.SubmitWorkflow(ctx, triage.WorkflowRequest{Nodes: []triage.WorkflowNode{
						{Name: "x", After: []string{"y"}, SubmitRequest: triage.SubmitRequest{Type: "echo"}},
						{Name: "y", After: []string{"x"}, SubmitRequest: triage.SubmitRequest{Type: "echo"}}}})
					return err
				}, triage.ErrBadRequest, "nodes"},
				{"unknown type", func(ctx context.Context, c *triage.Client) error {
					_, _, err := c.SubmitWorkflow(ctx, triage.WorkflowRequest{Nodes: []triage.WorkflowNode{{Name: "x", SubmitRequest: triage.SubmitRequest{Type: "resize"}}}})
					return err
				}, triage.ErrBadRequest, "nodes[0].type"},
				{"key reused", func(ctx context.Context, c *triage.Client) error {
					other := req
					other.Name = "different"
					_, _, err := c.SubmitWorkflow(ctx, other)
					return err
				}, triage.ErrConflict, "idempotency_key"},
				{"unknown workflow", func(ctx context.Context, c *triage.Client) error {
					_, err := c.Workflow(ctx, read.Nodes[0].TaskID) // a task, not a workflow
					return err
				}, triage.ErrNotFound, "id"},
			} {
				err := tc.call(c, nc.c)
				e := asError(t, err)
				if !errors.Is(err, tc.want) || e.Field != tc.field {
					t.Errorf("%s: %v (field %q), want %v naming %q", tc.name, err, e.Field, tc.want, tc.field)
				}
			}
		})
	}
}
