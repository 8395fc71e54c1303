package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// scheduleAPI answers the schedule routes with one canned schedule and
// records each request ("METHOD path body").
type scheduleAPI struct {
	mu   sync.Mutex
	reqs []string
}

const cannedSchedule = `{"name":"nightly","cron":"0 2 * * *","timezone":"Europe/Berlin","task":{"type":"cleanup"},"paused":false,"missed":"skip","dst_gap":"run","next_tick":"2026-01-02T01:00:00Z","created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"}`

func (s *scheduleAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.reqs = append(s.reqs, strings.TrimSpace(r.Method+" "+r.URL.RequestURI()+" "+string(b)))
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == "POST" && r.URL.Path == "/api/v1/schedules" && strings.Contains(string(b), `"cron":"bad"`):
		w.WriteHeader(400)
		fmt.Fprint(w, `{"error":{"code":"invalid_field","field":"cron","message":"cron: \"bad\" must have 5 fields"}}`)
	case r.Method == "POST" && r.URL.Path == "/api/v1/schedules":
		w.WriteHeader(201)
		fmt.Fprint(w, cannedSchedule)
	case r.Method == "GET" && r.URL.Path == "/api/v1/schedules":
		fmt.Fprint(w, `{"schedules":[`+cannedSchedule+`],"cursor":"nightly"}`)
	case r.URL.Path == "/api/v1/schedules/none":
		w.WriteHeader(404)
		fmt.Fprint(w, `{"error":{"code":"not_found","field":"name","message":"no schedule named \"none\""}}`)
	case r.Method == "DELETE":
		w.WriteHeader(204)
	case strings.HasSuffix(r.URL.Path, "/pause"):
		fmt.Fprint(w, strings.Replace(strings.Replace(cannedSchedule, `"paused":false`, `"paused":true`, 1), `"next_tick":"2026-01-02T01:00:00Z",`, "", 1))
	default:
		fmt.Fprint(w, cannedSchedule)
	}
}

func TestScheduleCommands(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		out  string // substring of stdout, or of stderr when code != 0
		req  string // substring of the one request sent ("" none)
	}{
		{[]string{"schedule", "create", "nightly", "--cron", "0 2 * * *", "--timezone", "Europe/Berlin", "--type", "cleanup", "--payload", `{"days":30}`, "--priority", "low", "--max-attempts", "2", "--missed", "catch_up", "--catch-up-limit", "5"}, 0,
			`created schedule nightly: "0 2 * * *" Europe/Berlin → cleanup (next 2026-01-02`,
			`POST /api/v1/schedules {"name":"nightly","cron":"0 2 * * *","timezone":"Europe/Berlin","task":{"type":"cleanup","payload":{"days":30},"priority":"low","max_attempts":2},"paused":false,"missed":"catch_up","catch_up_limit":5`},
		{[]string{"schedule", "create", "x", "--cron", "bad", "--type", "a"}, exitUsage, "field cron", `"cron":"bad"`},
		{[]string{"schedule", "create", "x", "--payload", "{"}, exitUsage, "--payload is not valid JSON", ""},
		{[]string{"schedule", "create"}, exitUsage, "", ""},
		{[]string{"schedule", "list", "--limit", "1"}, 0, "nightly  0 2 * * *  Europe/Berlin  cleanup", "GET /api/v1/schedules?limit=1"},
		{[]string{"schedule", "get", "nightly"}, 0, `"cron": "0 2 * * *"`, "GET /api/v1/schedules/nightly"},
		{[]string{"schedule", "get", "none"}, exitNotFound, "404 not_found", "GET /api/v1/schedules/none"},
		{[]string{"schedule", "pause", "nightly"}, 0, "(paused)", "POST /api/v1/schedules/nightly/pause"},
		{[]string{"schedule", "resume", "nightly"}, 0, "(next 2026-01-02", "POST /api/v1/schedules/nightly/resume"},
		{[]string{"schedule", "delete", "nightly"}, 0, "deleted schedule nightly", "DELETE /api/v1/schedules/nightly"},
	} {
		t.Run(strings.Join(tc.args[:2], " "), func(t *testing.T) {
			api := &scheduleAPI{}
			srv := httptest.NewServer(api)
			defer srv.Close()
			var out, errOut bytes.Buffer
			_, root := newRoot(&out, &errOut)
			root.SetArgs(append([]string{"--url", srv.URL, "--token", "tok"}, tc.args...))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err := root.ExecuteContext(ctx)
			if err != nil {
				fmt.Fprintln(&errOut, "triage:", err)
			}
			if code := exitCode(err); code != tc.code {
				t.Fatalf("%v: exit %d, want %d\n%s%s", tc.args, code, tc.code, out.String(), errOut.String())
			}
			got := out.String()
			if tc.code != 0 {
				got = errOut.String()
			}
			if !strings.Contains(got, tc.out) {
				t.Errorf("%v: output lacks %q:\n%s", tc.args, tc.out, got)
			}
			switch {
			case tc.req == "" && len(api.reqs) != 0:
				t.Errorf("%v: sent %v, want nothing", tc.args, api.reqs)
			case tc.req != "" && (len(api.reqs) != 1 || !strings.Contains(api.reqs[0], tc.req)):
				t.Errorf("%v: sent %v, want one request containing %s", tc.args, api.reqs, tc.req)
			}
		})
	}
}
