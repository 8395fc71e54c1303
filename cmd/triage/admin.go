package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/triagetype"
)

// priorityOrder and statusOrder are the order people read them in.
func priorityOrder() []string { return names(triagetype.Priorities()) }

func statusOrder() []string { return names(triagetype.Statuses()) }

func names[S ~string](ss []S) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}

func (c *cli) statsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "stats",
		Short: "Show queue depths, task counts and throughput",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := c.client().GetStats(cmd.Context())
			if err != nil {
				return err
			}
			if c.json {
				return c.printJSON(s)
			}
			if err := c.printQueues(s.Queues); err != nil {
				return err
			}
			fmt.Fprintln(c.out)
			tw := c.table("STATUS", "TASKS")
			for _, st := range ordered(statusOrder(), keys(s.Statuses)) {
				fmt.Fprintf(tw, "%s\t%d\n", st, s.Statuses[triage.Status(st)])
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if len(s.Types) > 0 {
				// Only the statuses some type has, so the table stays narrow.
				var present []string
				for _, counts := range s.Types {
					present = append(present, keys(counts)...)
				}
				cols := ordered(statusOrder(), present)
				fmt.Fprintln(c.out)
				tw = c.table(append([]string{"TYPE"}, upper(cols)...)...)
				for _, typ := range slices.Sorted(slices.Values(keys(s.Types))) {
					row := []string{typ}
					for _, st := range cols {
						row = append(row, strconv.Itoa(s.Types[typ][triage.Status(st)]))
					}
					fmt.Fprintln(tw, strings.Join(row, "\t"))
				}
				if err := tw.Flush(); err != nil {
					return err
				}
			}
			if s.Workers != nil {
				fmt.Fprintf(c.out, "\n%s\n", workersLine(*s.Workers))
			}
			if err := c.printKeyStats(s.Keys); err != nil {
				return err
			}
			fmt.Fprintf(c.out, "\nlast minute: %d completed, %d failed\nas of %s\n",
				s.Throughput.CompletedLastMinute, s.Throughput.FailedLastMinute, fmtTime(s.GeneratedAt))
			return nil
		},
	}
}

// printQueues prints the queue table of `triage stats`: per priority the
// SQS counts, the oldest waiting task's age, and the median and 99th
// percentile wait of the tasks that started in the last 5 minutes (each an
// upper bound within a factor of 2; see triagetype.QueueStats). An age or wait
// with nothing to measure (no task waiting, none started) shows "-".
func (c *cli) printQueues(qs map[triage.Priority]triagetype.QueueStats) error {
	tw := c.table("QUEUE", "DEPTH", "IN FLIGHT", "DELAYED", "DLQ", "OLDEST", "WAIT P50", "WAIT P99")
	for _, p := range ordered(priorityOrder(), keys(qs)) {
		q := qs[triage.Priority(p)]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", p, q.Depth, q.InFlight, q.Delayed, q.DLQDepth,
			fmtAge(q.OldestAgeSeconds), fmtAge(q.WaitP50Seconds), fmtAge(q.WaitP99Seconds))
	}
	return tw.Flush()
}

// keys returns m's keys (order unspecified; callers order them).
func keys[K ~string, V any](m map[K]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, string(k))
	}
	return out
}

