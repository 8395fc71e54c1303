package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/internal/api"
	"github.com/triagehq/triage/internal/app/apiapp"
	"github.com/triagehq/triage/internal/auth"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

func TestMain(m *testing.M) { stacktest.Main(m) }

type fixture struct {
	srv *httptest.Server
	env *stacktest.Env
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	env := stacktest.New(t)
	a := env.App(t, nil)
	toks, err := auth.Parse("adm:admin,sub:submit,ro:read")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(apiapp.Handler(a, toks, api.Options{}))
	t.Cleanup(srv.Close)
	return &fixture{srv: srv, env: env}
}

func (f *fixture) do(t *testing.T, method, path, token, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func TestSubmitAndGet(t *testing.T) {
	f := newFixture(t)
	code, body := f.do(t, "POST", "/api/v1/tasks", "sub", `{"type":"echo","payload":{"x":1},"priority":"high","max_attempts":5,"timeout_seconds":10}`)
	if code != http.StatusCreated {
		t.Fatalf("submit = %d %v", code, body)
	}
	id, _ := body["id"].(string)
	for k, want := range map[string]any{"type": "echo", "priority": "high", "effective_priority": "high", "status": "queued", "max_attempts": 5.0, "timeout_seconds": 10.0, "attempts": 0.0} {
		if body[k] != want {
			t.Errorf("%s = %v, want %v", k, body[k], want)
		}
	}
	if p, _ := json.Marshal(body["payload"]); string(p) != `{"x":1}` {
		t.Errorf("payload = %s", p)
	}
	code, got := f.do(t, "GET", "/api/v1/tasks/"+id, "ro", "")
	if code != http.StatusOK || got["id"] != id || got["status"] != "queued" {
		t.Fatalf("get = %d %v", code, got)
	}
	// The message is on the high queue.
	a := f.env.App(t, nil)
	d, err := a.Queues.Depth(context.Background(), triagetype.High)
	if err != nil || d.Visible != 1 {
		t.Fatalf("high queue depth = %+v, %v", d, err)
	}
}

func TestSubmitDefaultsAndSchedule(t *testing.T) {
	f := newFixture(t)
	code, body := f.do(t, "POST", "/api/v1/tasks", "adm", `{"type":"echo"}`)
	if code != 201 || body["priority"] != "medium" || body["max_attempts"] != 3.0 || body["timeout_seconds"] != 300.0 {
		t.Fatalf("defaults: %d %v", code, body)
	}
	runAt := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	code, body = f.do(t, "POST", "/api/v1/tasks", "adm", `{"type":"echo","run_at":"`+runAt+`"}`)
	if code != 201 || body["status"] != "scheduled" {
		t.Fatalf("run_at in an hour: %d %v", code, body)
	}
	code, body = f.do(t, "POST", "/api/v1/tasks", "adm", `{"type":"echo","delay_seconds":60}`)
	if code != 201 || body["status"] != "queued" || body["run_at"] == nil {
		t.Fatalf("delay 60 s: %d %v", code, body)
	}
}

func TestIdempotentSubmit(t *testing.T) {
	f := newFixture(t)
	code, first := f.do(t, "POST", "/api/v1/tasks", "adm", `{"type":"echo","idempotency_key":"k1"}`)
	if code != 201 {
		t.Fatalf("first = %d", code)
	}
	code, second := f.do(t, "POST", "/api/v1/tasks", "adm", `{"type":"echo","idempotency_key":"k1"}`)
	if code != 200 || second["id"] != first["id"] {
		t.Fatalf("second = %d %v, want 200 with %v", code, second["id"], first["id"])
	}
}

func TestErrors(t *testing.T) {
	f := newFixture(t)
	big := `{"type":"echo","payload":"` + strings.Repeat("a", task.MaxPayloadBytes+10) + `"}`
	huge := `{"type":"echo","payload":"` + strings.Repeat("a", task.MaxPayloadBytes+100<<10) + `"}`
	tests := []struct {
		name, method, path, token, body string
		status                          int
		code, field                     string
	}{
		{"no token", "POST", "/api/v1/tasks", "", `{"type":"echo"}`, 401, "unauthorized", ""},
		{"wrong token", "POST", "/api/v1/tasks", "nope", `{"type":"echo"}`, 401, "unauthorized", ""},
		{"read token cannot submit", "POST", "/api/v1/tasks", "ro", `{"type":"echo"}`, 403, "forbidden", ""},
		{"submit token cannot read", "GET", "/api/v1/tasks/x", "sub", ``, 403, "forbidden", ""},
		{"bad json", "POST", "/api/v1/tasks", "adm", `{"type":`, 400, "invalid_json", ""},
		{"empty body", "POST", "/api/v1/tasks", "adm", ``, 400, "invalid_json", ""},
		{"missing type", "POST", "/api/v1/tasks", "adm", `{"payload":{}}`, 400, triagetype.CodeInvalidField, "type"},
		{"type not a string", "POST", "/api/v1/tasks", "adm", `{"type":5}`, 400, triagetype.CodeInvalidField, "type"},
		{"unknown priority", "POST", "/api/v1/tasks", "adm", `{"type":"echo","priority":"urgent"}`, 400, triagetype.CodeInvalidField, "priority"},
		{"unknown field", "POST", "/api/v1/tasks", "adm", `{"type":"echo","colour":"red"}`, 400, triagetype.CodeInvalidField, "colour"},
		{"max_attempts 0", "POST", "/api/v1/tasks", "adm", `{"type":"echo","max_attempts":0}`, 400, triagetype.CodeInvalidField, "max_attempts"},
		{"timeout too long", "POST", "/api/v1/tasks", "adm", `{"type":"echo","timeout_seconds":999999}`, 400, triagetype.CodeInvalidField, "timeout_seconds"},
		{"run_at and delay", "POST", "/api/v1/tasks", "adm", `{"type":"echo","delay_seconds":5,"run_at":"2030-01-01T00:00:00Z"}`, 400, triagetype.CodeInvalidField, "run_at"},
		{"trailing data", "POST", "/api/v1/tasks", "adm", `{"type":"echo"} {}`, 400, "invalid_json", ""},
		{"payload over limit", "POST", "/api/v1/tasks", "adm", big, 413, "too_large", "payload"},
		{"body far over limit", "POST", "/api/v1/tasks", "adm", huge, 413, "too_large", ""},
		{"malformed id", "GET", "/api/v1/tasks/01NOPE", "adm", ``, 400, triagetype.CodeInvalidField, "id"},
		{"unknown task", "GET", "/api/v1/tasks/01ARZ3NDEKTSV4RRFFQ69G5FAV", "adm", ``, 404, "not_found", "id"},
		{"unknown route", "GET", "/api/v1/nothing", "adm", ``, 404, "not_found", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := f.do(t, tt.method, tt.path, tt.token, tt.body)
			e, _ := body["error"].(map[string]any)
			if code != tt.status || e == nil || e["code"] != tt.code || (tt.field != "" && e["field"] != tt.field) {
				t.Fatalf("got %d %v, want %d code %s field %q", code, body, tt.status, tt.code, tt.field)
			}
			if msg, _ := e["message"].(string); msg == "" {
				t.Fatalf("error without a message: %v", body)
			}
			if tt.field != "" && !strings.Contains(e["message"].(string), tt.field) {
				t.Fatalf("message %q does not name the field %q", e["message"], tt.field)
			}
		})
	}
}

