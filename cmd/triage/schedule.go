package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/triagehq/triage"
)

// scheduleCmd is `triage schedule`: the periodic tasks (package schedule).
func (c *cli) scheduleCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedule",
		Short: "Periodic tasks: create, list, get, pause, resume and delete cron schedules",
		Long: "A schedule enqueues one task every time its 5-field cron expression fires in its time\n" +
			"zone, exactly once per tick however many promoters run. The promoter ticks schedules\n" +
			"every run (each minute on AWS; triage dev runs its own).",
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(c.scheduleCreateCmd(), c.scheduleListCmd(), c.scheduleGetCmd(),
		c.schedulePauseCmd(true), c.schedulePauseCmd(false), c.scheduleDeleteCmd())
	return cmd
}

func (c *cli) scheduleCreateCmd() *cobra.Command {
	var s triage.Schedule
	var payload string
	var maxAttempts, timeout int
	cmd := &cobra.Command{
		Use:   "create NAME --cron EXPR --type TYPE [--timezone ZONE] [--payload JSON] [--priority P]",
		Short: "Create a schedule, or replace the one of that name",
		Long: `Create a schedule, or replace the one of that name (its next tick is kept
when the expression, zone and dst-gap are unchanged).

  triage schedule create nightly-cleanup --cron "0 2 * * *" --timezone Europe/Berlin \
      --type cleanup --payload '{"older_than_days":30}' --priority low

DST: an expression whose hour field is every hour ("*/15 * * * *") fires at every
real matching minute; any other fires once per wall-clock time: once in a repeated
hour, and a time the clocks skip runs shifted by the gap unless --dst-gap skip.
Missed ticks (more than 3 min late) are skipped unless --missed catch_up, which
enqueues the newest --catch-up-limit of them.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s.Name = args[0]
			if payload != "" {
				if !json.Valid([]byte(payload)) {
					return usageError{fmt.Errorf("--payload is not valid JSON")}
				}
				s.Task.Payload = json.RawMessage(payload)
			}
			if cmd.Flags().Changed("max-attempts") {
				s.Task.MaxAttempts = &maxAttempts
			}
			if cmd.Flags().Changed("timeout") {
				s.Task.TimeoutSeconds = &timeout
			}
			got, created, err := c.client().PutSchedule(cmd.Context(), s)
			if err != nil {
				return err
			}
			if c.json {
				return c.printJSON(got)
			}
			verb := "replaced"
			if created {
				verb = "created"
			}
			fmt.Fprintf(c.out, "%s schedule %s: %s\n", verb, got.Name, scheduleLine(got))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&s.Cron, "cron", "", `5-field cron expression: minute hour day-of-month month day-of-week ("0 2 * * *")`)
	f.StringVar(&s.Timezone, "timezone", "", "IANA time zone (default UTC)")
	f.StringVar(&s.Task.Type, "type", "", "the task type each tick enqueues")
	f.StringVar(&payload, "payload", "", "the task's JSON payload (at most 3 KiB)")
	f.StringVar((*string)(&s.Task.Priority), "priority", "", "high, medium (default) or low")
	f.IntVar(&maxAttempts, "max-attempts", 0, "attempts per task (default 3)")
	f.IntVar(&timeout, "timeout", 0, "seconds per attempt (default 300)")
	f.StringVar(&s.Missed, "missed", "", "missed ticks: skip (default) or catch_up")
	f.IntVar(&s.CatchUpLimit, "catch-up-limit", 0, "with --missed catch_up: the most missed ticks enqueued (default 10, at most 100)")
	f.StringVar(&s.DSTGap, "dst-gap", "", "a time the clocks skip: run (shifted by the gap; default) or skip")
	f.BoolVar(&s.Paused, "paused", false, "create it paused")
	return cmd
}

// scheduleLine is a schedule in one line: expression, zone, task, state.
func scheduleLine(s *triage.Schedule) string {
	state := "paused"
	if !s.Paused && s.NextTick != nil {
		state = "next " + fmtTime(*s.NextTick)
	}
	return fmt.Sprintf("%q %s → %s (%s)", s.Cron, s.Timezone, s.Task.Type, state)
}

func (c *cli) scheduleListCmd() *cobra.Command {
	var limit int
	var cursor string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List schedules by name",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := c.client().ListSchedules(cmd.Context(), limit, cursor)
			if err != nil {
				return err
			}
			if c.json {
				return c.printJSON(p)
			}
			tw := c.table("NAME", "CRON", "TIMEZONE", "TYPE", "NEXT TICK", "LAST TASK")
			for _, s := range p.Schedules {
				next := "paused"
				if !s.Paused && s.NextTick != nil {
					next = fmtTime(*s.NextTick)
				}
				last := s.LastTaskID
				if last == "" {
					last = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Cron, s.Timezone, s.Task.Type, next, last)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if p.Cursor != "" {
				fmt.Fprintf(c.out, "more: --cursor %s\n", p.Cursor)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 0, "page size, 1 to 100 (default 100)")
	cmd.Flags().StringVar(&cursor, "cursor", "", "the previous page's cursor")
	return cmd
}

func (c *cli) scheduleGetCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "get NAME",
		Short: "Show a schedule",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := c.client().GetSchedule(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return c.printJSON(s)
		},
	}
}

func (c *cli) schedulePauseCmd(pause bool) *cobra.Command {
	use, short := "resume NAME", "Resume a paused schedule at its next tick after now"
	if pause {
		use, short = "pause NAME", "Pause a schedule: it enqueues nothing until resumed"
	}
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var s *triage.Schedule
			var err error
			if pause {
				s, err = c.client().PauseSchedule(cmd.Context(), args[0])
			} else {
				s, err = c.client().ResumeSchedule(cmd.Context(), args[0])
			}
			if err != nil {
				return err
			}
			if c.json {
				return c.printJSON(s)
			}
			fmt.Fprintf(c.out, "schedule %s: %s\n", s.Name, scheduleLine(s))
			return nil
		},
	}
}

func (c *cli) scheduleDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a schedule (the tasks it made stay)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := c.client().DeleteSchedule(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(c.out, "deleted schedule %s\n", args[0])
			return nil
		},
	}
}
