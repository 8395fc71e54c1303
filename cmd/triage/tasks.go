package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/triagehq/triage/client"
)

func (c *cli) submitCmd() *cobra.Command {
	var r client.SubmitRequest
	var payload string
	var maxAttempts, timeout, delay int
	cmd := &cobra.Command{
		Use:   "submit --type TYPE [--payload JSON] [--priority high|medium|low]",
		Short: "Submit a task",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if r.Type == "" {
				return usageError{fmt.Errorf("--type is required")}
			}
			if payload != "" {
				if !json.Valid([]byte(payload)) {
					return usageError{fmt.Errorf("--payload is not valid JSON")}
				}
				r.Payload = json.RawMessage(payload)
			}
			if cmd.Flags().Changed("max-attempts") {
				r.MaxAttempts = &maxAttempts
			}
			if cmd.Flags().Changed("timeout") {
				r.TimeoutSeconds = &timeout
			}
			if cmd.Flags().Changed("delay") {
				r.DelaySeconds = &delay
			}
			t, created, err := c.client().Submit(cmd.Context(), r)
			if err != nil {
				return err
			}
			if c.json {
				return c.printJSON(t)
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
	f.StringVar(&r.Type, "type", "", "task type (required)")
	f.StringVar(&payload, "payload", "", "JSON payload")
	f.StringVar(&r.Priority, "priority", "", "high, medium or low (default medium)")
	f.IntVar(&maxAttempts, "max-attempts", 3, "attempts before the task is dead-lettered")
	f.IntVar(&timeout, "timeout", 300, "seconds an attempt may run")
	f.IntVar(&delay, "delay", 0, "seconds to wait before the task may run")
	f.StringVar(&r.IdempotencyKey, "idempotency-key", "", "key that makes a repeated submit return the first task")
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
		Use:   "wait ID...",
		Short: "Wait until tasks finish; exit 6 if any did not complete",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if timeout > 0 {
				var cancel func()
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			incomplete := 0
			for _, id := range args {
				t, err := c.client().Wait(ctx, id, 200*time.Millisecond)
				if err != nil {
					return err
				}
				if t.Status != "completed" {
					incomplete++
				}
				if err := c.printTask(t); err != nil {
					return err
				}
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
