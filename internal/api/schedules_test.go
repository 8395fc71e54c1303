package api_test

import (
	"fmt"
	"testing"
)

// TestScheduleRoutes runs every schedule route through the real API on the
// emulators, checking each answer against openapi.json, and that a
// refusal names the field at fault.
func TestScheduleRoutes(t *testing.T) {
	d := oaLoad(t)
	s := oaNewServer(t)
	c := &oaCheck{t: t, d: d, srv: s.srv}
	field := func(v any) string { return fmt.Sprint(oaObj(oaObj(v)["error"])["field"]) }
	body := `{"name":"nightly","cron":"0 2 * * *","timezone":"Europe/Berlin","task":{"type":"cleanup","payload":{"days":30},"priority":"low"}}`

	got, _ := c.call("POST /api/v1/schedules", "/api/v1/schedules", "adm", body, 201)
	if oaObj(got)["next_tick"] == nil || oaObj(got)["missed"] != "skip" || oaObj(got)["dst_gap"] != "run" {
		t.Errorf("created schedule %v: want a next tick and the defaults", got)
	}
	c.call("POST /api/v1/schedules", "/api/v1/schedules", "adm", body, 200) // replaced
	c.call("POST /api/v1/schedules", "/api/v1/schedules", "sub", body, 403)
	c.call("POST /api/v1/schedules", "/api/v1/schedules", "", body, 401)
	c.perItem = true // bodies the schema cannot tell are bad: the server names the field
	for _, tc := range []struct{ body, field string }{
		{`{"name":"x","cron":"0 25 * * *","task":{"type":"a"}}`, "cron"},
		{`{"name":"x","cron":"0 2 * * *","timezone":"Mars/Base","task":{"type":"a"}}`, "timezone"},
		{`{"name":"x","cron":"0 2 * * *","task":{"type":""}}`, "task.type"},
		{`{"name":"x","cron":"0 2 * * *","task":{"type":"a","delay_seconds":5}}`, "task.delay_seconds"},
		{`{"name":"x/y","cron":"0 2 * * *","task":{"type":"a"}}`, "name"},
		{`{"name":"x","cron":"0 2 * * *","task":{"type":"a"},"missed":"later"}`, "missed"},
	} {
		e, _ := c.call("POST /api/v1/schedules", "/api/v1/schedules", "adm", tc.body, 400)
		if field(e) != tc.field {
			t.Errorf("%s: refused naming %q, want %q", tc.body, field(e), tc.field)
		}
	}
	c.perItem = false

	c.call("GET /api/v1/schedules/{name}", "/api/v1/schedules/nightly", "ro", "", 200)
	c.call("GET /api/v1/schedules/{name}", "/api/v1/schedules/none", "ro", "", 404)
	c.call("GET /api/v1/schedules/{name}", "/api/v1/schedules/a%20b", "ro", "", 400)
	c.call("POST /api/v1/schedules", "/api/v1/schedules", "adm", `{"name":"hourly","cron":"0 * * * *","task":{"type":"echo"}}`, 201)
	page, _ := c.call("GET /api/v1/schedules", "/api/v1/schedules?limit=1", "ro", "", 200)
	first, _ := oaObj(page)["schedules"].([]any)
	cur, _ := oaObj(page)["cursor"].(string)
	if len(first) != 1 || cur == "" {
		t.Fatalf("first page %v: want one schedule and a cursor", page)
	}
	page, _ = c.call("GET /api/v1/schedules", "/api/v1/schedules?limit=1&cursor="+cur, "ro", "", 200)
	second, _ := oaObj(page)["schedules"].([]any)
	if len(second) != 1 || oaObj(first[0])["name"] != "hourly" || oaObj(second[0])["name"] != "nightly" {
		t.Fatalf("pages %v then %v: want hourly then nightly", first, second)
	}
	c.call("GET /api/v1/schedules", "/api/v1/schedules?limit=0", "ro", "", 400)

	p, _ := c.call("POST /api/v1/schedules/{name}/pause", "/api/v1/schedules/nightly/pause", "adm", "", 200)
	if oaObj(p)["paused"] != true || oaObj(p)["next_tick"] != nil {
		t.Errorf("paused schedule %v: want paused, no next tick", p)
	}
	r, _ := c.call("POST /api/v1/schedules/{name}/resume", "/api/v1/schedules/nightly/resume", "adm", "", 200)
	if oaObj(r)["paused"] != false || oaObj(r)["next_tick"] == nil {
		t.Errorf("resumed schedule %v: want a next tick", r)
	}
	c.call("POST /api/v1/schedules/{name}/pause", "/api/v1/schedules/none/pause", "adm", "", 404)
	c.call("POST /api/v1/schedules/{name}/resume", "/api/v1/schedules/nightly/resume", "ro", "", 403)
	c.call("DELETE /api/v1/schedules/{name}", "/api/v1/schedules/nightly", "adm", "", 204)
	c.call("DELETE /api/v1/schedules/{name}", "/api/v1/schedules/nightly", "adm", "", 404)
}
