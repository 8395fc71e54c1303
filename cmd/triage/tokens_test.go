package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/auth"
	"github.com/triagehq/triage/internal/emulators"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/triageconfig"
)

// `triage tokens` against DynamoDB Local: create prints a token whose hash
// (only) the table keeps, list shows it without the token, revoke removes
// it; a taken name and an unknown one get the conflict and not-found exit
// codes.
func TestTokensCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the emulators")
	}
	if !emulators.EndpointsSet(os.Getenv) {
		root, err := emulators.FindRoot(".")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		emu, err := emulators.Start(ctx, root)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(emu.Stop)
		for k, v := range emu.Env() {
			t.Setenv(k, v)
		}
	}
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1"} {
		t.Setenv(k, v)
	}
	env := stacktest.New(t)
	t.Setenv(triageconfig.EnvTable, "")
	t.Setenv(triageconfig.EnvPrefix, env.Prefix)

	cli := func(args ...string) (string, string, int) {
		t.Helper()
		var out, errOut bytes.Buffer
		_, root := newRoot(&out, &errOut)
		root.SetArgs(args)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := root.ExecuteContext(ctx)
		if err != nil {
			errOut.WriteString("triage: " + err.Error() + "\n")
		}
		return out.String(), errOut.String(), exitCode(err)
	}

	out, errOut, code := cli("tokens", "create", "--name", "ci", "--scope", "submit,read")
	tok := strings.TrimSpace(out)
	if code != exitOK || !strings.HasPrefix(tok, auth.TokenPrefix) || strings.Count(out, "\n") != 1 {
		t.Fatalf("create: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	if !strings.Contains(errOut, "shown only this once") {
		t.Errorf("create does not say the token is shown once: %q", errOut)
	}
	s := store.New(env.DynamoDB, env.Spec.Table.Name)
	kept, err := s.Tokens(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 1 || kept[0].Name != "ci" || kept[0].Hash != auth.Hash(tok) || strings.Join(kept[0].Scopes, ",") != "submit,read" {
		t.Fatalf("table keeps %+v", kept)
	}
	toks := &auth.Tokens{}
	if err := toks.AddHash(kept[0].Hash, auth.Submit, auth.Read); err != nil || toks.Check("Bearer "+tok, auth.Submit) != nil {
		t.Fatalf("the printed token does not match the kept hash: %v", err)
	}

	if _, errOut, code := cli("tokens", "create", "--name", "ci"); code != exitConflict || !strings.Contains(errOut, "exists") {
		t.Errorf("create a taken name: code %d, stderr %q", code, errOut)
	}
	if _, _, code := cli("tokens", "create", "--name", "x", "--scope", "write"); code != exitUsage {
		t.Errorf("create with scope write: code %d, want %d", code, exitUsage)
	}
	if _, _, code := cli("tokens", "create"); code != exitUsage {
		t.Errorf("create without --name: code %d, want %d", code, exitUsage)
	}
	if out, _, code := cli("tokens", "create", "--name", "ops", "--scope", "admin"); code != exitOK || strings.TrimSpace(out) == tok {
		t.Fatalf("create ops: code %d, %q", code, out)
	}

	out, _, code = cli("tokens", "list")
	if code != exitOK || !strings.Contains(out, "ci") || !strings.Contains(out, "submit,read") || !strings.Contains(out, "ops") || !strings.Contains(out, auth.Hash(tok)[:8]) {
		t.Fatalf("list: code %d\n%s", code, out)
	}
	if strings.Contains(out, tok) || strings.Contains(out, auth.Hash(tok)) {
		t.Fatalf("list shows the token or its whole hash:\n%s", out)
	}
	out, _, _ = cli("--json", "tokens", "list")
	var listed struct {
		Tokens []struct {
			Name   string   `json:"name"`
			Scopes []string `json:"scopes"`
		} `json:"tokens"`
	}
	if err := json.Unmarshal([]byte(out), &listed); err != nil || len(listed.Tokens) != 2 || listed.Tokens[1].Name != "ops" {
		t.Fatalf("list --json: %v\n%s", err, out)
	}

	if out, _, code := cli("tokens", "revoke", "ci"); code != exitOK || !strings.Contains(out, "revoked") {
		t.Fatalf("revoke: code %d, %q", code, out)
	}
	if _, _, code := cli("tokens", "revoke", "ci"); code != exitNotFound {
		t.Errorf("revoke twice: code %d, want %d", code, exitNotFound)
	}
	if kept, _ := s.Tokens(context.Background()); len(kept) != 1 || kept[0].Name != "ops" {
		t.Fatalf("after revoke the table keeps %+v", kept)
	}
}
