package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/triagehq/triage/internal/devserver"
	"github.com/triagehq/triage/internal/emulators"
)

func (c *cli) devCmd() *cobra.Command {
	var interval time.Duration
	var noDemo, noConsumer bool
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run the API, consumer, promoter and dashboard locally, on emulators",
		Long: fmt.Sprintf(`Run all of triage in one process against a local AWS stack.

Unless AWS_ENDPOINT_URL (or all of AWS_ENDPOINT_URL_SQS,
AWS_ENDPOINT_URL_DYNAMODB and AWS_ENDPOINT_URL_S3) is set, it installs and starts the emulators
itself, on free 127.0.0.1 ports, and stops them on exit. It listens on
TRIAGE_ADDR (default 127.0.0.1:8080) and uses TRIAGE_TOKEN as the admin
token, or prints a generated one. The terminal shows warnings and errors;
the full JSON log goes to the file named in the banner, in the state
directory and named by the listen address (dev-127.0.0.1_8080.log;
TRIAGE_LOG_FORMAT=json puts it on the terminal too). The URL and token, and
the settings a worker needs (see triage env), are written beside it
(dev-127.0.0.1_8080.env), so the other commands find the running server
without TRIAGE_URL and TRIAGE_TOKEN; with several servers running, --url
or TRIAGE_URL picks one. Each server removes only its own files on exit.

To run your own worker beside it, start it with --no-demo-handlers (or
--no-consumer), then eval "$(triage env)" in the worker's shell: it sets
the emulators' endpoints, region, credentials and resource prefix. Its
consumer hands back, without spending an attempt, the tasks of types it
has no handler for while a live worker advertises them (or for
TRIAGE_UNHANDLED_AFTER, default 5m, after they were queued).
Ctrl-C hands running
tasks back to their queues (after a %s grace), then stops the emulators,
and exits 0; a second Ctrl-C stops at once.`, devserver.DrainGrace),
		Args:        cobra.NoArgs,
		Annotations: map[string]string{annotNoAPI: "true"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			// In a checkout the emulators live in its .emulators/; anywhere
			// else (a `go install`ed binary) in the user's cache.
			wd, err := os.Getwd()
			if err != nil {
				return fmt.Errorf("find the working directory: %w", err)
			}
			root, err := emulators.FindRoot(wd)
			switch {
			case errors.Is(err, emulators.ErrNoCheckout):
				root = ""
			case err != nil:
				return err
			}
			return devserver.Run(cmd.Context(), devserver.Options{
				Root: root, PromoteInterval: interval, Out: c.out,
				NoDemoHandlers: noDemo, NoConsumer: noConsumer,
			})
		},
	}
	cmd.Flags().DurationVar(&interval, "promote-interval", 0, "promoter period (default TRIAGE_PROMOTE_INTERVAL or 5s)")
	cmd.Flags().BoolVar(&noDemo, "no-demo-handlers", false, "run the consumer without the demo handlers (echo, sleep, fail, noop); the API then accepts any type unless TRIAGE_TYPES lists them")
	cmd.Flags().BoolVar(&noConsumer, "no-consumer", false, "run no consumer at all, only the API, promoter and dashboard: your own workers run every type")
	return cmd
}
