package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/triagetype"
)

// workflowCmd is `triage workflow submit|get`.
func (c *cli) workflowCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "workflow",
		Short: "Submit a workflow of tasks that wait for each other, or show one as a tree",
	}
	var file string
	submit := &cobra.Command{
		Use:   "submit -f FILE",
		Short: "Submit a workflow from a JSON file (- for stdin): {\"name\", \"idempotency_key\", \"nodes\": [{\"name\", \"type\", \"after\": [names], ...}]}",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var r io.Reader = cmd.InOrStdin()
			if file != "-" {
				f, err := os.Open(file)
				if err != nil {
					return err
				}
				defer f.Close()
				r = f
			}
			var req triage.WorkflowRequest
			dec := json.NewDecoder(r)
			dec.DisallowUnknownFields()
			if err := dec.Decode(&req); err != nil {
				return usageError{fmt.Errorf("%s: not a workflow: %w", file, err)}
			}
			w, created, err := c.client().SubmitWorkflow(cmd.Context(), req)
			if err != nil {
				return err
			}
			if c.json {
				return c.printJSON(w)
			}
			if !created {
				fmt.Fprintf(c.out, "existing workflow (idempotency key %q)\n", req.IdempotencyKey)
			}
			c.printWorkflow(w)
			return nil
		},
	}
	submit.Flags().StringVarP(&file, "file", "f", "", "the workflow's JSON file, or - for stdin")
	_ = submit.MarkFlagRequired("file")
	get := &cobra.Command{
		Use:   "get ID",
		Short: "Show a workflow's progress and every node's status as a tree",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			w, err := c.client().GetWorkflow(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if c.json {
				return c.printJSON(w)
			}
			c.printWorkflow(w)
			return nil
		},
	}
	cmd.AddCommand(submit, get)
	usageArgs(cmd)
	return cmd
}

// printWorkflow prints w's header and its nodes as a tree: each node
// under its first parent, and under its other parents as a reference.
func (c *cli) printWorkflow(w *triagetype.Workflow) {
	p := w.Progress
	fmt.Fprintf(c.out, "workflow %s", w.ID)
	if w.Name != "" {
		fmt.Fprintf(c.out, " (%s)", w.Name)
	}
	fmt.Fprintf(c.out, "  %s  %d/%d done: %d completed, %d dead-lettered, %d cancelled\n",
		w.State, p.Done, p.Total, p.Completed, p.DeadLettered, p.Cancelled)
	fmt.Fprint(c.out, workflowTree(w.Nodes))
}

// workflowTree renders nodes (a DAG) as an indented tree.
func workflowTree(nodes []triagetype.WorkflowNodeStatus) string {
	children := map[string][]int{}
	for i, n := range nodes {
		for _, a := range n.After {
			children[a] = append(children[a], i)
		}
	}
	var b strings.Builder
	printed := map[string]bool{}
	var walk func(i int, prefix string, last bool, via string)
	walk = func(i int, prefix string, last bool, via string) {
		n := nodes[i]
		branch, next := "├─ ", "│  "
		if last {
			branch, next = "└─ ", "   "
		}
		if prefix == "" && via == "" {
			branch, next = "", ""
		}
		if printed[n.Name] {
			fmt.Fprintf(&b, "%s%s%s ↑ (also after %s)\n", prefix, branch, n.Name, via)
			return
		}
		printed[n.Name] = true
		fmt.Fprintf(&b, "%s%s%s  %s  %s  %s\n", prefix, branch, n.Name, nodeStatus(n), n.Type, n.TaskID)
		kids := children[n.Name]
		for k, ci := range kids {
			walk(ci, prefix+next, k == len(kids)-1, n.Name)
		}
	}
	for i, n := range nodes {
		if len(n.After) == 0 {
			walk(i, "", true, "")
		}
	}
	return b.String()
}

// nodeStatus is a node's status as the tree prints it: a node its
// workflow's submit never wrote says so, and a node with no status (its
// finished task was deleted by retention) prints as deleted.
func nodeStatus(n triagetype.WorkflowNodeStatus) string {
	switch {
	case n.Unwritten:
		return string(n.Status) + " (never written)"
	case n.Status == "":
		return "(deleted)"
	}
	return string(n.Status)
}
