package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/triagehq/triage/internal/api"
	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/app/apiapp"
	"github.com/triagehq/triage/internal/auth"
	"github.com/triagehq/triage/internal/counters"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/enqueue"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/internal/workers"
	"github.com/triagehq/triage/triagetype"
)

// The OpenAPI document is written by hand, so these tests keep it honest:
// it must be OpenAPI 3.1, name exactly the routes the server registers, and
// describe the bodies the real server (on the emulators) sends back.

// oaDoc is the parsed openapi.json. Numbers stay json.Number so the
// validator can tell integers from other numbers.
type oaDoc struct {
	raw  []byte
	root map[string]any
}

func oaLoad(t *testing.T) *oaDoc {
	t.Helper()
	raw, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	root, ok := oaDecode(t, raw).(map[string]any)
	if !ok {
		t.Fatal("openapi.json is not a JSON object")
	}
	return &oaDoc{raw: raw, root: root}
}

func oaDecode(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	return v
}

func oaObj(v any) map[string]any { m, _ := v.(map[string]any); return m }

// resolve follows a local "$ref" ("#/components/...") to its target.
func (d *oaDoc) resolve(ref string) (any, error) {
	p, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, fmt.Errorf("$ref %q is not local", ref)
	}
	var cur any = d.root
	for _, part := range strings.Split(p, "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok || m[part] == nil {
			return nil, fmt.Errorf("$ref %q does not resolve", ref)
		}
		cur = m[part]
	}
	return cur, nil
}

// deref resolves v when it is a {"$ref": ...} object (responses, parameters).
func (d *oaDoc) deref(v any) (map[string]any, error) {
	m := oaObj(v)
	for range 10 {
		ref, ok := m["$ref"].(string)
		if !ok {
			return m, nil
		}
		target, err := d.resolve(ref)
		if err != nil {
			return nil, err
		}
		m = oaObj(target)
	}
	return nil, fmt.Errorf("$ref chain too long")
}

var oaMethods = []string{"get", "put", "post", "delete", "patch", "head", "options", "trace"}

// operations lists "METHOD /full/path" for every operation, the path
// joined to the server URL that applies to it (the path item's own
// servers, else the document's).
func (d *oaDoc) operations(t *testing.T) map[string]map[string]any {
	t.Helper()
	base := ""
	if ss, _ := d.root["servers"].([]any); len(ss) > 0 {
		base, _ = oaObj(ss[0])["url"].(string)
	}
	ops := map[string]map[string]any{}
	for p, item := range oaObj(d.root["paths"]) {
		b := base
		if ss, _ := oaObj(item)["servers"].([]any); len(ss) > 0 {
			b, _ = oaObj(ss[0])["url"].(string)
		}
		full := strings.TrimSuffix(b, "/") + p
		for _, m := range oaMethods {
			if op := oaObj(oaObj(item)[m]); op != nil {
				ops[strings.ToUpper(m)+" "+full] = op
			}
		}
	}
	return ops
}

// oaNormalize maps a path to a form where ServeMux patterns and OpenAPI
// templates compare equal: wildcards lose their names ({id}, {id...} ->
// {}), and ServeMux's exact-match marker {$} goes.
func oaNormalize(methodPath string) string {
	methodPath = strings.TrimSuffix(methodPath, "{$}")
	return regexp.MustCompile(`\{[^}]*\}`).ReplaceAllString(methodPath, "{}")
}

