package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/triagehq/triage"
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
aside without an SQS message and start in submit order when they can.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if pause && resume {
				return usageError{fmt.Errorf("--pause and --resume cannot be combined")}
			}
			r := triage.KeyControlsRequest{Type: typ}
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
			return c.printControls([]triage.ControlSettings{*s})
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
