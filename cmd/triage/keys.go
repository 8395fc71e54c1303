package main

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/triagetype"
)

// keyCmd builds `key`: pause, resume or limit one fairness key.
func (c *cli) keyCmd() *cobra.Command {
	var typ string
	var pause, resume bool
	var rate float64
	var conc, weight int
	cmd := &cobra.Command{
		Use:   "key KEY [--type T] [--pause|--resume] [--rate F] [--max-concurrency N] [--weight W]",
		Short: "Pause, resume or limit one fairness key (a tenant)",
		Long: `Set the controls of fairness key KEY: of its tasks of every type, or with
--type of that type's tasks only. --rate is task starts per second across
all consumers, --max-concurrency its tasks running at once; 0 removes a
limit, and a setting not given is kept. Tasks that cannot start are set
aside without an SQS message and start in submit order when they can (with
only a rate limit, a new task may take a window's room before them).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if pause && resume {
				return usageError{fmt.Errorf("--pause and --resume cannot be combined")}
			}
			r := triagetype.KeyControlsRequest{Type: typ}
			if pause || resume {
				r.Paused = &pause
			}
			if cmd.Flags().Changed("rate") {
				r.RateLimitPerSecond = &rate
			}
			if cmd.Flags().Changed("max-concurrency") {
				r.MaxConcurrency = &conc
			}
			if cmd.Flags().Changed("weight") {
				r.Weight = &weight
			}
			s, err := c.client().SetKeyControls(cmd.Context(), args[0], r)
			if err != nil {
				return err
			}
			return c.printControls([]triagetype.ControlSettings{*s})
		},
	}
	f := cmd.Flags()
	f.StringVar(&typ, "type", "", "only this task type's tasks of the key")
	f.BoolVar(&pause, "pause", false, "pause the key")
	f.BoolVar(&resume, "resume", false, "resume the key")
	f.Float64Var(&rate, "rate", 0, "task starts per second (0: no limit)")
	f.IntVar(&conc, "max-concurrency", 0, "tasks running at once (0: no limit)")
	f.IntVar(&weight, "weight", 0, "the key's share of each priority's starts against other keys (0: the default, 1)")
	return cmd
}

// printKeyStats prints the keys section of `triage stats`: the keys
// running the most (and their starts and finishes a second), and the keyed limits with their use (running tasks,
// the rate window's starts); nothing when only the default key runs and
// none has controls (a deployment that uses no keys sees no key table).
func (c *cli) printKeyStats(k *triagetype.KeyStats) error {
	if k == nil || len(k.Limits) == 0 && !slices.ContainsFunc(k.Top, func(r triagetype.KeyRunning) bool { return r.Key != triage.DefaultKey }) {
		return nil
	}
	fmt.Fprintln(c.out)
	tw := c.table("KEY", "RUNNING", "STARTS/S", "FINISHES/S")
	for _, r := range k.Top {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\n", r.Key, r.Running, r.StartsPerSecond, r.FinishesPerSecond)
	}
	if k.OtherRunning > 0 {
		fmt.Fprintf(tw, "(other keys)\t%d\n", k.OtherRunning)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(k.Limits) == 0 {
		return nil
	}
	fmt.Fprintln(c.out)
	tw = c.table("KEYED LIMIT", "PAUSED", "RUNNING", "MAX CONCURRENCY", "RATE/S", "STARTS THIS WINDOW")
	for _, l := range k.Limits {
		s, conc, rate, starts := l.Controls, "-", "-", "-"
		name := "key=" + s.Key
		if s.Type != "" {
			name = s.Type + " " + name
		}
		if s.MaxConcurrency > 0 {
			conc = strconv.Itoa(s.MaxConcurrency)
		}
		if s.RateLimitPerSecond > 0 {
			rate = strconv.FormatFloat(s.RateLimitPerSecond, 'g', -1, 64)
		}
		if u := l.RateUse; u != nil {
			starts = fmt.Sprintf("%d of %d in %gs", u.Starts, u.Limit, u.WindowSeconds)
		}
		fmt.Fprintf(tw, "%s\t%v\t%d\t%s\t%s\t%s\n", name, s.Paused, l.Running, conc, rate, starts)
	}
	if k.OtherLimits > 0 {
		fmt.Fprintf(tw, "(%d more)\t\t%d\t\t\t\n", k.OtherLimits, k.OtherLimitsRunning)
	}
	return tw.Flush()
}
