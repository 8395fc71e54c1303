package api_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/triagehq/triage/internal/api"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// hostile is one request an attacker or a careless client might send.
type hostile struct {
	name, method, path, body string
	status                   int    // 0: any 4xx
	field                    string // the field the error must name ("": none required)
	batchField               string // for a 200 batch answer: the field item 0's error must name
}

func hostileRequests() []hostile {
	var hs []hostile
	add := func(h hostile) { hs = append(hs, h) }
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	validID := "01ARZ3NDEKTSV4RRFFQ69G5FAV"

	// Identifiers.
	for _, id := range []string{strings.Repeat("A", 27), strings.Repeat("Z", 2044), strings.Repeat("x", 3000), "nope", "..%2F..%2Fetc", "%00", "%FF%FE", "%F0%9F%92%A9", validID + "0"} {
		for _, ep := range []struct{ method, suffix string }{{"GET", ""}, {"POST", "/cancel"}, {"POST", "/retry"}, {"DELETE", ""}} {
			add(hostile{name: "id " + cutName(id) + " " + ep.method + ep.suffix, method: ep.method, path: "/api/v1/tasks/" + id + ep.suffix, status: 400, field: "id"})
		}
	}
	// Types in paths and queries.
	for _, typ := range []string{strings.Repeat("t", 3000), "%FF", "a%23b", "a%00b", "a%0Ab"} {
		add(hostile{name: "limits type " + cutName(typ), method: "PUT", path: "/api/v1/control/types/" + typ, body: `{"max_concurrency":1}`, status: 400, field: "type"})
		add(hostile{name: "pause type " + cutName(typ), method: "POST", path: "/api/v1/control/pause?type=" + typ, status: 400, field: "type"})
		add(hostile{name: "resume type " + cutName(typ), method: "POST", path: "/api/v1/control/resume?type=" + typ, status: 400, field: "type"})
		add(hostile{name: "list type " + cutName(typ), method: "GET", path: "/api/v1/tasks?type=" + typ, status: 400, field: "type"})
	}
	// Forged cursors.
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, c := range []string{
		"eyJzIjowLCJrIjp7ImZvbyI6ImJhciJ9fQ", "!!!", enc(`{}`), enc(`{"a":""}`), enc(`{"a":"x"}`), enc(`{"a":5}`), enc(`[]`), enc(`null`),
		enc(`{"a":"2026-01-01T00:00:00.000000000Z#not-an-id"}`), enc(`{"a":"2026-13-01T00:00:00.000000000Z#` + validID + `"}`),
		enc(`{"a":"` + strings.Repeat("9", 5000) + `"}`), strings.Repeat("A", 20000), enc(`{"s":1,"k":{"pk":"TASK#x"}}`),
	} {
		for _, q := range []string{"", "&type=echo", "&status=dead_letter", "&priority=low"} {
			add(hostile{name: "cursor " + cutName(c) + q, method: "GET", path: "/api/v1/tasks?cursor=" + c + q, status: 400, field: "cursor"})
		}
	}
	// Bodies: syntax, encoding, size, nesting.
	for name, body := range map[string]string{
		"empty": "", "open brace": "{", "array": "[]", "null": "null", "trailing data": `{"type":"echo"} x`,
		"string": `"echo"`, "number": "5", "duplicate-ish garbage": `{"type":"echo",}`,
	} {
		add(hostile{name: "submit body " + name, method: "POST", path: "/api/v1/tasks", body: body, status: 400})
		add(hostile{name: "batch body " + name, method: "POST", path: "/api/v1/tasks/batch", body: body, status: 400})
	}
	for _, d := range []int{65, 1000, 9998} {
		add(hostile{name: fmt.Sprintf("payload depth %d", d), method: "POST", path: "/api/v1/tasks", body: `{"type":"echo","payload":` + nest(d) + `}`, status: 400, field: "payload"})
		h := hostile{name: fmt.Sprintf("batch payload depth %d", d), method: "POST", path: "/api/v1/tasks/batch", body: `{"tasks":[{"type":"echo","payload":` + nest(d) + `}]}`, status: 200, batchField: "tasks[0].payload"}
		if d > 9000 {
			h.status = 400 // past encoding/json's own depth limit: the whole body is refused
		}
		add(h)
	}
	for _, f := range []string{`"type":"e\xffcho"`, `"type":"echo","idempotency_key":"k\xfe"`, `"type":"echo","payload":"\xc3\x28"`, `"type":"echo","trace_id":"\xe2\x82"`} {
		add(hostile{name: "invalid UTF-8 " + cutName(f), method: "POST", path: "/api/v1/tasks", body: "{" + f + "}", status: 400})
		add(hostile{name: "batch invalid UTF-8 " + cutName(f), method: "POST", path: "/api/v1/tasks/batch", body: `{"tasks":[{` + f + `}]}`, status: 400})
	}
	add(hostile{name: "payload over MaxPayloadBytes", method: "POST", path: "/api/v1/tasks", body: `{"type":"echo","payload":"` + strings.Repeat("p", task.MaxPayloadBytes) + `"}`, status: 413, field: "payload"})
	add(hostile{name: "body over the submit limit", method: "POST", path: "/api/v1/tasks", body: strings.Repeat(" ", api.MaxBody+1), status: 413})
	add(hostile{name: "body over the batch limit", method: "POST", path: "/api/v1/tasks/batch", body: strings.Repeat(" ", api.MaxBatchBody+1), status: 413})
	add(hostile{name: "batch of 101", method: "POST", path: "/api/v1/tasks/batch", body: `{"tasks":[` + strings.TrimSuffix(strings.Repeat(`{"type":"echo"},`, 101), ",") + `]}`, status: 400, field: "tasks"})
	add(hostile{name: "batch of 0", method: "POST", path: "/api/v1/tasks/batch", body: `{"tasks":[]}`, status: 400, field: "tasks"})
	add(hostile{name: "batch tasks not a list", method: "POST", path: "/api/v1/tasks/batch", body: `{"tasks":{"type":"echo"}}`, status: 400, field: "tasks"})
	// Wrong values and types for every field of a submit, alone and in a batch.
	for _, c := range []struct{ field, json string }{
		{"type", `1`}, {"type", `[]`}, {"type", `{}`}, {"type", `true`}, {"type", `""`}, {"type", `"a#b"`}, {"type", `"` + strings.Repeat("t", 129) + `"`},
		{"priority", `1`}, {"priority", `"urgent"`}, {"priority", `[]`},
		{"max_attempts", `"3"`}, {"max_attempts", `0`}, {"max_attempts", `101`}, {"max_attempts", `1.5`}, {"max_attempts", `-1`},
		{"timeout_seconds", `"x"`}, {"timeout_seconds", `0`}, {"timeout_seconds", `43201`},
		{"run_at", `5`}, {"run_at", `"yesterday"`},
		{"delay_seconds", `-1`}, {"delay_seconds", `"x"`}, {"delay_seconds", `31536001`},
		{"idempotency_key", `5`}, {"idempotency_key", `"` + strings.Repeat("k", 257) + `"`},
		{"trace_id", `5`}, {"trace_id", `"` + strings.Repeat("t", 129) + `"`}, {"trace_id", `"a b"`},
		{"payload", `"\u0000` + `"`}, // fine JSON: accepted below as a control
		{"nonsense", `1`},
	} {
		body := `{"type":"echo","` + c.field + `":` + c.json + `}`
		if c.field == "type" {
			body = `{"type":` + c.json + `}`
		}
		if c.field == "payload" {
			continue
		}
		add(hostile{name: "submit " + c.field + "=" + cutName(c.json), method: "POST", path: "/api/v1/tasks", body: body, status: 400, field: c.field})
		// Type errors fail the whole batch body; value errors fail the item.
		typeErr := strings.HasPrefix(c.json, `"`) && (c.field == "max_attempts" || c.field == "timeout_seconds" || c.field == "delay_seconds") ||
			!strings.HasPrefix(c.json, `"`) && (c.field == "type" || c.field == "priority" || c.field == "idempotency_key" || c.field == "trace_id") ||
			c.field == "run_at" ||
			c.json == `1.5` || c.field == "nonsense"
		if typeErr {
			add(hostile{name: "batch " + c.field + "=" + cutName(c.json), method: "POST", path: "/api/v1/tasks/batch", body: `{"tasks":[` + body + `]}`, status: 400})
		} else {
			add(hostile{name: "batch " + c.field + "=" + cutName(c.json), method: "POST", path: "/api/v1/tasks/batch", body: `{"tasks":[` + body + `]}`, status: 200, batchField: "tasks[0]." + c.field})
		}
	}
	// A null where a task belongs is no task: the whole batch is refused,
	// naming the item, as for any other item that is not an object.
	add(hostile{name: "batch item null", method: "POST", path: "/api/v1/tasks/batch", body: `{"tasks":[null]}`, status: 400, field: "tasks[0]"})
	add(hostile{name: "batch second item null", method: "POST", path: "/api/v1/tasks/batch", body: `{"tasks":[{"type":"echo"},null]}`, status: 400, field: "tasks[1]"})
	// run_at is RFC 3339 to the nanosecond at most: a longer fraction would
	// be cut without a word (and costs parsing however long it is).
	longFraction := `"2030-01-01T00:00:00.` + strings.Repeat("1", 100) + `Z"`
	add(hostile{name: "run_at with a 100-digit fraction", method: "POST", path: "/api/v1/tasks", body: `{"type":"echo","run_at":` + longFraction + `}`, status: 400, field: "run_at"})
	add(hostile{name: "batch run_at with a 100-digit fraction", method: "POST", path: "/api/v1/tasks/batch", body: `{"tasks":[{"type":"echo","run_at":` + longFraction + `}]}`, status: 400, field: "tasks[0].run_at"})
	add(hostile{name: "run_at with a 10-digit fraction", method: "POST", path: "/api/v1/tasks", body: `{"type":"echo","run_at":"2030-01-01T00:00:00.1234567891Z"}`, status: 400, field: "run_at"})
	add(hostile{name: "run_at and delay", method: "POST", path: "/api/v1/tasks", body: `{"type":"echo","run_at":"2030-01-01T00:00:00Z","delay_seconds":5}`, status: 400, field: "run_at"})
	// Other bodies and parameters.
	for _, b := range []struct{ body, field string }{
		{`{"rate_limit_per_second":"x"}`, "rate_limit_per_second"}, {`{"rate_limit_per_second":-1}`, "rate_limit_per_second"}, {`{"rate_limit_per_second":1e9}`, "rate_limit_per_second"},
		{`{"max_concurrency":"x"}`, "max_concurrency"}, {`{"max_concurrency":-1}`, "max_concurrency"}, {`{"max_concurrency":10001}`, "max_concurrency"}, {`{"bogus":1}`, "bogus"},
	} {
		add(hostile{name: "limits " + b.body, method: "PUT", path: "/api/v1/control/types/echo", body: b.body, status: 400, field: b.field})
	}
	for _, b := range []struct{ body, field string }{
		{`{"type":"` + strings.Repeat("t", 100_000) + `"}`, "type"}, {`{"type":"a#b"}`, "type"}, {`{"type":" "}`, "type"},
		{`{"priority":"x"}`, "priority"}, {`{"limit":0}`, "limit"}, {`{"limit":10001}`, "limit"}, {`{"limit":"x"}`, "limit"}, {`{"bogus":1}`, "bogus"}, {`{"type":5}`, "type"},
	} {
		add(hostile{name: "replay " + cutName(b.body), method: "POST", path: "/api/v1/dlq/replay", body: b.body, status: 400, field: b.field})
	}
	for _, q := range []struct{ query, field string }{
		{"limit=0", "limit"}, {"limit=-1", "limit"}, {"limit=1001", "limit"}, {"limit=x", "limit"}, {"status=x", "status"}, {"priority=x", "priority"},
	} {
		add(hostile{name: "list " + q.query, method: "GET", path: "/api/v1/tasks?" + q.query, status: 400, field: q.field})
	}
	add(hostile{name: "cleanup without older_than", method: "DELETE", path: "/api/v1/tasks", status: 400, field: "older_than"})
	add(hostile{name: "cleanup older_than=x", method: "DELETE", path: "/api/v1/tasks?older_than=x", status: 400, field: "older_than"})
	add(hostile{name: "dlq priority=x", method: "GET", path: "/api/v1/dlq?priority=x", status: 400, field: "priority"})
	add(hostile{name: "dlq limit=0", method: "GET", path: "/api/v1/dlq?limit=0", status: 400, field: "limit"})
	add(hostile{name: "history minutes=0", method: "GET", path: "/api/v1/stats/history?minutes=0", status: 400, field: "minutes"})
	add(hostile{name: "history minutes=x", method: "GET", path: "/api/v1/stats/history?minutes=x", status: 400, field: "minutes"})
	add(hostile{name: "get bodies=x", method: "GET", path: "/api/v1/tasks/01ARZ3NDEKTSV4RRFFQ69G5FAV?bodies=x", status: 400, field: "bodies"})
	add(hostile{name: "dlq type=a#b", method: "GET", path: "/api/v1/dlq?type=a%23b", status: 400, field: "type"})
	add(hostile{name: "dlq long reason", method: "GET", path: "/api/v1/dlq?reason=" + strings.Repeat("r", 300), status: 400, field: "reason"})
	add(hostile{name: "list status=queued,x", method: "GET", path: "/api/v1/tasks?status=queued,x", status: 400, field: "status"})
	add(hostile{name: "list status twice, one bad", method: "GET", path: "/api/v1/tasks?status=queued&status=nope", status: 400, field: "status"})
	for _, b := range []struct{ path, body, field string }{
		{"replay", `{"task_ids":["x"]}`, "task_ids"}, {"replay", `{"task_ids":"x"}`, "task_ids"}, {"replay", `{"message_ids":["m"]}`, "message_ids"},
		{"replay", `{"reason":"` + strings.Repeat("r", 300) + `"}`, "reason"},
		{"purge", `{}`, "confirm"}, {"purge", `{"confirm":"yes"}`, "confirm"}, {"purge", `{"confirm":true,"task_ids":["01ARZ3NDEKTSV4RRFFQ69G5FA"]}`, "task_ids"},
		{"purge", `{"confirm":true,"message_ids":[""]}`, "message_ids"}, {"purge", `{"confirm":true,"priority":"x"}`, "priority"}, {"purge", `{"confirm":true,"type":"a#b"}`, "type"},
	} {
		add(hostile{name: b.path + " " + cutName(b.body), method: "POST", path: "/api/v1/dlq/" + b.path, body: b.body, status: 400, field: b.field})
	}
	add(hostile{name: "unknown route", method: "GET", path: "/api/v1/nope", status: 404})
	add(hostile{name: "wrong method", method: "PATCH", path: "/api/v1/tasks"})
	add(hostile{name: "delete stats", method: "DELETE", path: "/api/v1/stats"})
	return hs
}

