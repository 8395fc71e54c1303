package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/triagehq/triage/internal/devserver"
)

// envCmd prints, as shell exports, what a worker of one's own needs to run
// beside a `triage dev`: the settings file that server wrote (its
// emulators' endpoints, region, credentials, resource prefix, API URL and
// token), so `eval "$(triage env)"; go run ./myworker` finds the same
// queues and table as the server.
func (c *cli) envCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "env",
		Short: "Print a running triage dev's settings for your own worker, as shell exports",
		Long: `Print, as shell exports, the settings a worker needs to run beside a
running triage dev: the AWS endpoints of its emulators (SQS, DynamoDB,
DynamoDB Streams, S3), the region and credentials, TRIAGE_PREFIX (the
resources' names), and the API's TRIAGE_URL and TRIAGE_TOKEN:

  eval "$(triage env)"
  go run ./myworker

With several dev servers running, --url or TRIAGE_URL picks one.`,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{annotNoAPI: "true"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := devServerFor(c.url, devServers())
			if err != nil {
				return err
			}
			for _, kv := range s.WorkerEnv() {
				fmt.Fprintf(c.out, "export %s=%s\n", kv[0], shellQuote(kv[1]))
			}
			return nil
		},
	}
}

// errNoDevServer means no running `triage dev` matched.
var errNoDevServer = errors.New("no triage dev is running")

// devServerFor is the running dev server at url (--url, else TRIAGE_URL),
// or, with neither, the one running (pickServer).
func devServerFor(url string, all []devserver.Server) (*devserver.Server, error) {
	if url == "" {
		url = envURL()
	}
	if url == "" {
		s, err := pickServer(all)
		if err == nil && s == nil {
			err = fmt.Errorf("%w: start one with `triage dev` (or `make run` in a checkout)", errNoDevServer)
		}
		return s, err
	}
	for _, s := range all {
		if sameURL(s.URL, url) && s.Alive() {
			return &s, nil
		}
	}
	return nil, fmt.Errorf("%w at %s", errNoDevServer, url)
}

// shellQuote quotes s for a POSIX shell: as is when it is made of safe
// characters only, otherwise in single quotes.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=@,+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
