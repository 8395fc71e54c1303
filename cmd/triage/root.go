package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/internal/devserver"
	"github.com/triagehq/triage/triagetype"
)

// cli holds the global flags and output streams.
type cli struct {
	url, token string
	json       bool
	out, err   io.Writer
	ep         endpoint // the API the command talks to (endpoint)
	resolved   bool     // ep is set
}

func newRoot(out, errOut io.Writer) (*cli, *cobra.Command) {
	c := &cli{out: out, err: errOut}
	root := &cobra.Command{
		Use:           "triage",
		Short:         "A serverless priority task dispatcher for AWS",
		Version:       versionString(),
		SilenceUsage:  true,
		SilenceErrors: true,
		// With Args and RunE set, an unknown command reaches Args (and
		// exits 2) instead of cobra's own plain error (which would exit 1).
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unknown command %q; see triage --help", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
		// Every command that calls the API finds it here, so an ambiguous
		// choice (several dev servers, none named) fails before any request.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if !callsAPI(cmd) {
				return nil
			}
			_, err := c.resolveEndpoint()
			return err
		},
	}
	root.SetOut(out)
	root.SetErr(errOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	pf := root.PersistentFlags()
	// Defaults from the environment are read when a command runs, never
	// shown in help: a token must not appear on every --help page. No
	// backquotes in flag usages: pflag shows a backquoted word as the
	// flag's value placeholder ("--url triage dev").
	pf.StringVar(&c.url, "url", "", "API base URL (default $TRIAGE_URL, then the running triage dev's, then "+defaultURL+")")
	pf.StringVar(&c.token, "token", "", "bearer token (default $TRIAGE_TOKEN, then the running triage dev's when the URL is its own)")
	pf.BoolVar(&c.json, "json", false, "print JSON instead of tables")
	root.AddCommand(c.devCmd(), c.submitCmd(), c.getCmd(), c.waitCmd(),
		c.listCmd(), c.cancelCmd(), c.signalCmd(), c.retryCmd(), c.deleteCmd(), c.cleanupCmd(),
		c.statsCmd(), c.pauseCmd(true), c.pauseCmd(false), c.limitsCmd(), c.keyCmd(), c.dlqCmd(),
		c.workersCmd(), c.envCmd(), c.workflowCmd(), c.batchCmd(), c.tokensCmd())
	root.AddCommand(c.scheduleCmd())
	usageArgs(root)
	return c, root
}

// usageArgs makes every command's argument-count errors usage errors, so
// `triage get` (no id) exits 2 like a bad flag does, not 1 like a failed
// request.
func usageArgs(cmd *cobra.Command) {
	if check := cmd.Args; check != nil {
		cmd.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return usageError{err}
			}
			return nil
		}
	}
	for _, sub := range cmd.Commands() {
		usageArgs(sub)
	}
}

const defaultURL = "http://127.0.0.1:8080"

// callsAPI reports whether cmd talks to the API: not the root (its help),
// cobra's help and completion commands, nor one marked annotNoAPI.
func callsAPI(cmd *cobra.Command) bool {
	if !cmd.HasParent() || cmd.Annotations[annotNoAPI] != "" || cmd.Name() == "help" {
		return false
	}
	return cmd.Name() != "completion" && cmd.Parent().Name() != "completion"
}

// annotNoAPI marks a command that does not call the API (dev, help): it
// needs no endpoint, so several running dev servers are no error for it.
const annotNoAPI = "triage/no-api"

func (c *cli) client() *triage.Client {
	ep := c.endpoint()
	return triage.NewClient(triage.HTTP(ep.url, ep.token))
}

// endpoint is the API a command talks to.
type endpoint struct {
	url, token string
	devFile    string // the settings file the URL came from, if it did
}

// endpoint is the API the command talks to, resolved once (by the root's
// PersistentPreRunE for every command that calls the API, or here on first
// use); an error when several dev servers run and none was chosen.
func (c *cli) endpoint() endpoint {
	if !c.resolved {
		c.ep, _ = c.resolveEndpoint()
	}
	return c.ep
}

// resolveEndpoint resolves the flags, the environment and the running
// dev servers' settings files, and keeps the result.
func (c *cli) resolveEndpoint() (endpoint, error) {
	ep, err := resolveEndpoint(c.url, c.token, os.Getenv, devServers)
	c.ep, c.resolved = ep, true
	return ep, err
}