// The Lambda entry point serves the same handler: a real API Gateway HTTP
// API (payload v2) event in, a proxied response out.
func TestLambdaEventFixture(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, map[string]string{"TRIAGE_TOKEN": "lambda-token"})
	h, err := apiapp.Lambda(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	raw := mustRead(t, "testdata/apigw-v2-submit.json")
	var ev eventV2
	if err := json.Unmarshal(raw, &ev.APIGatewayV2HTTPRequest); err != nil {
		t.Fatal(err)
	}
	resp, err := h(context.Background(), ev.APIGatewayV2HTTPRequest)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 201 {
		t.Fatalf("status %d body %s", resp.StatusCode, resp.Body)
	}
	var tk map[string]any
	if err := json.Unmarshal([]byte(resp.Body), &tk); err != nil || tk["type"] != "echo" || tk["priority"] != "low" {
		t.Fatalf("body %s (%v)", resp.Body, err)
	}
	if _, err := a.Store.Get(context.Background(), tk["id"].(string)); err != nil {
		t.Fatalf("task not stored: %v", err)
	}
	// Same event with a bad token: 401 through the proxy.
	ev.Headers["authorization"] = "Bearer wrong"
	resp, err = h(context.Background(), ev.APIGatewayV2HTTPRequest)
	if err != nil || resp.StatusCode != 401 || !bytes.Contains([]byte(resp.Body), []byte(`"unauthorized"`)) {
		t.Fatalf("bad token: %d %s %v", resp.StatusCode, resp.Body, err)
	}
}

// signingTransport stands in for a SigV4 signer: like one, it owns the
// Authorization header and overwrites whatever the caller put there.
type signingTransport struct{}

func (signingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261122/us-east-1/execute-api/aws4_request, SignedHeaders=host;x-amz-date, Signature=0123")
	return http.DefaultTransport.RoundTrip(r)
}

// TestTokenHeaderBesideSigV4 shows an API behind IAM authorization is
// usable: the Go client sends its token in X-Triage-Token, leaving
// Authorization to the signer, and the API accepts it with its scopes.
func TestTokenHeaderBesideSigV4(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	signed := &http.Client{Transport: signingTransport{}}

	c := triage.NewClient(triage.HTTP(f.srv.URL, "adm", triage.WithHTTPClient(signed), triage.WithTokenHeader()))
	tk, created, err := c.Submit(ctx, "echo", nil)
	if err != nil || !created {
		t.Fatalf("submit with the token header: %v (created %v)", err, created)
	}
	if got, err := c.Get(ctx, tk.ID); err != nil || got.ID != tk.ID {
		t.Fatalf("get with the token header: %v", err)
	}
	// Scopes still apply to the header's token.
	ro := triage.NewClient(triage.HTTP(f.srv.URL, "ro", triage.WithHTTPClient(signed), triage.WithTokenHeader()))
	if _, _, err := ro.Submit(ctx, "echo", nil); !errors.Is(err, triage.ErrForbidden) {
		t.Fatalf("read token submitting: %v, want ErrForbidden", err)
	}
	// Without it the signer's Authorization replaces the bearer token.
	plain := triage.NewClient(triage.HTTP(f.srv.URL, "adm", triage.WithHTTPClient(signed)))
	if _, err := plain.Get(ctx, tk.ID); !errors.Is(err, triage.ErrUnauthorized) {
		t.Fatalf("bearer token under a signer: %v, want ErrUnauthorized", err)
	}
}