// TestOpenAPIDocument checks the document on its own: version, references,
// parameters, responses and security.
func TestOpenAPIDocument(t *testing.T) {
	d := oaLoad(t)
	if v, _ := d.root["openapi"].(string); !strings.HasPrefix(v, "3.1.") {
		t.Fatalf("openapi = %q, want 3.1.x", v)
	}
	schemas := oaObj(oaObj(d.root["components"])["schemas"])
	for _, name := range []string{"Task", "TaskError", "Attempt", "SubmitRequest", "BatchRequest", "BatchResponse", "TaskList", "Stats", "ControlSettings", "DLQMessage", "ReplayRequest", "ReplayResult", "Error"} {
		if schemas[name] == nil {
			t.Errorf("components.schemas.%s is missing", name)
		}
	}
	if s := oaObj(oaObj(oaObj(d.root["components"])["securitySchemes"])["bearer"]); s["type"] != "http" || s["scheme"] != "bearer" {
		t.Errorf("securitySchemes.bearer = %v, want http bearer", s)
	}
	if s := oaObj(oaObj(oaObj(d.root["components"])["securitySchemes"])["tokenHeader"]); s["type"] != "apiKey" || s["in"] != "header" || s["name"] != auth.TokenHeader {
		t.Errorf("securitySchemes.tokenHeader = %v, want an apiKey in header %s", s, auth.TokenHeader)
	}
	// Every $ref anywhere resolves.
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["$ref"].(string); ok {
				if _, err := d.resolve(ref); err != nil {
					t.Error(err)
				}
			}
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(d.root)

	public := []string{"GET /api/v1/openapi.json", "GET /"}
	for name, op := range d.operations(t) {
		// Path parameters are declared, on the path item or the operation.
		_, p, _ := strings.Cut(name, " ")
		declared := map[string]bool{}
		for _, item := range []map[string]any{oaObj(oaObj(d.root["paths"])[strings.TrimPrefix(p, "/api/v1")]), op} {
			ps, _ := item["parameters"].([]any)
			for _, raw := range ps {
				prm, err := d.deref(raw)
				if err != nil {
					t.Error(err)
					continue
				}
				if prm["in"] == "path" {
					declared[prm["name"].(string)] = true
				}
			}
		}
		for _, m := range regexp.MustCompile(`\{([^}]+)\}`).FindAllStringSubmatch(p, -1) {
			if !declared[m[1]] {
				t.Errorf("%s: path parameter %q is not declared", name, m[1])
			}
		}
		// At least one success response, and a schema for every JSON one.
		resps := oaObj(op["responses"])
		success := false
		for code, raw := range resps {
			if strings.HasPrefix(code, "2") {
				success = true
			}
			r, err := d.deref(raw)
			if err != nil {
				t.Errorf("%s %s: %v", name, code, err)
				continue
			}
			if r["description"] == nil {
				t.Errorf("%s %s: no description", name, code)
			}
			if c := oaObj(oaObj(r["content"])["application/json"]); c != nil && c["schema"] == nil {
				t.Errorf("%s %s: JSON content without a schema", name, code)
			}
		}
		if !success {
			t.Errorf("%s: no 2xx response", name)
		}
		// Authenticated operations name their scope and document 401/403.
		sec, hasSec := op["security"].([]any)
		if slices.Contains(public, name) {
			if !hasSec || len(sec) != 0 {
				t.Errorf("%s is public but its security is %v, want []", name, op["security"])
			}
			continue
		}
		// A progress report is authorized by its attempt's own token, not
		// an API token: one requirement, progressToken, and 401/403.
		if len(sec) == 1 && oaObj(sec[0])["progressToken"] != nil {
			if resps["401"] == nil || resps["403"] == nil {
				t.Errorf("%s: authorized by progressToken but does not document 401 and 403", name)
			}
			continue
		}
		// Two alternatives with the same scope: the bearer token or the
		// same token in X-Triage-Token.
		if len(sec) != 2 {
			t.Errorf("%s: security %v, want a bearer and a tokenHeader requirement with a scope", name, op["security"])
			continue
		}
		scopes, _ := oaObj(sec[0])["bearer"].([]any)
		if len(scopes) != 1 || !slices.Contains([]any{"submit", "read", "admin"}, scopes[0]) {
			t.Errorf("%s: bearer scopes %v, want one of submit, read, admin", name, scopes)
		}
		if alt, _ := oaObj(sec[1])["tokenHeader"].([]any); !slices.Equal(alt, scopes) {
			t.Errorf("%s: tokenHeader scopes %v, want the bearer's %v", name, alt, scopes)
		}
		for _, code := range []string{"401", "403"} {
			if resps[code] == nil {
				t.Errorf("%s: no %s response", name, code)
			}
		}
	}
}

// oaServer is the real API on the emulators, with the dashboard enabled
// so its route is registered too.
type oaServer struct {
	srv     *httptest.Server
	handler http.Handler
	app     *app.App
}

func oaNewServer(t *testing.T) *oaServer {
	t.Helper()
	env := stacktest.New(t)
	a := env.App(t, nil)
	toks, err := auth.Parse("adm:admin,sub:submit,ro:read")
	if err != nil {
		t.Fatal(err)
	}
	dash := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, "<!doctype html><title>triage</title>")
	})
	h := apiapp.Handler(a, toks, api.Options{Dashboard: dash})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &oaServer{srv: srv, handler: h, app: a}
}

// TestOpenAPIRoutes checks that the document and the server's routes name
// the same operations, both ways.
func TestOpenAPIRoutes(t *testing.T) {
	d := oaLoad(t)
	s := oaNewServer(t)
	lister, ok := s.handler.(interface{ Routes() []string })
	if !ok {
		t.Fatalf("the API handler (%T) has no Routes() []string method", s.handler)
	}
	routes := lister.Routes()
	if len(routes) == 0 {
		t.Fatal("Routes() is empty")
	}
	documented := map[string]string{}
	for name := range d.operations(t) {
		documented[oaNormalize(name)] = name
	}
	registered := map[string]bool{}
	for _, r := range routes {
		method, path, ok := strings.Cut(r, " ")
		if !ok {
			t.Logf("route %q has no method; not an API operation", r)
			continue
		}
		if !strings.HasPrefix(path, "/api/v1/") && strings.TrimSuffix(path, "{$}") != "/" {
			// The dashboard's assets (/dashboard.js, ...) are files, not API.
			t.Logf("route %q is a static asset; not documented", r)
			continue
		}
		key := oaNormalize(method + " " + path)
		registered[key] = true
		if _, ok := documented[key]; !ok {
			t.Errorf("route %q is not in openapi.json", r)
		}
	}
	for key, name := range documented {
		if !registered[key] {
			t.Errorf("openapi.json documents %q but the server has no such route", name)
		}
	}
}

