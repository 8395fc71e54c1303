package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/triagehq/triage/client"
)

// cli holds the global flags and output streams.
type cli struct {
	url, token string
	json       bool
	out, err   io.Writer
}

func newRoot(out, errOut io.Writer) *cobra.Command {
	c := &cli{out: out, err: errOut}
	root := &cobra.Command{
		Use:           "triage",
		Short:         "A serverless priority task dispatcher for AWS",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(out)
	root.SetErr(errOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	pf := root.PersistentFlags()
	pf.StringVar(&c.url, "url", envOr("TRIAGE_URL", "http://127.0.0.1:8080"), "API base URL (env TRIAGE_URL)")
	pf.StringVar(&c.token, "token", os.Getenv("TRIAGE_TOKEN"), "bearer token (env TRIAGE_TOKEN)")
	pf.BoolVar(&c.json, "json", false, "print JSON instead of tables")
	root.AddCommand(c.devCmd(), c.submitCmd(), c.getCmd(), c.waitCmd())
	return root
}

func (c *cli) client() *client.Client { return client.New(c.url, c.token) }

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func (c *cli) printJSON(v any) error {
	enc := json.NewEncoder(c.out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printTask prints a task as JSON or as a short table.
func (c *cli) printTask(t *client.Task) error {
	if c.json {
		return c.printJSON(t)
	}
	fmt.Fprintf(c.out, "id:        %s\ntype:      %s\nstatus:    %s\npriority:  %s (effective %s)\nattempts:  %d of %d\n",
		t.ID, t.Type, t.Status, t.Priority, t.EffectivePriority, t.Attempts, t.MaxAttempts)
	if len(t.Result) > 0 {
		fmt.Fprintf(c.out, "result:    %s\n", t.Result)
	}
	if t.Error != nil {
		fmt.Fprintf(c.out, "error:     %s (retriable %v)\n", t.Error.Message, t.Error.Retriable)
	}
	return nil
}