// resolveEndpoint takes the URL from --url, else TRIAGE_URL, else the
// settings file of the one running `triage dev`, else the dev server's
// default address; and the token from --token, else TRIAGE_TOKEN, else the
// settings file of the dev server at that URL: with TRIAGE_URL pointing at
// another server and no token set, a dev token must not be sent there.
// With several dev servers running and no URL given, it names them and
// asks for a choice rather than guess.
func resolveEndpoint(flagURL, flagToken string, getenv func(string) string, servers func() []devserver.Server) (endpoint, error) {
	ep := endpoint{url: cmp.Or(flagURL, getenv("TRIAGE_URL")), token: cmp.Or(flagToken, getenv("TRIAGE_TOKEN"))}
	if ep.url != "" && ep.token != "" {
		return ep, nil
	}
	all := servers()
	if ep.url == "" {
		s, err := pickServer(all)
		if err != nil {
			return endpoint{url: defaultURL, token: ep.token}, err
		}
		if s == nil {
			ep.url = defaultURL
			return ep, nil
		}
		ep.url, ep.devFile = s.URL, s.Path
	}
	if ep.token == "" {
		for _, s := range all {
			if sameURL(s.URL, ep.url) {
				ep.token = s.Token
				break
			}
		}
	}
	return ep, nil
}

// pickServer is the dev server a command talks to when no URL is given:
// the one that runs; nil when none does (the left-over file of a single
// killed server is still taken, so the no-answer hint can name it).
func pickServer(all []devserver.Server) (*devserver.Server, error) {
	var live []devserver.Server
	for _, s := range all {
		if s.URL != "" && s.Alive() {
			live = append(live, s)
		}
	}
	switch {
	case len(live) == 1:
		return &live[0], nil
	case len(live) > 1:
		urls := make([]string, len(live))
		for i, s := range live {
			urls[i] = s.URL
		}
		return nil, usageError{fmt.Errorf("%d triage dev servers are running (%s): choose one with --url or TRIAGE_URL", len(live), strings.Join(urls, ", "))}
	case len(all) == 1 && all[0].URL != "":
		return &all[0], nil
	}
	return nil, nil
}

// envURL is TRIAGE_URL.
func envURL() string { return os.Getenv("TRIAGE_URL") }

// sameURL compares base URLs as the user may write them, with or without
// the trailing slash.
func sameURL(a, b string) bool { return strings.TrimRight(a, "/") == strings.TrimRight(b, "/") }

// devServers reads the settings files the running dev servers keep in the
// state directory (devserver.Servers); an unreadable directory counts as none.
func devServers() []devserver.Server {
	s, _ := devserver.Servers(devserver.StateDir())
	return s
}