// oaCheck validates one exchange against the document: the request body
// against the operation's request schema, the status against its
// responses, and the response body against that status's schema.
type oaCheck struct {
	t   *testing.T
	d   *oaDoc
	srv *httptest.Server
	// perItem marks a batch whose items may be invalid on purpose: the
	// server answers 200 and reports each item, so the request is not
	// held to the schema.
	perItem bool
}

// call sends a request, checks it and the answer against the document, and
// returns the decoded answer.
func (c *oaCheck) call(op, path, token, body string, wantStatus int) (any, http.Header) {
	c.t.Helper()
	method, tmpl, _ := strings.Cut(op, " ")
	operation := c.d.operations(c.t)[op]
	if operation == nil {
		c.t.Fatalf("%s is not in openapi.json", op)
	}
	if body != "" && !c.perItem {
		rb, err := c.d.deref(operation["requestBody"])
		if err != nil || rb == nil {
			c.t.Fatalf("%s sends a body but documents no requestBody (%v)", op, err)
		}
		// A request the server accepts must fit the documented schema, and
		// one it refuses as bad input must not: the schema's constraints
		// then say what the server enforces.
		schema := oaObj(oaObj(rb["content"])["application/json"])["schema"]
		errs := c.d.validate(schema, oaDecode(c.t, []byte(body)), "request")
		switch {
		case wantStatus < 300 && len(errs) > 0:
			c.t.Errorf("%s: the request body %s does not match the documented schema:\n  %s", op, body, strings.Join(errs, "\n  "))
		case wantStatus == http.StatusBadRequest && len(errs) == 0:
			c.t.Errorf("%s: the server refuses %s with 400, but the documented schema accepts it", op, body)
		}
	}
	req, err := http.NewRequest(method, c.srv.URL+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	cl := &http.Client{Timeout: 30 * time.Second}
	resp, err := cl.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	if resp.StatusCode != wantStatus {
		c.t.Fatalf("%s %s (%s) = %d %s, want %d", method, path, tmpl, resp.StatusCode, raw, wantStatus)
	}
	documented, err := c.d.deref(oaResponse(oaObj(operation["responses"]), resp.StatusCode))
	if err != nil || documented == nil {
		c.t.Fatalf("%s: status %d is not documented (%v)", op, resp.StatusCode, err)
	}
	content := oaObj(documented["content"])
	if content == nil {
		if len(bytes.TrimSpace(raw)) != 0 {
			c.t.Errorf("%s %d: documented without a body, but the server sent %s", op, resp.StatusCode, raw)
		}
		return nil, resp.Header
	}
	ct, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";")
	media := oaObj(content[ct])
	if media == nil {
		c.t.Fatalf("%s %d: Content-Type %q is not documented (documented: %v)", op, resp.StatusCode, ct, slices.Collect(mapKeys(content)))
	}
	if ct != "application/json" {
		return string(raw), resp.Header
	}
	val := oaDecode(c.t, raw)
	if errs := c.d.validate(media["schema"], val, "response"); len(errs) > 0 {
		c.t.Errorf("%s %d: the response does not match the documented schema:\n  %s\nbody: %s", op, resp.StatusCode, strings.Join(errs, "\n  "), raw)
	}
	for name, h := range oaObj(documented["headers"]) {
		if name == "Retry-After" && resp.Header.Get(name) == "" {
			c.t.Errorf("%s %d: documented header %s is missing (%v)", op, resp.StatusCode, name, h)
		}
	}
	return val, resp.Header
}

func mapKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// oaResponse picks the documented response for status: exact, then 2XX
// style, then default.
func oaResponse(resps map[string]any, status int) any {
	for _, k := range []string{strconv.Itoa(status), strconv.Itoa(status/100) + "XX", "default"} {
		if r, ok := resps[k]; ok {
			return r
		}
	}
	return nil
}

// TestOpenAPIResponses drives the real server through most operations and
// validates every answer against the document.
// promotedTask is a queued task the promoter moved twice.
func promotedTask() *task.Task {
	now := time.Now().UTC()
	id := task.NewID(now)
	t := &task.Task{ID: id, TraceID: id, Type: "echo", Payload: json.RawMessage(`{}`), Priority: triagetype.Low, EffectivePriority: triagetype.High, Status: triagetype.Queued,
		MaxAttempts: 3, TimeoutSeconds: 30, CreatedAt: now, EnqueuedAt: &now, WaitingSince: now, Version: 1}
	t.AddPromotion(triagetype.Low, triagetype.Medium, now, 10*time.Minute)
	t.AddPromotion(triagetype.Medium, triagetype.High, now, 20*time.Minute)
	return t
}

