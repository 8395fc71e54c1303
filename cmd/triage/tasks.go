package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/triagetype"
)

func (c *cli) submitCmd() *cobra.Command {
	var typ, prio, key, fairKey, payload, file string
	var maxAttempts, timeout, delay int
	var ids bool
	cmd := &cobra.Command{
		Use:   "submit (--type TYPE [--payload JSON] [--priority high|medium|low] | --file FILE|-)",
		Short: "Submit a task, or many from an NDJSON file",
		Long: `Submit one task described by flags, or many from a file.

With --file, each non-blank line is one submit body, the JSON object POST
/api/v1/tasks takes ({"type":"echo","payload":{...},"priority":"high",...}).
"-" reads standard input. Every line is checked before anything is sent;
then the tasks go out in batches of 100, four batches at a time, and
batches the server throttles (429) or could not queue (503) are retried.
A progress bar is drawn on standard error when it is a terminal.

--ids prints the id of every task the input names (created, or already
existing because its idempotency key was used), one per line and in input
order, so that this works:

  triage wait $(triage submit --file tasks.ndjson --ids)

Exit status 1 when any task failed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file != "" {
				for _, f := range []string{"type", "key", "payload", "priority", "max-attempts", "timeout", "delay", "idempotency-key"} {
					if cmd.Flags().Changed(f) {
						return usageError{fmt.Errorf("--%s cannot be combined with --file: put it in each line", f)}
					}
				}
				return c.submitFile(cmd, file, ids)
			}
			if typ == "" {
				return usageError{fmt.Errorf("--type (or --file) is required")}
			}
			var body any
			if payload != "" {
				if !json.Valid([]byte(payload)) {
					return usageError{fmt.Errorf("--payload is not valid JSON")}
				}
				body = json.RawMessage(payload)
			}
			var opts []triage.SubmitOption
			if prio != "" {
				opts = append(opts, triage.WithPriority(triage.Priority(prio)))
			}
			if cmd.Flags().Changed("max-attempts") {
				opts = append(opts, triage.WithMaxAttempts(maxAttempts))
			}
			if cmd.Flags().Changed("timeout") {
				opts = append(opts, triage.WithTimeout(time.Duration(timeout)*time.Second))
			}
			if cmd.Flags().Changed("delay") {
				opts = append(opts, triage.WithDelay(time.Duration(delay)*time.Second))
			}
			if key != "" {
				opts = append(opts, triage.WithIdempotencyKey(key))
			}
			if fairKey != "" {
				opts = append(opts, triage.WithKey(fairKey))
			}
			t, created, err := c.client().Submit(cmd.Context(), typ, body, opts...)
			if err != nil {
				return err
			}
			switch {
			case c.json:
				return c.printJSON(t)
			case ids:
				fmt.Fprintln(c.out, t.ID)
				return nil
			}
			verb := "created"
			if !created {
				verb = "exists (idempotency key seen)"
			}
			fmt.Fprintf(c.out, "%s %s (%s, %s)\n", verb, t.ID, t.Status, t.Priority)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&typ, "type", "", "task type")
	f.StringVar(&fairKey, "key", "", "fairness key, e.g. a tenant id (default: the shared default key)")
	f.StringVar(&payload, "payload", "", "JSON payload")
	f.StringVar(&prio, "priority", "", "high, medium or low (default medium)")
	f.IntVar(&maxAttempts, "max-attempts", 3, "attempts before the task is dead-lettered")
	f.IntVar(&timeout, "timeout", 300, "seconds an attempt may run")
	f.IntVar(&delay, "delay", 0, "seconds to wait before the task may run")
	f.StringVar(&key, "idempotency-key", "", "key that makes a repeated submit return the first task")
	f.StringVarP(&file, "file", "f", "", "NDJSON file of submit bodies, one per line (- for stdin)")
	f.BoolVar(&ids, "ids", false, "print only task ids, one per line")
	return cmd
}

func (c *cli) getCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "get ID",
		Short: "Show a task",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := c.client().Get(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return c.printTask(t)
		},
	}
}

func (c *cli) waitCmd() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "wait ID... | wait -",
		Short: "Wait until tasks finish; exit 6 if any did not complete",
		Long: `Wait until every task is terminal. With "-" as the only argument the ids
are read from standard input, separated by spaces or newlines.

Exit status 6 when any task ended other than completed (failed into the
dead-letter queue, or cancelled); 3 when an id is unknown.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 && args[0] == "-" {
				b, err := io.ReadAll(cmd.InOrStdin())
				if err != nil {
					return fmt.Errorf("read ids from stdin: %w", err)
				}
				if args = strings.Fields(string(b)); len(args) == 0 {
					return usageError{fmt.Errorf("no task ids on stdin")}
				}
			}
			ctx := cmd.Context()
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			cl := c.client()
			var done []*triage.Task
			incomplete := 0
			for i, id := range args {
				t, err := cl.Wait(ctx, id, 200*time.Millisecond)
				if errors.Is(err, context.DeadlineExceeded) && cmd.Context().Err() == nil {
					_ = c.printWaited(done)
					return fmt.Errorf("%w after %s: %d of %d tasks finished, still waiting for %s", errTimeout, timeout, i, len(args), id)
				}
				if errors.Is(err, triage.ErrDeadLettered) || errors.Is(err, triage.ErrCancelled) {
					err = nil // it ended without completing: counted below, exit 6
				}
				if err != nil {
					return fmt.Errorf("wait for %s: %w", id, err)
				}
				if t.Status != "completed" {
					incomplete++
				}
				done = append(done, t)
			}
			if err := c.printWaited(done); err != nil {
				return err
			}
			if incomplete > 0 {
				return fmt.Errorf("%w: %d of %d", errIncomplete, incomplete, len(args))
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up after this long (0: never)")
	return cmd
}

// printWaited shows one task in full, or several as a table with a count.
func (c *cli) printWaited(ts []*triage.Task) error {
	if len(ts) == 1 {
		return c.printTask(ts[0])
	}
	if c.json {
		return c.printJSON(ts)
	}
	tw := c.table("ID", "TYPE", "STATUS", "ATTEMPTS", "OUTCOME")
	completed := 0
	for _, t := range ts {
		outcome := string(t.Result)
		if t.Status == "completed" {
			completed++
		}
		if t.Error != nil {
			outcome = t.Error.Message
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\n", t.ID, t.Type, t.Status, t.Attempts, t.MaxAttempts, truncate(outcome, 60))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(c.out, "%d of %d completed\n", completed, len(ts))
	return nil
}

func (c *cli) listCmd() *cobra.Command {
	var o triage.ListParams
	var status, prio string
	var all bool
	cmd := &cobra.Command{
		Use:   "list [--type T] [--status S] [--priority P] [--suspended K] [--limit N] [--all]",
		Short: "List tasks, newest pages first as the server orders them",
		Long: `List tasks matching the filters. --priority filters on the effective
priority (the queue a task is on now); --suspended any|sleep|wait keeps
the tasks waiting durably (a sleep or a signal wait). Without --all one page of --limit
tasks is shown, and the cursor of the next page is printed on standard
error; --cursor continues from it, and --all follows every page.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Limit < 1 || o.Limit > 1000 {
				return usageError{fmt.Errorf("--limit must be from 1 to 1000")}
			}
			o.Status, o.Priority = triage.Status(status), triage.Priority(prio)
			cl := c.client()
			var page triagetype.TaskPage
			if all {
				err := cl.ListAll(cmd.Context(), o, func(t *triage.Task) error {
					page.Tasks = append(page.Tasks, *t)
					return nil
				})
				if err != nil {
					return err
				}
			} else {
				p, err := cl.List(cmd.Context(), o)
				if err != nil {
					return err
				}
				page = *p
			}
			if page.Tasks == nil {
				page.Tasks = []triage.Task{}
			}
			if c.json {
				return c.printJSON(page)
			}
			if len(page.Tasks) == 0 {
				fmt.Fprintln(c.err, "no tasks")
				return nil
			}
			tw := c.table("ID", "TYPE", "STATUS", "PRIORITY", "ATTEMPTS", "CREATED")
			for _, t := range page.Tasks {
				prio := t.Priority
				if t.EffectivePriority != "" && t.EffectivePriority != t.Priority {
					prio += "->" + t.EffectivePriority
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%s\n", t.ID, t.Type, t.Status, prio, t.Attempts, t.MaxAttempts, fmtTime(t.CreatedAt))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if page.NextCursor != "" {
				fmt.Fprintf(c.err, "more tasks: add --cursor %s (or use --all)\n", page.NextCursor)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Type, "type", "", "only tasks of this type")
	f.StringVar(&status, "status", "", "only tasks in this status (scheduled, queued, executing, retrying, completed, cancelled, dead_letter, waiting)")
	f.StringVar(&prio, "priority", "", "only tasks whose effective priority is this (high, medium, low)")
	f.StringVar(&o.Suspended, "suspended", "", "only tasks waiting durably: any, sleep or wait (a signal wait)")
	f.IntVar(&o.Limit, "limit", 100, "tasks per page, 1 to 1000")
	f.StringVar(&o.Cursor, "cursor", "", "continue from a previous page's cursor")
	f.BoolVar(&all, "all", false, "follow every page to the end")
	return cmd
}

func (c *cli) cancelCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a task that has not finished (exit 4 if it has)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := c.client().Cancel(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			switch {
			case c.json:
				return c.printJSON(t)
			case t.Status == "cancelled":
				fmt.Fprintf(c.out, "cancelled %s\n", t.ID)
			default:
				fmt.Fprintf(c.out, "cancel requested for %s (%s): its handler is told to stop at the next heartbeat\n", t.ID, t.Status)
			}
			return nil
		},
	}
}

func (c *cli) signalCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "signal ID NAME [JSON]",
		Short: "Send a task a signal with a JSON payload (default null); a waiting task wakes",
		Long: `Deliver signal NAME to task ID, for a handler that waits for it
(worker.WaitSignal): a task waiting for it wakes at once; a signal sent
before the wait is kept until the wait consumes it. Exit 4 if the task has
finished or already has a signal of that name (the first is kept), 3 if
the id is unknown.`,
		Args: cobra.RangeArgs(2, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			payload := json.RawMessage("null")
			if len(args) == 3 {
				payload = json.RawMessage(args[2])
			}
			t, err := c.client().Signal(cmd.Context(), args[0], args[1], payload)
			if err != nil {
				return err
			}
			if c.json {
				return c.printJSON(t)
			}
			fmt.Fprintf(c.out, "signalled %s with %s (%s)\n", t.ID, args[1], t.Status)
			return nil
		},
	}
}

func (c *cli) retryCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "retry ID",
		Short: "Queue a dead-lettered task again, with its attempts reset (exit 4 for other states)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := c.client().Retry(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if c.json {
				return c.printJSON(t)
			}
			fmt.Fprintf(c.out, "retrying %s: %s on %s, attempts reset\n", t.ID, t.Status, t.EffectivePriority)
			return nil
		},
	}
}

func (c *cli) deleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "delete ID",
		Short: "Delete a finished task (exit 4 if it has not finished)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := c.client().Delete(cmd.Context(), args[0]); err != nil {
				return err
			}
			if c.json {
				return c.printJSON(map[string]any{"id": args[0], "deleted": true})
			}
			fmt.Fprintf(c.out, "deleted %s\n", args[0])
			return nil
		},
	}
}

func (c *cli) cleanupCmd() *cobra.Command {
	var olderThan, follow string
	var wait bool
	cmd := &cobra.Command{
		Use:   "cleanup (--older-than DURATION|TIME [--wait] | --status ID)",
		Short: "Delete finished tasks that finished before a time (a job)",
		Long: `Start a cleanup job that deletes every terminal task (completed,
cancelled, dead_letter) that finished before --older-than: an RFC 3339 time
(2026-01-02T15:04:05Z), or an age such as 72h, 90m or 7d. It returns at once
with the job's id; the promoter does the work, page by page, and resumes it
after a crash. --wait follows the job until it is done; --status ID shows a
job. One cleanup runs at a time.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (olderThan == "") == (follow == "") {
				return usageError{fmt.Errorf("give one of --older-than or --status")}
			}
			var job *triagetype.Cleanup
			var err error
			if follow != "" {
				job, err = c.client().GetCleanup(cmd.Context(), follow)
			} else {
				before, perr := parseOlderThan(olderThan, time.Now())
				if perr != nil {
					return usageError{perr}
				}
				job, err = c.client().StartCleanup(cmd.Context(), before)
				if err == nil && !c.json {
					fmt.Fprintf(c.out, "cleanup %s started: deleting tasks that finished before %s\n", job.ID, job.OlderThan.UTC().Format(time.RFC3339))
				}
			}
			for err == nil && wait && job.State != triagetype.CleanupDone {
				select {
				case <-cmd.Context().Done():
					return cmd.Context().Err()
				case <-time.After(time.Second):
				}
				job, err = c.client().GetCleanup(cmd.Context(), job.ID)
			}
			if err != nil {
				return err
			}
			if c.json {
				return c.printJSON(job)
			}
			fmt.Fprintf(c.out, "cleanup %s %s: %d %s deleted\n", job.ID, job.State, job.Deleted, plural(int(job.Deleted), "task", "tasks"))
			return nil
		},
	}
	cmd.Flags().StringVar(&olderThan, "older-than", "", "RFC 3339 time, or an age like 72h or 7d")
	cmd.Flags().BoolVar(&wait, "wait", false, "follow the job until it is done")
	cmd.Flags().StringVar(&follow, "status", "", "show cleanup job ID (with --wait, until it is done)")
	return cmd
}

// parseOlderThan reads an RFC 3339 time, or an age before now in Go's
// duration syntax plus whole days ("7d"), since retention is thought of
// in days.
func parseOlderThan(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil {
			return time.Time{}, fmt.Errorf("--older-than %q: want an RFC 3339 time or an age like 72h or 7d", s)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return time.Time{}, fmt.Errorf("--older-than %q: want an RFC 3339 time or an age like 72h or 7d", s)
		}
	}
	if d <= 0 {
		return time.Time{}, fmt.Errorf("--older-than %q: the age must be positive", s)
	}
	return now.Add(-d), nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
