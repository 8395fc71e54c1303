package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/triagetype"
)

// batchAPI answers the batch routes as the API would for one batch
// (id batchID), counting members, and records each request ("METHOD path
// body"). A member of type "bad" is refused in its result, as the API
// refuses a member of an unknown type.
type batchAPI struct {
	mu     sync.Mutex
	reqs   []string
	total  int
	sealed bool
}

const batchID = "01M8BNV6KR1AQA81E1Q1J1W5KX"

func (s *batchAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, strings.TrimSpace(r.Method+" "+r.URL.RequestURI()+" "+string(b)))
	w.Header().Set("Content-Type", "application/json")
	if strings.Contains(r.URL.Path, "/none") {
		w.WriteHeader(404)
		fmt.Fprint(w, `{"error":{"code":"not_found","field":"id","message":"no batch with id \"none\""}}`)
		return
	}
	var req triage.BatchCreate
	_ = json.Unmarshal(b, &req)
	var results []triagetype.BatchResult
	for i, m := range req.Tasks {
		if m.Type == "bad" {
			results = append(results, triagetype.BatchResult{Index: i, Status: 400, Error: &triagetype.ErrorDetail{Code: triagetype.CodeInvalidField, Field: fmt.Sprintf("tasks[%d].type", i), Message: "unknown task type"}})
			continue
		}
		s.total++
		results = append(results, triagetype.BatchResult{Index: i, Status: 201, Task: &triage.Task{ID: fmt.Sprintf("m%d", s.total), Type: m.Type, BatchID: batchID}})
	}
	status := 200
	switch {
	case r.Method == "POST" && r.URL.Path == "/api/v1/batches":
		status, s.sealed = 201, !req.Open
	case strings.HasSuffix(r.URL.Path, "/seal"):
		s.sealed = true
	}
	out := triagetype.Batch{ID: batchID, State: triagetype.BatchOpen, Progress: triagetype.BatchProgress{Total: s.total}, Results: results}
	if s.sealed {
		out.State = triagetype.BatchSealed
	}
	if r.Method == "GET" {
		out.State, out.CallbackID = triagetype.BatchCompleted, "cb1"
		out.Progress = triagetype.BatchProgress{Total: 3, Done: 3, Completed: 2, DeadLettered: 1}
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(out)
}

func TestBatchCommands(t *testing.T) {
	big := ndjson(t, manyLines(250, `{"type":"email","payload":{"n":%d}}`)...)
	mixed := ndjson(t, `{"type":"email"}`, ``, `{"type":"bad"}`)
	for _, tc := range []struct {
		name string
		args []string
		code int
		out  string   // substring of stdout, or of stderr when code != 0
		reqs []string // prefixes of the requests sent, in order
	}{
		{"create sealed", []string{"batch", "create", "-f", mixed, "--on-complete", "report", "--on-complete-payload", `{"campaign":42}`}, exitError,
			"line 3: 400 invalid_field: unknown task type",
			[]string{`POST /api/v1/batches {"tasks":[{"type":"email"},{"type":"bad"}],"on_complete":{"type":"report","payload":{"campaign":42}}}`}},
		{"create 250: open, added 100 at a time, then sealed", []string{"batch", "create", "-f", big, "--on-complete", "report"}, 0,
			"batch " + batchID + "  sealed  0/250 done",
			[]string{`POST /api/v1/batches {"tasks":[{"type":"email","payload":{"n":0}}`, `POST /api/v1/batches/` + batchID + `/tasks {"tasks":[{"type":"email","payload":{"n":100}}`,
				`POST /api/v1/batches/` + batchID + `/tasks {"tasks":[{"type":"email","payload":{"n":200}}`, `POST /api/v1/batches/` + batchID + `/seal`}},
		{"create open, empty", []string{"batch", "create", "--on-complete", "report"}, 0, "open  0/0 done",
			[]string{`POST /api/v1/batches {"on_complete":{"type":"report"},"open":true}`}},
		{"create: payload without a type", []string{"batch", "create", "--on-complete-payload", "{}"}, exitUsage, "need --on-complete TYPE", nil},
		{"create: bad callback payload", []string{"batch", "create", "--on-complete", "r", "--on-complete-payload", "{"}, exitUsage, "not valid JSON", nil},
		{"add", []string{"batch", "add", batchID, "-f", big}, 0, "added 250 of 250 members",
			[]string{`POST /api/v1/batches/` + batchID + `/tasks {"tasks":[{"type":"email","payload":{"n":0}}`, `POST /api/v1/batches/` + batchID + `/tasks`, `POST /api/v1/batches/` + batchID + `/tasks`}},
		{"add without a file", []string{"batch", "add", batchID}, exitUsage, "", nil},
		{"seal", []string{"batch", "seal", batchID}, 0, "batch " + batchID + "  sealed", []string{`POST /api/v1/batches/` + batchID + `/seal`}},
		{"show", []string{"batch", "show", batchID}, 0, "completed  3/3 done: 2 completed, 1 dead-lettered, 0 cancelled\ncallback: cb1\n", []string{`GET /api/v1/batches/` + batchID}},
		{"show unknown", []string{"batch", "show", "none"}, exitNotFound, "404 not_found", []string{`GET /api/v1/batches/none`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := &batchAPI{}
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
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, out.String(), errOut.String())
			}
			where := out.String()
			if tc.code != 0 {
				where = errOut.String()
			}
			if !strings.Contains(where, tc.out) {
				t.Errorf("output lacks %q:\nstdout: %s\nstderr: %s", tc.out, out.String(), errOut.String())
			}
			if len(api.reqs) != len(tc.reqs) {
				t.Fatalf("%d requests, want %d: %q", len(api.reqs), len(tc.reqs), api.reqs)
			}
			for i, want := range tc.reqs {
				if !strings.HasPrefix(api.reqs[i], want) {
					t.Errorf("request %d = %.300s\nwant prefix %s", i, api.reqs[i], want)
				}
			}
		})
	}
}