func TestOpenAPIResponses(t *testing.T) {
	d := oaLoad(t)
	s := oaNewServer(t)
	str := func(v any, k string) string { s, _ := oaObj(v)[k].(string); return s }

	t.Run("tasks", func(t *testing.T) {
		c := &oaCheck{t: t, d: d, srv: s.srv}
		task, _ := c.call("POST /api/v1/tasks", "/api/v1/tasks", "sub", `{"type":"echo","payload":{"x":1},"priority":"high","idempotency_key":"oa-1"}`, 201)
		id := str(task, "id")
		again, _ := c.call("POST /api/v1/tasks", "/api/v1/tasks", "sub", `{"type":"echo","idempotency_key":"oa-1"}`, 200)
		if str(again, "id") != id {
			t.Errorf("idempotent resubmit returned %s, want %s", str(again, "id"), id)
		}
		c.call("POST /api/v1/tasks", "/api/v1/tasks", "adm", `{"type":"echo","run_at":"`+time.Now().Add(time.Hour).UTC().Format(time.RFC3339)+`"}`, 201)
		c.call("POST /api/v1/tasks", "/api/v1/tasks", "adm", `{"type":"echo","priority":"urgent"}`, 400)
		c.call("POST /api/v1/tasks", "/api/v1/tasks", "", `{"type":"echo"}`, 401)
		c.call("POST /api/v1/tasks", "/api/v1/tasks", "ro", `{"type":"echo"}`, 403)
		c.call("POST /api/v1/tasks", "/api/v1/tasks", "adm", `{"type":"echo","payload":"`+strings.Repeat("a", 1<<20)+`"}`, 413)
		// A payload kept off the record: the answer (and later list pages) carry payload_size.
		c.call("POST /api/v1/tasks", "/api/v1/tasks", "adm", `{"type":"echo","payload":"`+strings.Repeat("a", 10<<10)+`"}`, 201)

		c.call("GET /api/v1/tasks/{id}", "/api/v1/tasks/"+id, "ro", "", 200)
		// A promoted task carries its steps.
		promoted := promotedTask()
		if _, _, err := s.app.Store.Create(context.Background(), promoted); err != nil {
			t.Fatal(err)
		}
		pt, _ := c.call("GET /api/v1/tasks/{id}", "/api/v1/tasks/"+promoted.ID, "ro", "", 200)
		if steps, _ := oaObj(pt)["promotions"].([]any); len(steps) != 2 {
			t.Errorf("promoted task shows %d steps, want 2", len(steps))
		}
		c.call("GET /api/v1/tasks/{id}", "/api/v1/tasks/01ARZ3NDEKTSV4RRFFQ69G5FAV", "ro", "", 404)

		page, _ := c.call("GET /api/v1/tasks", "/api/v1/tasks?limit=1", "ro", "", 200)
		if cur := str(page, "next_cursor"); cur != "" {
			c.call("GET /api/v1/tasks", "/api/v1/tasks?limit=1&cursor="+cur, "ro", "", 200)
		}
		c.call("GET /api/v1/tasks", "/api/v1/tasks?type=echo&status=queued&priority=high", "ro", "", 200)
		c.call("GET /api/v1/tasks", "/api/v1/tasks?status=nope", "ro", "", 400)

		c.call("POST /api/v1/tasks/{id}/retry", "/api/v1/tasks/"+id+"/retry", "adm", "", 409)
		c.call("DELETE /api/v1/tasks/{id}", "/api/v1/tasks/"+id, "adm", "", 409)
		c.call("POST /api/v1/tasks/{id}/cancel", "/api/v1/tasks/"+id+"/cancel", "adm", "", 200)
		c.call("POST /api/v1/tasks/{id}/cancel", "/api/v1/tasks/"+id+"/cancel", "adm", "", 409)
		c.call("POST /api/v1/tasks/{id}/retry", "/api/v1/tasks/"+id+"/retry", "adm", "", 409)
		c.call("POST /api/v1/tasks/{id}/cancel", "/api/v1/tasks/01ARZ3NDEKTSV4RRFFQ69G5FAV/cancel", "adm", "", 404)
		c.call("DELETE /api/v1/tasks/{id}", "/api/v1/tasks/"+id, "adm", "", 204)
		c.call("DELETE /api/v1/tasks/{id}", "/api/v1/tasks/"+id, "adm", "", 404)

		job, _ := c.call("DELETE /api/v1/tasks", "/api/v1/tasks?older_than="+time.Now().UTC().Format(time.RFC3339), "adm", "", 202)
		c.call("DELETE /api/v1/tasks", "/api/v1/tasks?older_than="+time.Now().UTC().Format(time.RFC3339), "adm", "", 409)
		c.call("DELETE /api/v1/tasks", "/api/v1/tasks", "adm", "", 400)
		c.call("GET /api/v1/cleanups/{id}", "/api/v1/cleanups/"+str(job, "id"), "ro", "", 200)
		c.call("GET /api/v1/cleanups/{id}", "/api/v1/cleanups/01ARZ3NDEKTSV4RRFFQ69G5FAV", "ro", "", 404)
	})

	t.Run("batch", func(t *testing.T) {
		c := &oaCheck{t: t, d: d, srv: s.srv, perItem: true}
		res, _ := c.call("POST /api/v1/tasks/batch", "/api/v1/tasks/batch", "sub",
			`{"tasks":[{"type":"echo","idempotency_key":"oa-b1"},{"type":"echo","priority":"urgent"},{"type":"echo","idempotency_key":"oa-b1"}]}`, 200)
		results, _ := oaObj(res)["results"].([]any)
		var got []string
		for _, r := range results {
			got = append(got, fmt.Sprint(oaObj(r)["status"]))
		}
		if strings.Join(got, ",") != "201,400,200" {
			t.Errorf("batch statuses %v, want 201,400,200", got)
		}
		c.perItem = false
		c.call("POST /api/v1/tasks/batch", "/api/v1/tasks/batch", "sub", `{"tasks":[{"type":"echo","idempotency_key":"oa-b1"},{"type":"echo","priority":"low"}]}`, 200)
		c.call("POST /api/v1/tasks/batch", "/api/v1/tasks/batch", "sub", `{"tasks":[]}`, 400)
		c.call("POST /api/v1/tasks/batch", "/api/v1/tasks/batch", "ro", `{"tasks":[{"type":"echo"}]}`, 403)
	})

	t.Run("stats", func(t *testing.T) {
		c := &oaCheck{t: t, d: d, srv: s.srv}
		// A claim's wait and a depth sample, so /stats and its history carry them.
		now := time.Now().UTC()
		queued := &task.Task{ID: task.NewID(now), Type: "echo", Priority: triagetype.High, EffectivePriority: triagetype.High, Status: triagetype.Queued, CreatedAt: now.Add(-time.Second), WaitingSince: now, Version: 1}
		started := queued.Clone()
		started.Status, started.StartedAt, started.Version = triagetype.Executing, &now, 2
		// Inserted, claimed and removed: the status counts net to nothing.
		changes := []counters.Change{{Seq: "1", New: queued}, {Seq: "2", Old: queued, New: started}, {Seq: "3", Old: started}}
		if err := s.app.Counters.Apply(context.Background(), changes,
			func(first, _ string) counters.Guard { return counters.Guard{Key: "oa:" + first} }); err != nil {
			t.Fatal(err)
		}
		if err := s.app.Counters.RecordDepth(context.Background(), now, map[triagetype.Priority]counters.Depth{triagetype.High: {Visible: 2, InFlight: 1}, triagetype.Low: {}}); err != nil {
			t.Fatal(err)
		}
		st, _ := c.call("GET /api/v1/stats", "/api/v1/stats", "ro", "", 200)
		if q := oaObj(oaObj(oaObj(st)["queues"])["high"]); fmt.Sprint(q["waits"]) != "1" || q["wait_p99_seconds"] == nil {
			t.Errorf("high queue stats %v, want one wait with its percentiles", q)
		}
		h, _ := c.call("GET /api/v1/stats/history", "/api/v1/stats/history?minutes=5", "ro", "", 200)
		ms, _ := oaObj(h)["minutes"].([]any)
		if len(ms) != 6 {
			t.Errorf("history of 5 minutes has %d entries, want 6 (5 whole and the current one)", len(ms))
		}
		sampled := 0
		for _, m := range ms {
			if oaObj(m)["depth"] != nil {
				sampled++
			}
		}
		if sampled != 1 {
			t.Errorf("history shows %d minutes with depths, want the one sampled", sampled)
		}
		c.call("GET /api/v1/stats/history", "/api/v1/stats/history?minutes=61", "ro", "", 400)
		c.call("GET /api/v1/control", "/api/v1/control", "ro", "", 200)
		ag, _ := c.call("GET /api/v1/aging", "/api/v1/aging", "ro", "", 200)
		if b := oaObj(ag)["starvation_bound_seconds"]; fmt.Sprint(b) != "1920" {
			t.Errorf("starvation bound %v, want 1920 (10 m + 20 m + 2 × 1 m)", b)
		}
	})

	t.Run("workers", func(t *testing.T) {
		c := &oaCheck{t: t, d: d, srv: s.srv}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.app.Workers.Register(ctx, workers.Instance{ID: "oa-worker", Kind: triagetype.WorkerKindWorker, Capacity: 4}); err != nil {
			t.Fatal(err)
		}
		list, _ := c.call("GET /api/v1/workers", "/api/v1/workers", "ro", "", 200)
		if ws, _ := oaObj(list)["workers"].([]any); len(ws) != 1 || str(ws[0], "id") != "oa-worker" || str(ws[0], "state") != "active" {
			t.Errorf("GET /workers = %v, want the one active worker registered", list)
		}
		c.call("GET /api/v1/workers", "/api/v1/workers", "sub", "", 403)
		st, _ := c.call("GET /api/v1/stats", "/api/v1/stats", "ro", "", 200)
		if w := oaObj(oaObj(st)["workers"]); fmt.Sprintf("%v %v", w["active"], w["capacity"]) != "1 4" {
			t.Errorf("stats workers = %v, want 1 active with capacity 4", w)
		}
	})

	t.Run("control", func(t *testing.T) {
		c := &oaCheck{t: t, d: d, srv: s.srv}
		c.call("POST /api/v1/control/pause", "/api/v1/control/pause?type=echo", "adm", "", 200)
		c.call("POST /api/v1/control/resume", "/api/v1/control/resume?type=echo", "adm", "", 200)
		c.call("POST /api/v1/control/pause", "/api/v1/control/pause", "adm", "", 200)
		c.call("POST /api/v1/control/resume", "/api/v1/control/resume", "adm", "", 200)
		c.call("POST /api/v1/control/pause", "/api/v1/control/pause", "ro", "", 403)
		c.call("PUT /api/v1/control/types/{type}", "/api/v1/control/types/echo", "adm", `{"rate_limit_per_second":2.5,"max_concurrency":3}`, 200)
		c.call("PUT /api/v1/control/types/{type}", "/api/v1/control/types/echo", "adm", `{"max_concurrency":-1}`, 400)
		c.call("GET /api/v1/control", "/api/v1/control", "ro", "", 200)
		ag, _ := c.call("GET /api/v1/aging", "/api/v1/aging", "ro", "", 200)
		if b := oaObj(ag)["starvation_bound_seconds"]; fmt.Sprint(b) != "1920" {
			t.Errorf("starvation bound %v, want 1920 (10 m + 20 m + 2 × 1 m)", b)
		}
	})

	t.Run("dlq", func(t *testing.T) {
		c := &oaCheck{t: t, d: d, srv: s.srv}
		c.call("GET /api/v1/dlq", "/api/v1/dlq", "ro", "", 200)
		c.call("GET /api/v1/dlq", "/api/v1/dlq?priority=low&limit=5", "ro", "", 200)
		c.call("GET /api/v1/dlq", "/api/v1/dlq?priority=urgent", "ro", "", 400)
		c.call("POST /api/v1/dlq/replay", "/api/v1/dlq/replay", "adm", `{"priority":"low","type":"echo","limit":5}`, 200)
		c.call("POST /api/v1/dlq/replay", "/api/v1/dlq/replay", "sub", `{}`, 403)
	})

	// Dead letters, made the way the consumer makes them (the task's
	// record moved to dead_letter, its message in the DLQ), plus a poison
	// message, so the DLQ, retry and replay answers carry real data.
	t.Run("dead letters", func(t *testing.T) {
		c := &oaCheck{t: t, d: d, srv: s.srv}
		dead := func(typ string) *task.Task {
			created, _ := c.call("POST /api/v1/tasks", "/api/v1/tasks", "sub", `{"type":"`+typ+`","priority":"low","max_attempts":1}`, 201)
			return oaDeadLetter(t, s.app, str(created, "id"))
		}
		replayed, retried := dead("oa-fail"), dead("oa-fail")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.app.Queues.SendDLQ(ctx, triagetype.Low, enqueue.Body(replayed, replayed.Version), "handler failed: boom"); err != nil {
			t.Fatal(err)
		}
		if err := s.app.Queues.SendDLQ(ctx, triagetype.Low, "not a task message", "unparseable body"); err != nil {
			t.Fatal(err)
		}
		c.call("GET /api/v1/tasks/{id}", "/api/v1/tasks/"+retried.ID, "ro", "", 200)
		list, _ := c.call("GET /api/v1/dlq", "/api/v1/dlq?priority=low", "ro", "", 200)
		if msgs, _ := oaObj(list)["messages"].([]any); len(msgs) != 2 {
			t.Errorf("DLQ lists %d messages, want 2: %v", len(msgs), list)
		}
		res, _ := c.call("POST /api/v1/dlq/replay", "/api/v1/dlq/replay", "adm", `{"priority":"low","type":"oa-fail"}`, 200)
		if fmt.Sprint(oaObj(res)["replayed"]) != "1" {
			t.Errorf("replay = %v, want 1 replayed", res)
		}
		again, _ := c.call("POST /api/v1/tasks/{id}/retry", "/api/v1/tasks/"+retried.ID+"/retry", "adm", "", 200)
		if str(again, "status") != "queued" {
			t.Errorf("retried task is %v", again)
		}
		c.call("POST /api/v1/tasks/{id}/retry", "/api/v1/tasks/"+retried.ID+"/retry", "adm", "", 409)
		c.call("POST /api/v1/tasks/{id}/retry", "/api/v1/tasks/01ARZ3NDEKTSV4RRFFQ69G5FAV/retry", "adm", "", 404)
		c.call("GET /api/v1/stats", "/api/v1/stats", "ro", "", 200)
	})

	t.Run("meta", func(t *testing.T) {
		c := &oaCheck{t: t, d: d, srv: s.srv}
		served, _ := c.call("GET /api/v1/openapi.json", "/api/v1/openapi.json", "", "", 200)
		want := oaDecode(t, d.raw)
		if fmt.Sprint(served) != fmt.Sprint(want) {
			t.Error("GET /api/v1/openapi.json does not serve this openapi.json")
		}
		c.call("GET /", "/", "", "", 200)
		// The Lambda-shaped API (no event source) names the alternatives.
		c.call("GET /api/v1/events", "/api/v1/events", "ro", "", 501)
		c.call("GET /api/v1/events", "/api/v1/events", "", "", 401)
	})
}

