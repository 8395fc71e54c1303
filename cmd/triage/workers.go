package main

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/triagehq/triage/triagetype"
)

func (c *cli) workersCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "workers",
		Short: "List consumer instances: kind, state (active, draining, dead), heartbeat and busy slots",
		Long: "List the consumer instances in the worker registry, oldest first. Each heartbeats every\n" +
			"10 s; one that misses 3 heartbeats in a row shows dead, and stays listed for 5 min.\n" +
			"An instance that stops cleanly leaves the list.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := c.client().ListWorkers(cmd.Context())
			if err != nil {
				return err
			}
			if c.json {
				return c.printJSON(l)
			}
			tw := c.table("ID", "KIND", "STATE", "BUSY", "STARTED", "LAST HEARTBEAT", "KEYS")
			for _, w := range l.Workers {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\n", w.ID, w.Kind, w.State, w.Busy, w.Capacity,
					fmtTime(w.StartedAt), fmtSince(l.GeneratedAt, w.LastHeartbeatAt), fmtKeys(w, 3))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintln(c.out, workersLine(triagetype.SummarizeWorkers(l.Workers)))
			return nil
		},
	}
}

// workersLine sums the workers in one line, as `triage stats` shows them.
func workersLine(s triagetype.WorkerStats) string {
	return fmt.Sprintf("workers: %d active, %d draining, %d dead; %d of %d slots busy", s.Active, s.Draining, s.Dead, s.Used, s.Capacity)
}

// fmtSince is how long before now t was, to the second ("3s ago").
func fmtSince(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return fmt.Sprintf("%s ago", max(now.Sub(t), 0).Round(time.Second))
}

// fmtKeys is a worker's n keys running most, "acme:2 free:1", and "+k" for
// the running tasks of the rest; "-" when it runs none.
func fmtKeys(w triagetype.WorkerInfo, n int) string {
	ks := slices.SortedFunc(maps.Keys(w.Keys), func(a, b string) int {
		if c := cmp.Compare(w.Keys[b], w.Keys[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	var parts []string
	rest := w.KeysOther
	for i, k := range ks {
		if i < n {
			parts = append(parts, fmt.Sprintf("%s:%d", k, w.Keys[k]))
		} else {
			rest += w.Keys[k]
		}
	}
	if rest > 0 {
		parts = append(parts, fmt.Sprintf("+%d", rest))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}
