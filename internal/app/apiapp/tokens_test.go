package apiapp_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/triagehq/triage/internal/app/apiapp"
	"github.com/triagehq/triage/triageconfig"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/auth"
)

// secretsStandIn speaks Secrets Manager's GetSecretValue (awsJson1.1) on loopback.
func secretsStandIn(t *testing.T, secrets map[string]string) *secretsmanager.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Amz-Target") != "secretsmanager.GetSecretValue" {
			http.Error(w, "unexpected target "+r.Header.Get("X-Amz-Target"), http.StatusBadRequest)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var in struct{ SecretId string }
		_ = json.Unmarshal(body, &in)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		v, ok := secrets[in.SecretId]
		if !ok {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"__type":"ResourceNotFoundException","message":"Secrets Manager can't find the specified secret."}`))
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"ARN": in.SecretId, "Name": "tokens", "SecretString": v, "VersionId": "v1"})
	}))
	t.Cleanup(srv.Close)
	return secretsmanager.NewFromConfig(aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")},
		func(o *secretsmanager.Options) { o.BaseEndpoint = aws.String(srv.URL) })
}

func TestTokensFromSecret(t *testing.T) {
	const arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:triage-tokens-AbCdEf"
	sm := secretsStandIn(t, map[string]string{arn: `{"tokens":[{"token":"svc","scopes":["submit"]},{"token":"ops"}]}`})
	cfg, err := triageconfig.FromEnv(func(k string) string {
		return map[string]string{triageconfig.EnvTokensSecretARN: arn, triageconfig.EnvToken: "local"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	a := &app.App{Config: cfg}
	toks, err := apiapp.Tokens(context.Background(), a, sm)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		header string
		need   auth.Scope
		ok     bool
	}{
		{"Bearer svc", auth.Submit, true},
		{"Bearer svc", auth.Admin, false},
		{"Bearer ops", auth.Admin, true},
		{"Bearer local", auth.Admin, true},
		{"Bearer other", auth.Read, false},
	}
	for _, c := range checks {
		if err := toks.Check(c.header, c.need); (err == nil) != c.ok {
			t.Errorf("Check(%q, %s) = %v, want ok=%v", c.header, c.need, err, c.ok)
		}
	}
}

func TestTokensSecretMissing(t *testing.T) {
	sm := secretsStandIn(t, nil)
	cfg, _ := triageconfig.FromEnv(func(k string) string {
		return map[string]string{triageconfig.EnvTokensSecretARN: "arn:aws:secretsmanager:us-east-1:1:secret:gone"}[k]
	})
	_, err := apiapp.Tokens(context.Background(), &app.App{Config: cfg}, sm)
	if err == nil || !strings.Contains(err.Error(), "gone") {
		t.Fatalf("err = %v, want one naming the secret", err)
	}
}

func TestNoTokensIsAnError(t *testing.T) {
	cfg, _ := triageconfig.FromEnv(func(string) string { return "" })
	_, err := apiapp.Tokens(context.Background(), &app.App{Config: cfg}, nil)
	if err == nil || !strings.Contains(err.Error(), triageconfig.EnvToken) {
		t.Fatalf("err = %v", err)
	}
}