// oaDeadLetter moves task id through executing to dead_letter in the
// store, as a consumer whose only attempt failed would.
func oaDeadLetter(t *testing.T, a *app.App, id string) *task.Task {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cur, err := a.Store.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now().UTC()
	ex, err := a.Store.Transition(ctx, cur, triagetype.Executing, func(n *task.Task) {
		n.Attempts++
		n.StartedAt, n.WorkerID = &start, "oa-worker"
	})
	if err != nil {
		t.Fatal(err)
	}
	dl, err := a.Store.Transition(ctx, ex, triagetype.DeadLetter, func(n *task.Task) {
		end := time.Now().UTC()
		n.Error = &triagetype.TaskError{Message: "boom", Retriable: true}
		n.CompletedAt, n.WorkerID = &end, ""
		n.AddAttempt(triagetype.Attempt{Attempt: n.Attempts, WorkerID: "oa-worker", StartedAt: start, FinishedAt: end, Error: "boom"})
	})
	if err != nil {
		t.Fatal(err)
	}
	return dl
}

// validate checks v against a JSON Schema and returns every mismatch. It
// implements the keywords openapi.json uses and refuses any other, so the
// document cannot grow a constraint that this test silently ignores.
func (d *oaDoc) validate(schema, v any, at string) []string {
	s, ok := schema.(map[string]any)
	if !ok {
		if b, isBool := schema.(bool); isBool {
			if b {
				return nil
			}
			return []string{at + ": no value is allowed here"}
		}
		return []string{fmt.Sprintf("%s: schema is %T, not an object", at, schema)}
	}
	var errs []string
	fail := func(format string, args ...any) { errs = append(errs, at+": "+fmt.Sprintf(format, args...)) }
	for k := range s {
		switch k {
		case "$ref", "type", "properties", "required", "additionalProperties", "items", "enum", "not",
			"minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems", "format",
			"description", "title", "default", "examples", "example", "deprecated", "readOnly", "writeOnly":
		default:
			fail("schema keyword %q is not supported by this validator", k)
		}
	}
	if ref, ok := s["$ref"].(string); ok {
		target, err := d.resolve(ref)
		if err != nil {
			return append(errs, at+": "+err.Error())
		}
		errs = append(errs, d.validate(target, v, at)...)
	}
	if t, ok := s["type"]; ok {
		var types []string
		switch x := t.(type) {
		case string:
			types = []string{x}
		case []any:
			for _, y := range x {
				types = append(types, y.(string))
			}
		}
		if !slices.ContainsFunc(types, func(t string) bool { return oaIsType(v, t) }) {
			fail("%s is not of type %v", oaShow(v), types)
			return errs
		}
	}
	if enum, ok := s["enum"].([]any); ok && !slices.ContainsFunc(enum, func(e any) bool { return oaEqual(e, v) }) {
		fail("%s is not one of %v", oaShow(v), enum)
	}
	if not, ok := s["not"]; ok && len(d.validate(not, v, at)) == 0 {
		fail("%s matches a schema it must not match (%v)", oaShow(v), not)
	}
	if n, ok := v.(json.Number); ok {
		f, _ := n.Float64()
		if m, ok := s["minimum"].(json.Number); ok {
			if min, _ := m.Float64(); f < min {
				fail("%v is less than the minimum %v", n, m)
			}
		}
		if m, ok := s["maximum"].(json.Number); ok {
			if max, _ := m.Float64(); f > max {
				fail("%v is more than the maximum %v", n, m)
			}
		}
	}
	if str, ok := v.(string); ok {
		n := utf8.RuneCountInString(str)
		if m, ok := s["minLength"].(json.Number); ok {
			if min, _ := m.Int64(); int64(n) < min {
				fail("string %q is shorter than %v", str, m)
			}
		}
		if m, ok := s["maxLength"].(json.Number); ok {
			if max, _ := m.Int64(); int64(n) > max {
				fail("string is longer than %v", m)
			}
		}
		if s["format"] == "date-time" {
			if _, err := time.Parse(time.RFC3339Nano, str); err != nil {
				fail("%q is not an RFC 3339 date-time", str)
			}
		}
	}
	if arr, ok := v.([]any); ok {
		if m, ok := s["minItems"].(json.Number); ok {
			if min, _ := m.Int64(); int64(len(arr)) < min {
				fail("%d items, fewer than %v", len(arr), m)
			}
		}
		if m, ok := s["maxItems"].(json.Number); ok {
			if max, _ := m.Int64(); int64(len(arr)) > max {
				fail("%d items, more than %v", len(arr), m)
			}
		}
		if items, ok := s["items"]; ok {
			for i, e := range arr {
				errs = append(errs, d.validate(items, e, fmt.Sprintf("%s[%d]", at, i))...)
			}
		}
	}
	if obj, ok := v.(map[string]any); ok {
		props := oaObj(s["properties"])
		if req, ok := s["required"].([]any); ok {
			for _, r := range req {
				if _, present := obj[r.(string)]; !present {
					fail("required property %q is missing", r)
				}
			}
		}
		for k, pv := range obj {
			if ps, ok := props[k]; ok {
				errs = append(errs, d.validate(ps, pv, at+"."+k)...)
				continue
			}
			switch ap := s["additionalProperties"].(type) {
			case bool:
				if !ap {
					fail("property %q is not documented (additionalProperties is false)", k)
				}
			case map[string]any:
				errs = append(errs, d.validate(ap, pv, at+"."+k)...)
			}
		}
	}
	return errs
}

