package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/spf13/cobra"

	"github.com/triagehq/triage/internal/auth"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/triageconfig"
)

// tokensCmd builds `tokens`: create, list and revoke the API tokens kept
// (hashed) in the table. They go to DynamoDB directly with the caller's
// AWS credentials, never through the API: no API token can mint another.
func (c *cli) tokensCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tokens",
		Short: "Create, list and revoke API tokens (with AWS credentials for the table)",
		Long: `Create, list and revoke the API's bearer tokens. They are kept in the
task table as SHA-256 hashes (at most 100), written and read directly
with your AWS credentials (the environment, shared files or a role), not
through the API. The table is TRIAGE_TABLE (a deployed stack's TableName
output), else TRIAGE_PREFIX's ("<prefix>-tasks", as triage dev names it).
The API reads the tokens at most once a minute: a token created works,
and a token revoked stops working, within a minute.`,
		Annotations: map[string]string{annotNoAPI: "true"},
	}
	noAPI := map[string]string{annotNoAPI: "true"}

	var name, scopes string
	create := &cobra.Command{
		Use:   "create --name NAME [--scope submit,read,admin]",
		Short: "Create a token and print it (shown only this once)",
		Long: `Create a token: a random "trg_" token is printed on standard output, once;
the table keeps only its hash. --scope is a comma-separated list of
submit (create tasks), read (get, list, stats) and admin (everything).`,
		Args:        cobra.NoArgs,
		Annotations: noAPI,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if name == "" {
				return usageError{fmt.Errorf("--name is required: the name to list and revoke the token by")}
			}
			if err := store.CheckTokenName(name); err != nil {
				return usageError{err}
			}
			ss, err := auth.ParseScopes(scopes)
			if err != nil {
				return usageError{fmt.Errorf("--scope: %w", err)}
			}
			s, err := tokenStore(cmd.Context())
			if err != nil {
				return err
			}
			tok, err := auth.NewToken()
			if err != nil {
				return err
			}
			kept := store.APIToken{Name: name, Hash: auth.Hash(tok), Scopes: names(ss), CreatedAt: time.Now()}
			if err := s.CreateToken(cmd.Context(), kept); err != nil {
				return err
			}
			if c.json {
				return c.printJSON(map[string]any{"name": name, "scopes": kept.Scopes, "token": tok})
			}
			fmt.Fprintln(c.out, tok)
			fmt.Fprintf(c.err, "token %s created in %s with scopes %s. It is shown only this once; the API accepts it within a minute.\n",
				name, s.Table(), strings.Join(kept.Scopes, ","))
			return nil
		},
	}
	create.Flags().StringVar(&name, "name", "", "the token's name, to list and revoke it by (letters, digits, '.', '_', '-')")
	create.Flags().StringVar(&scopes, "scope", "submit,read", "what the token may do: submit, read, admin, comma-separated")

	list := &cobra.Command{
		Use:         "list",
		Short:       "List the tokens: name, scopes, created (never the tokens)",
		Args:        cobra.NoArgs,
		Annotations: noAPI,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := tokenStore(cmd.Context())
			if err != nil {
				return err
			}
			toks, err := s.Tokens(cmd.Context())
			if err != nil {
				return err
			}
			type row struct {
				Name       string    `json:"name"`
				Scopes     []string  `json:"scopes"`
				CreatedAt  time.Time `json:"created_at"`
				HashPrefix string    `json:"hash_prefix"`
			}
			rows := make([]row, len(toks))
			for i, t := range toks {
				rows[i] = row{t.Name, t.Scopes, t.CreatedAt, t.Hash[:8]}
			}
			if c.json {
				return c.printJSON(map[string]any{"tokens": rows})
			}
			if len(rows) == 0 {
				fmt.Fprintf(c.out, "no tokens in %s: create one with `triage tokens create --name NAME --scope admin`\n", s.Table())
				return nil
			}
			tw := c.table("NAME", "SCOPES", "CREATED", "SHA-256")
			for _, r := range rows {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s…\n", r.Name, strings.Join(r.Scopes, ","), fmtTime(r.CreatedAt), r.HashPrefix)
			}
			return tw.Flush()
		},
	}

	revoke := &cobra.Command{
		Use:         "revoke NAME",
		Short:       "Revoke a token: the API refuses it within a minute",
		Args:        cobra.ExactArgs(1),
		Annotations: noAPI,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := tokenStore(cmd.Context())
			if err != nil {
				return err
			}
			if err := s.RevokeToken(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(c.out, "token %s revoked; the API refuses it within a minute\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

// tokenStore is the store on the table the environment names
// (TRIAGE_TABLE, else TRIAGE_PREFIX's), with the AWS configuration loaded
// the standard way.
func tokenStore(ctx context.Context) (*store.Store, error) {
	cfg, err := triageconfig.FromEnv(os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("load AWS config: %w", err)
	}
	return store.New(store.NewClient(awsCfg), cfg.Table), nil
}
