package apiapp_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/triagehq/triage/internal/api"
	"github.com/triagehq/triage/internal/app/apiapp"
	"github.com/triagehq/triage/internal/auth"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triageconfig"
)

func TestMain(m *testing.M) { stacktest.Main(m) }

// status is the HTTP status of method path with token.
func status(t *testing.T, srv *httptest.Server, path, method, token string) int {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitStatus polls until the request answers want (at most 5 s).
func waitStatus(t *testing.T, srv *httptest.Server, path, method, token string, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := status(t, srv, path, method, token)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %s with the token: %d, want %d", method, path, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A token minted into the table is accepted after the next refresh, with
// its scopes; revoked, it is refused after the next one. The fixed tokens
// hold throughout.
func TestTableTokens(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, map[string]string{triageconfig.EnvToken: "fixed"})
	ctx := context.Background()
	tokens, err := apiapp.TableAuth(ctx, a, nil, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(apiapp.Handler(a, tokens, api.Options{}))
	t.Cleanup(srv.Close)
	get := "/api/v1/tasks/" + task.NewID(time.Now())

	tok, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	if got := status(t, srv, get, "GET", tok); got != http.StatusUnauthorized {
		t.Fatalf("unknown token: %d, want 401", got)
	}
	if err := a.Store.CreateToken(ctx, store.APIToken{Name: "reader", Hash: auth.Hash(tok), Scopes: []string{"read"}}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, srv, get, "GET", tok, http.StatusNotFound)
	if got := status(t, srv, get, "DELETE", tok); got != http.StatusForbidden {
		t.Errorf("read token on an admin route: %d, want 403", got)
	}
	if err := a.Store.RevokeToken(ctx, "reader"); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, srv, get, "GET", tok, http.StatusUnauthorized)
	if got := status(t, srv, get, "GET", "fixed"); got != http.StatusNotFound {
		t.Errorf("fixed token after the refreshes: %d, want 404", got)
	}
}

// With no token anywhere the API function still starts: every request
// gets 401, and the log says how to create a token.
func TestLambdaWithNoTokens(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, map[string]string{triageconfig.EnvToken: "", triageconfig.EnvTokens: "", triageconfig.EnvTokensSecretARN: ""})
	var logs bytes.Buffer
	a.Log = slog.New(slog.NewTextHandler(&logs, nil))
	h, err := apiapp.Lambda(context.Background(), a)
	if err != nil {
		t.Fatalf("Lambda with no tokens: %v", err)
	}
	if !strings.Contains(logs.String(), "triage tokens create") {
		t.Errorf("log does not say how to create a token:\n%s", logs.String())
	}
	resp, err := h(context.Background(), events.APIGatewayV2HTTPRequest{
		Version: "2.0", RawPath: "/api/v1/stats", Headers: map[string]string{"authorization": "Bearer anything"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET", Path: "/api/v1/stats"}},
	})
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("request with no tokens: %d %s %v, want 401", resp.StatusCode, resp.Body, err)
	}
}