func oaIsType(v any, t string) bool {
	switch t {
	case "null":
		return v == nil
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "number":
		_, ok := v.(json.Number)
		return ok
	case "integer":
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		if _, err := n.Int64(); err == nil {
			return true
		}
		f, err := n.Float64()
		return err == nil && f == float64(int64(f))
	}
	return false
}

// oaEqual compares JSON values, numbers by value (200 == 200.0).
func oaEqual(a, b any) bool {
	na, aok := a.(json.Number)
	nb, bok := b.(json.Number)
	if aok && bok {
		fa, _ := na.Float64()
		fb, _ := nb.Float64()
		return fa == fb
	}
	return fmt.Sprint(a) == fmt.Sprint(b)
}

func oaShow(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 80 {
		return string(b[:77]) + "..."
	}
	return string(b)
}

// TestOpenAPIValidator checks the validator itself on small cases, so a
// passing response test means the schema was really applied.
func TestOpenAPIValidator(t *testing.T) {
	d := oaLoad(t)
	task := `{"id":"01J","type":"echo","payload":null,"priority":"high","effective_priority":"high","status":"queued","attempts":0,"max_attempts":3,"timeout_seconds":300,"created_at":"2026-01-02T03:04:05.123456789Z","trace_id":"01J"}`
	ref := map[string]any{"$ref": "#/components/schemas/Task"}
	if errs := d.validate(ref, oaDecode(t, []byte(task)), "task"); len(errs) > 0 {
		t.Fatalf("a valid task failed: %v", errs)
	}
	for name, bad := range map[string]string{
		"missing field":    strings.Replace(task, `"attempts":0,`, ``, 1),
		"extra field":      strings.Replace(task, `"attempts":0,`, `"attempts":0,"colour":"red",`, 1),
		"bad enum":         strings.Replace(task, `"queued"`, `"sleeping"`, 1),
		"not an integer":   strings.Replace(task, `"attempts":0`, `"attempts":0.5`, 1),
		"wrong type":       strings.Replace(task, `"attempts":0`, `"attempts":"0"`, 1),
		"below minimum":    strings.Replace(task, `"max_attempts":3`, `"max_attempts":0`, 1),
		"bad date-time":    strings.Replace(task, `"2026-01-02T03:04:05.123456789Z"`, `"yesterday"`, 1),
		"bad nested error": strings.Replace(task, `"trace_id"`, `"error":{"message":"x"},"trace_id"`, 1),
		"bad array item":   strings.Replace(task, `"trace_id"`, `"history":[{"attempt":1}],"trace_id"`, 1),
	} {
		if errs := d.validate(ref, oaDecode(t, []byte(bad)), "task"); len(errs) == 0 {
			t.Errorf("%s: accepted %s", name, bad)
		}
	}
	sub := map[string]any{"$ref": "#/components/schemas/SubmitRequest"}
	if errs := d.validate(sub, oaDecode(t, []byte(`{"type":"echo","run_at":"2030-01-01T00:00:00Z","delay_seconds":5}`)), "req"); len(errs) == 0 {
		t.Error("run_at with delay_seconds accepted")
	}
	if errs := d.validate(map[string]any{"type": []any{"string", "null"}}, nil, "x"); len(errs) > 0 {
		t.Errorf("null refused by a nullable type: %v", errs)
	}
	if errs := d.validate(map[string]any{"oneOf": []any{}}, "x", "x"); len(errs) == 0 {
		t.Error("an unsupported keyword was ignored")
	}
}