func (c *cli) printJSON(v any) error {
	enc := json.NewEncoder(c.out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printTask prints a task as JSON or as a short table.
func (c *cli) printTask(t *triage.Task) error {
	if c.json {
		return c.printJSON(t)
	}
	fmt.Fprintf(c.out, "id:        %s\ntype:      %s\nstatus:    %s\npriority:  %s (effective %s)\nattempts:  %d of %d\ncreated:   %s\n",
		t.ID, t.Type, t.Status, t.Priority, t.EffectivePriority, t.Attempts, t.MaxAttempts, fmtTime(t.CreatedAt))
	if t.RunAt != nil {
		fmt.Fprintf(c.out, "run at:    %s\n", fmtTime(*t.RunAt))
	}
	if t.CompletedAt != nil {
		fmt.Fprintf(c.out, "finished:  %s\n", fmtTime(*t.CompletedAt))
	}
	if p := t.Progress; p != nil {
		fmt.Fprintf(c.out, "progress:  %d%%", p.Percent)
		if p.Message != "" {
			fmt.Fprintf(c.out, " %s", p.Message)
		}
		fmt.Fprintf(c.out, " (attempt %d, %s)\n", p.Attempt, fmtTime(p.UpdatedAt))
	}
	if len(t.Checkpoint) > 0 {
		fmt.Fprintf(c.out, "checkpoint: %d bytes\n", len(t.Checkpoint))
	}
	if s := t.Suspend; s != nil {
		what := "sleeping"
		if s.Signal != "" {
			what = fmt.Sprintf("waiting for signal %q", s.Signal)
		}
		fmt.Fprintf(c.out, "suspended: %s until %s\n", what, fmtTime(s.WakeAt))
	}
	c.printDurable(t)
	// The request outlives the attempt it stopped (the flag stays on the
	// record), so it is news only while the task can still run.
	if t.CancelRequested && !t.Terminal() {
		fmt.Fprintf(c.out, "cancel:    requested; the handler's context is cancelled at its next heartbeat\n")
	}
	if len(t.Result) > 0 {
		fmt.Fprintf(c.out, "result:    %s\n", t.Result)
	}
	if t.Error != nil {
		fmt.Fprintf(c.out, "error:     %s (retriable %v)\n", t.Error.Message, t.Error.Retriable)
	}
	return nil
}

// printDurable lists t's durable life: its steps in the order met (a run
// step's outcome, run time and result size; a sleep's wake time; a signal
// wait's timeout or its signal's arrival), then the signals delivered.
func (c *cli) printDurable(t *triage.Task) {
	if len(t.Steps) > 0 {
		fmt.Fprintln(c.out, "steps:")
		tw := tabwriter.NewWriter(c.out, 0, 0, 2, ' ', 0)
		for _, st := range t.Steps {
			kind, detail := st.Kind, ""
			switch st.Kind {
			case triagetype.StepRun:
				detail = fmt.Sprintf("ran %s, result %s", fmtMS(st.DurationMS), fmtBytes(st.ResultSize))
				if st.Error != "" {
					detail = fmt.Sprintf("ran %s: %s", fmtMS(st.DurationMS), truncate(st.Error, 60))
				}
			case triagetype.StepSleep:
				detail = "until " + fmtTimePtr(st.Until)
			case triagetype.StepWait:
				detail = "for signal " + st.Signal + ", times out " + fmtTimePtr(st.Until)
			case triagetype.StepSignal:
				kind = triagetype.StepWait
				if st.TimedOut {
					detail = "no signal " + st.Signal + " by " + fmtTimePtr(st.Until)
				} else {
					detail = fmt.Sprintf("signal %s, payload %s", st.Signal, fmtBytes(st.ResultSize))
					if sg, ok := signalNamed(t.Signals, st.Signal); ok {
						detail = fmt.Sprintf("signal %s arrived %s, payload %s", st.Signal, fmtTime(sg.At), fmtBytes(st.ResultSize))
					}
				}
			}
			outcome := st.Outcome()
			if s := t.Suspend; s != nil && s.Kind == triagetype.StepSleep && st.Kind == triagetype.StepSleep && st.Until != nil && st.Until.Equal(s.WakeAt) {
				outcome = "sleeping"
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s (attempt %d, %s)\n", st.Seq+1, st.Name, kind, outcome, detail, st.Attempt, fmtTime(st.At))
		}
		tw.Flush()
	}
	if len(t.Signals) > 0 {
		fmt.Fprintln(c.out, "signals:")
		tw := tabwriter.NewWriter(c.out, 0, 0, 2, ' ', 0)
		for _, sg := range t.Signals {
			fmt.Fprintf(tw, "  %s\tarrived %s\tpayload %s\n", sg.Name, fmtTime(sg.At), fmtBytes(len(sg.Payload)))
		}
		tw.Flush()
	}
}

// signalNamed is the signal of that name among sigs.
func signalNamed(sigs []triagetype.Signal, name string) (triagetype.Signal, bool) {
	for _, sg := range sigs {
		if sg.Name == name {
			return sg, true
		}
	}
	return triagetype.Signal{}, false
}

// fmtMS shows a step's run time: milliseconds under 10 s, then seconds.
func fmtMS(ms int64) string {
	if ms < 10_000 {
		return fmt.Sprintf("%d ms", ms)
	}
	return (time.Duration(ms) * time.Millisecond).Round(100 * time.Millisecond).String()
}

// fmtBytes shows a size in bytes, KiB or MiB.
func fmtBytes(n int) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/1024)
	}
	return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
}

// fmtTimePtr is fmtTime of a time that may be unset.
func fmtTimePtr(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return fmtTime(*t)
}

// table starts a tab-aligned table with a header row; the caller writes
// tab-separated rows and calls Flush.
func (c *cli) table(header ...string) *tabwriter.Writer {
	tw := tabwriter.NewWriter(c.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	return tw
}

// fmtTime shows a time in UTC to the second: tables stay narrow and read
// the same on every machine.
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

// truncate shortens s to n runes for a table cell.
func truncate(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