// ordered lists have in the order of want, then any others sorted, so a
// status or priority the CLI does not know yet still shows.
func ordered(want, have []string) []string {
	var out []string
	for _, w := range want {
		if slices.Contains(have, w) && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	rest := slices.Sorted(slices.Values(have))
	for _, h := range slices.Compact(rest) {
		if !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out
}

func upper(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strings.ToUpper(s)
	}
	return out
}

func fmtAge(sec float64) string {
	if sec <= 0 {
		return "-"
	}
	d := time.Duration(sec * float64(time.Second))
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// pauseCmd builds `pause` (paused true) or `resume`.
func (c *cli) pauseCmd(paused bool) *cobra.Command {
	var typ string
	use, short, verb := "pause", "Stop starting tasks, of every type or of one", "paused"
	if !paused {
		use, short, verb = "resume", "Start tasks again after pause", "resumed"
	}
	cmd := &cobra.Command{
		Use:   use + " [--type T]",
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl := c.client()
			set := cl.PauseType
			if !paused {
				set = cl.ResumeType
			}
			s, err := set(cmd.Context(), typ)
			if err != nil {
				return err
			}
			if c.json {
				return c.printJSON(s)
			}
			if typ == "" {
				fmt.Fprintf(c.out, "%s all task types\n", verb)
			} else {
				fmt.Fprintf(c.out, "%s task type %s\n", verb, typ)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&typ, "type", "", "only this task type (default: every type)")
	return cmd
}

func (c *cli) limitsCmd() *cobra.Command {
	var rate float64
	var conc int
	cmd := &cobra.Command{
		Use:   "limits [TYPE [--rate F] [--max-concurrency N]]",
		Short: "Show pause and limit settings, or set a type's limits",
		Long: `With no arguments, list the controls: the global one, then every type's.

With TYPE, set that type's limits: --rate is task starts per second across
all consumers, --max-concurrency the tasks of the type running at once; 0
removes a limit. A limit not given keeps its current value. TYPE alone shows
the type's settings.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl := c.client()
			rateSet, concSet := cmd.Flags().Changed("rate"), cmd.Flags().Changed("max-concurrency")
			if len(args) == 0 && (rateSet || concSet) {
				return usageError{fmt.Errorf("limits are per task type: triage limits TYPE --rate F --max-concurrency N")}
			}
			if rate < 0 || conc < 0 {
				return usageError{fmt.Errorf("limits must not be negative (0 removes one)")}
			}
			controls, err := cl.ListControls(cmd.Context())
			if err != nil {
				return err
			}
			if len(args) == 0 {
				return c.printControls(controls)
			}
			typ := args[0]
			cur := triagetype.ControlSettings{Type: typ}
			for _, s := range controls {
				if s.Type == typ && s.Key == "" {
					cur = s
				}
			}
			if !rateSet && !concSet {
				return c.printControls([]triagetype.ControlSettings{cur})
			}
			// The API sets both limits at once; keep the one not given.
			if !rateSet {
				rate = cur.RateLimitPerSecond
			}
			if !concSet {
				conc = cur.MaxConcurrency
			}
			s, err := cl.SetLimits(cmd.Context(), typ, triagetype.LimitsRequest{RateLimitPerSecond: rate, MaxConcurrency: conc})
			if err != nil {
				return err
			}
			return c.printControls([]triagetype.ControlSettings{*s})
		},
	}
	cmd.Flags().Float64Var(&rate, "rate", 0, "task starts per second (0: no limit)")
	cmd.Flags().IntVar(&conc, "max-concurrency", 0, "tasks running at once (0: no limit)")
	return cmd
}

func (c *cli) printControls(cs []triagetype.ControlSettings) error {
	if c.json {
		return c.printJSON(cs)
	}
	tw := c.table("TYPE", "PAUSED", "RATE/S", "MAX CONCURRENCY")
	for _, s := range cs {
		typ, rate, conc := s.Type, "-", "-"
		switch {
		case s.Key != "" && typ != "":
			typ += " key=" + s.Key
		case s.Key != "":
			typ = "key=" + s.Key
		case typ == "":
			typ = "(global)"
		}
		if s.RateLimitPerSecond > 0 {
			rate = strconv.FormatFloat(s.RateLimitPerSecond, 'g', -1, 64)
		}
		if s.MaxConcurrency > 0 {
			conc = strconv.Itoa(s.MaxConcurrency)
		}
		fmt.Fprintf(tw, "%s\t%v\t%s\t%s\n", typ, s.Paused, rate, conc)
	}
	return tw.Flush()
}

func (c *cli) dlqCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "Read and replay the dead-letter queues",
	}
	var prio string
	var limit int
	list := &cobra.Command{
		Use:   "list [--priority P] [--limit N]",
		Short: "Show messages in the dead-letter queues",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ms, err := c.client().ListDLQ(cmd.Context(), triage.Priority(prio), limit)
			if err != nil {
				return err
			}
			if ms == nil {
				ms = []triagetype.DLQMessage{}
			}
			if c.json {
				return c.printJSON(ms)
			}
			if len(ms) == 0 {
				fmt.Fprintln(c.err, "no messages in the dead-letter queues")
				return nil
			}
			tw := c.table("PRIORITY", "MESSAGE", "TASK", "TYPE", "RECEIVES", "SENT", "REASON")
			for _, m := range ms {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", m.Priority, m.MessageID, dash(m.TaskID), dash(m.Type), m.ReceiveCount, fmtTime(m.SentAt), truncate(m.Reason, 60))
			}
			return tw.Flush()
		},
	}
	list.Flags().StringVar(&prio, "priority", "", "only this priority's DLQ (default: all three)")
	list.Flags().IntVar(&limit, "limit", 0, "most messages to show, up to 1000 (default 100)")

	var rr triagetype.ReplayRequest
	var replayPrio string
	replay := &cobra.Command{
		Use:   "replay [--priority P] [--type T] [--limit N]",
		Short: "Queue dead-lettered tasks again and delete their DLQ messages",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rr.Priority = triage.Priority(replayPrio)
			r, err := c.client().ReplayDLQ(cmd.Context(), rr)
			if err != nil {
				return err
			}
			if c.json {
				return c.printJSON(r)
			}
			fmt.Fprintf(c.out, "replayed %d %s, skipped %d %s\n", r.Replayed, plural(r.Replayed, "task", "tasks"), r.Skipped, plural(r.Skipped, "message", "messages"))
			return nil
		},
	}
	replay.Flags().StringVar(&replayPrio, "priority", "", "only this priority's DLQ")
	replay.Flags().StringVar(&rr.Type, "type", "", "only tasks of this type")
	replay.Flags().IntVar(&rr.Limit, "limit", 0, "most tasks to replay (default: the server's, 1000)")
	cmd.AddCommand(list, replay)
	return cmd
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