func cutName(s string) string {
	if len(s) > 24 {
		return fmt.Sprintf("%q…(%d)", s[:16], len(s))
	}
	return fmt.Sprintf("%q", s)
}

// At least 150 hostile requests against the real API on the emulators:
// none gets a 5xx, every refusal has the JSON error shape and names the
// field when there is one, and the server goes on serving.
func TestHostileRequests(t *testing.T) {
	f := newFix2(t, nil, api.Options{})
	hs := hostileRequests()
	if len(hs) < 150 {
		t.Fatalf("only %d hostile requests", len(hs))
	}
	for _, h := range hs {
		t.Run(h.name, func(t *testing.T) {
			req, err := http.NewRequest(h.method, f.srv.URL+h.path, strings.NewReader(h.body))
			if err != nil {
				t.Skipf("Go's client will not send it: %v", err)
			}
			req.Header.Set("Authorization", "Bearer adm")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			if resp.StatusCode >= 500 {
				t.Fatalf("%d %s", resp.StatusCode, raw)
			}
			if h.status != 0 && resp.StatusCode != h.status || h.status == 0 && (resp.StatusCode < 400 || resp.StatusCode > 499) {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, h.status, raw)
			}
			if resp.StatusCode == 200 {
				var out struct {
					Results []api.BatchItem `json:"results"`
				}
				if err := json.Unmarshal(raw, &out); err != nil || len(out.Results) == 0 || out.Results[0].Error == nil || out.Results[0].Error.Field != h.batchField || out.Results[0].Status < 400 || out.Results[0].Status > 499 {
					t.Fatalf("batch answer %s: want item 0 refused naming %q", raw, h.batchField)
				}
				return
			}
			var e triagetype.ErrorBody
			if err := json.Unmarshal(raw, &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
				t.Fatalf("body %q is not the error shape (%v)", raw, err)
			}
			if h.field != "" && e.Error.Field != h.field {
				t.Fatalf("field %q, want %q: %s", e.Error.Field, h.field, raw)
			}
		})
	}
	code, body := f.do(t, "POST", "/api/v1/tasks", "adm", `{"type":"echo","payload":{"still":"serving"}}`)
	if code != http.StatusCreated {
		t.Fatalf("after the flood, submit = %d %v", code, body)
	}
	if code, _ := f.do(t, "GET", "/api/v1/tasks/"+body["id"].(string), "adm", ""); code != http.StatusOK {
		t.Fatalf("after the flood, get = %d", code)
	}
}
