package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/triagetype"
)

// batchCmd is `triage batch create|add|seal|show`: batches with a
// completion callback (internal/flow). Members come from NDJSON files, one
// submit body a line, as `triage submit --file` reads them, and are sent
// MaxBatch a request.
func (c *cli) batchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "batch",
		Short: "Batches with a completion callback: create, add members, seal, show progress",
		Long: "A batch's on_complete task is enqueued exactly once when every member has finished,\n" +
			"with the counts (completed, dead-lettered, cancelled) and the batch id in its payload.\n" +
			"A batch is sealed when created unless --open; an open one takes members until sealed.",
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(c.batchCreateCmd(), c.batchAddCmd(), c.batchSealCmd(), c.batchShowCmd())
	usageArgs(cmd)
	return cmd
}

func (c *cli) batchCreateCmd() *cobra.Command {
	var file, onType, onPayload, onPriority string
	var open bool
	cmd := &cobra.Command{
		Use:   "create [-f FILE|-] [--on-complete TYPE [--on-complete-payload JSON]] [--open]",
		Short: "Create a batch from an NDJSON file of members, sealed once they are all added unless --open",
		Long: `Create a batch from an NDJSON file of members (one submit body a line), sealed
once every member was added unless --open:

  triage batch create -f emails.ndjson --on-complete campaign-report \
      --on-complete-payload '{"campaign":42}'

Members are sent 100 a request; a batch with more is created open and sealed after
the last. Without --file, the batch is created empty and open.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var reqs []triage.SubmitRequest
			var lines []int
			if file != "" {
				var err error
				if lines, reqs, err = readMembers(cmd, file); err != nil {
					return err
				}
			} else {
				open = true
			}
			r := triage.BatchCreate{Open: open || len(reqs) > triage.MaxBatch}
			if onType != "" {
				r.OnComplete = &triage.SubmitRequest{Type: onType, Priority: triage.Priority(onPriority)}
				if onPayload != "" {
					if !json.Valid([]byte(onPayload)) {
						return usageError{fmt.Errorf("--on-complete-payload is not valid JSON")}
					}
					r.OnComplete.Payload = json.RawMessage(onPayload)
				}
			} else if onPayload != "" || onPriority != "" {
				return usageError{fmt.Errorf("--on-complete-payload and --on-complete-priority need --on-complete TYPE")}
			}
			first := min(len(reqs), triage.MaxBatch)
			r.Tasks = reqs[:first]
			b, err := c.client().CreateBatch(cmd.Context(), r)
			if err != nil {
				return err
			}
			results := b.Results
			if first < len(reqs) {
				if b, err = c.addMembers(cmd, b.ID, reqs[first:], &results); err != nil {
					return err
				}
				if !open {
					id := b.ID
					if b, err = c.client().SealBatch(cmd.Context(), id); err != nil {
						return fmt.Errorf("batch %s: every member was added, but sealing it failed (run triage batch seal %s): %w", id, id, err)
					}
				}
			}
			return c.reportBatch(b, lines, results)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&file, "file", "f", "", "the members: an NDJSON file of submit bodies, or - for stdin")
	f.StringVar(&onType, "on-complete", "", "the type of the task enqueued once every member has finished")
	f.StringVar(&onPayload, "on-complete-payload", "", "that task's own JSON payload (it gets the counts beside it)")
	f.StringVar(&onPriority, "on-complete-priority", "", "that task's priority: high, medium (default) or low")
	f.BoolVar(&open, "open", false, "leave the batch open for more members (seal it with triage batch seal)")
	return cmd
}

func (c *cli) batchAddCmd() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "add ID -f FILE|-",
		Short: "Add the members of an NDJSON file to an open batch",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if file == "" {
				return usageError{fmt.Errorf("--file is required: the members to add")}
			}
			lines, reqs, err := readMembers(cmd, file)
			if err != nil {
				return err
			}
			var results []triagetype.BatchResult
			b, err := c.addMembers(cmd, args[0], reqs, &results)
			if err != nil {
				return err
			}
			return c.reportBatch(b, lines, results)
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the members: an NDJSON file of submit bodies, or - for stdin")
	return cmd
}

func (c *cli) batchSealCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "seal ID",
		Short: "Close a batch to new members; its callback runs once every member has finished",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := c.client().SealBatch(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return c.reportBatch(b, nil, nil)
		},
	}
}

func (c *cli) batchShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Show a batch's state and progress (done of total, by outcome) and its callback",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := c.client().GetBatch(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return c.reportBatch(b, nil, nil)
		},
	}
}

// readMembers reads an NDJSON file of members (- is stdin), checking every
// line before anything is sent.
func readMembers(cmd *cobra.Command, name string) ([]int, []triage.SubmitRequest, error) {
	var r io.Reader = cmd.InOrStdin()
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, nil, usageError{fmt.Errorf("--file: %w", err)}
		}
		defer f.Close()
		r = f
	}
	lines, reqs, err := parseNDJSON(r)
	if err != nil {
		return nil, nil, usageError{err}
	}
	if len(reqs) == 0 {
		return nil, nil, usageError{fmt.Errorf("--file %s holds no tasks", name)}
	}
	return lines, reqs, nil
}

// addMembers adds reqs to batch id, MaxBatch a request, appending each
// member's result (indexed from the first of *results) to *results. A
// failed request stops it: the members before it stay in the batch.
func (c *cli) addMembers(cmd *cobra.Command, id string, reqs []triage.SubmitRequest, results *[]triagetype.BatchResult) (*triagetype.Batch, error) {
	var b *triagetype.Batch
	for len(reqs) > 0 {
		n := min(len(reqs), triage.MaxBatch)
		var err error
		if b, err = c.client().AddToBatch(cmd.Context(), id, reqs[:n]); err != nil {
			return nil, fmt.Errorf("batch %s: adding members %d to %d: %w (the %d before them were sent)", id, len(*results)+1, len(*results)+n, err, len(*results))
		}
		for _, r := range b.Results {
			r.Index += len(*results)
			*results = append(*results, r)
		}
		reqs = reqs[n:]
	}
	return b, nil
}

// reportBatch prints b (with the members' results, numbered by their
// lines) and fails when any member was refused.
func (c *cli) reportBatch(b *triagetype.Batch, lines []int, results []triagetype.BatchResult) error {
	b.Results = results
	failed := 0
	for _, r := range results {
		if r.Err() != nil {
			failed++
		}
	}
	if c.json {
		if err := c.printJSON(b); err != nil {
			return err
		}
	} else {
		p := b.Progress
		fmt.Fprintf(c.out, "batch %s  %s  %d/%d done: %d completed, %d dead-lettered, %d cancelled\n",
			b.ID, b.State, p.Done, p.Total, p.Completed, p.DeadLettered, p.Cancelled)
		if b.CallbackID != "" {
			fmt.Fprintf(c.out, "callback: %s\n", b.CallbackID)
		}
		if len(results) > 0 {
			fmt.Fprintf(c.out, "added %d of %d %s\n", len(results)-failed, len(results), plural(len(results), "member", "members"))
		}
		shown := 0
		for _, r := range results {
			if r.Err() == nil {
				continue
			}
			if shown == maxFailuresShown {
				fmt.Fprintf(c.err, "... and %d more failures (--json lists them all)\n", failed-shown)
				break
			}
			shown++
			line := r.Index + 1
			if r.Index < len(lines) {
				line = lines[r.Index]
			}
			fmt.Fprintf(c.err, "line %d: %d %s: %s\n", line, r.Status, r.Error.Code, r.Error.Message)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d members failed", failed, len(results))
	}
	return nil
}
