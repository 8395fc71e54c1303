package dispatch_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/triagehq/triage/internal/api"
	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/app/consumerapp"
	"github.com/triagehq/triage/internal/auth"
	"github.com/triagehq/triage/internal/dispatch"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/handler"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triageconfig"
	"github.com/triagehq/triage/triagetype"
)

// countingDB counts the item writes the consumer makes through it.
type countingDB struct {
	store.DynamoDB
	writes atomic.Int64
}

func (c *countingDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.writes.Add(1)
	return c.DynamoDB.UpdateItem(ctx, in, opts...)
}

func (c *countingDB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	c.writes.Add(1)
	return c.DynamoDB.PutItem(ctx, in, opts...)
}

func (c *countingDB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.writes.Add(1)
	return c.DynamoDB.TransactWriteItems(ctx, in, opts...)
}

// apiServer serves the real API on a's store, with a read token "rt".
func apiServer(t *testing.T, a *app.App, interval time.Duration) *httptest.Server {
	t.Helper()
	toks, err := auth.Parse("rt:read")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.New(api.Deps{Store: a.Store, Tokens: toks}, api.Options{ProgressInterval: interval}))
	t.Cleanup(srv.Close)
	return srv
}

// getTask reads a task through GET /api/v1/tasks/{id}.
func getTask(t *testing.T, srv *httptest.Server, id string) triagetype.Task {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/tasks/"+id, nil)
	req.Header.Set("Authorization", "Bearer rt")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return triagetype.Task{}
	}
	defer resp.Body.Close()
	var tk triagetype.Task
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&tk) != nil {
		t.Errorf("GET task %s: %s", id, resp.Status)
	}
	return tk
}

// TestGoHandlerProgress runs a Go handler that reports 0 to 100 (101
// reports) and checks that GET shows the progress while it runs and 100
// at the end, and that the reports cost no more writes than the rate
// limit allows: claim + one per min(Lease/3, ProgressInterval) + outcome.
func TestGoHandlerProgress(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	srv := apiServer(t, a, 0)
	for _, tc := range []struct {
		name     string
		lease    time.Duration // heartbeats every lease/3
		interval time.Duration // ProgressInterval
	}{
		{"reports ride the heartbeats", 5 * time.Second, task.ProgressInterval},
		{"early writes between rare heartbeats", 30 * time.Second, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const step = 30 * time.Millisecond
			h := handler.Func(func(ctx context.Context, r handler.Request) (json.RawMessage, error) {
				for p := 0; p <= 100; p++ {
					if err := r.ReportProgress(ctx, p, fmt.Sprintf("row %d", p)); err != nil {
						return nil, err
					}
					time.Sleep(step)
				}
				if err := r.ReportProgress(ctx, 101, ""); err == nil {
					return nil, errors.New("a report of 101% was accepted")
				}
				return json.RawMessage(`"ok"`), nil
			})
			db := &countingDB{DynamoDB: a.DynamoDB}
			st := store.New(db, a.Store.Table(), store.WithBlobs(a.Blobs))
			opt := stacktest.FastDispatch()
			opt.Lease, opt.LeaseMargin, opt.ProgressInterval = tc.lease, time.Second, tc.interval
			id := submit(t, a, "progress", triagetype.High, 1, `{}`)[0]
			started := time.Now()
			stop := stacktest.Run(t, dispatch.New(st, a.Queues, a.Enqueuer, stacktest.Registry("progress", h), opt, dispatch.Deps{}))

			var midRun []int // percentages GET showed while the task ran
			deadline := time.Now().Add(30 * time.Second)
			for time.Now().Before(deadline) {
				tk := getTask(t, srv, id)
				if tk.Status == triagetype.Completed || t.Failed() {
					break
				}
				if tk.Status == triagetype.Executing && tk.Progress != nil {
					midRun = append(midRun, tk.Progress.Percent)
				}
				time.Sleep(100 * time.Millisecond)
			}
			ran := time.Since(started)
			stop()
			done := getTask(t, srv, id)
			if done.Status != triagetype.Completed || done.Progress == nil || done.Progress.Percent != 100 || done.Progress.Message != "row 100" || done.Progress.Attempt != 1 {
				t.Fatalf("finished task: status %s progress %+v; want completed at 100%% (row 100, attempt 1)", done.Status, done.Progress)
			}
			if len(midRun) == 0 || midRun[0] == 100 {
				t.Errorf("GET showed no progress while the task ran (saw %v)", midRun)
			}
			every := min(opt.Lease/3, opt.ProgressInterval)
			bound := int64(2 + ran/every + 1) // claim, outcome, one per interval (+1: the run's edges)
			writes := db.writes.Load()
			t.Logf("101 reports over %s: %d item writes (claim + outcome + %d while running; bound %d); GET saw %v", ran.Round(time.Millisecond), writes, writes-2, bound, midRun)
			if writes > bound {
				t.Errorf("%d writes for 101 reports over %s; the rate limit allows %d", writes, ran, bound)
			}
		})
	}
}

// TestRetrySeesCheckpoint fails a task's first attempt after it saved a
// checkpoint; the second attempt must be given that checkpoint.
func TestRetrySeesCheckpoint(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	var mu sync.Mutex
	seen := map[int]string{} // attempt -> checkpoint it was given
	h := handler.Func(func(ctx context.Context, r handler.Request) (json.RawMessage, error) {
		mu.Lock()
		seen[r.Attempt] = string(r.Checkpoint)
		mu.Unlock()
		if r.Attempt == 1 {
			if err := r.SaveCheckpoint(ctx, json.RawMessage(`{"row":7}`)); err != nil {
				return nil, err
			}
			if err := r.SaveCheckpoint(ctx, bytes.Repeat([]byte("1"), task.MaxCheckpointBytes+1)); err == nil {
				return nil, errors.New("an oversized checkpoint was accepted")
			}
			_ = r.ReportProgress(ctx, 70, "failing at row 7")
			return nil, errors.New("flaky at row 7")
		}
		return r.Checkpoint, nil
	})
	opt := stacktest.FastDispatch()
	opt.Backoff = map[triagetype.Priority]triageconfig.Backoff{triagetype.High: {Base: time.Second, Max: time.Second}}
	id := submit(t, a, "resume", triagetype.High, 1, `{}`)[0]
	stacktest.Run(t, dispatch.New(a.Store, a.Queues, a.Enqueuer, stacktest.Registry("resume", h), opt, dispatch.Deps{}))
	done := stacktest.WaitStatus(t, a.Store, id, triagetype.Completed, 30*time.Second)
	mu.Lock()
	defer mu.Unlock()
	if seen[1] != "" || seen[2] != `{"row":7}` {
		t.Errorf("checkpoints given: attempt 1 %q, attempt 2 %q; want none, then {\"row\":7}", seen[1], seen[2])
	}
	if string(done.Result) != `{"row":7}` || string(done.Checkpoint) != `{"row":7}` {
		t.Errorf("result %s checkpoint %s; want the checkpoint of attempt 1", done.Result, done.Checkpoint)
	}
	if done.Progress == nil || done.Progress.Percent != 70 || done.Progress.Attempt != 1 {
		t.Errorf("progress %+v; want attempt 1's 70%%", done.Progress)
	}
	if done.ProgressToken != "" {
		t.Errorf("a finished task keeps a progress token")
	}
}

// post sends a progress report and returns the status, the decoded body
// and the response headers.
func post(url, token, body string) (int, map[string]any, http.Header, error) {
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewBufferString(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var v map[string]any
	_ = json.Unmarshal(raw, &v)
	return resp.StatusCode, v, resp.Header, nil
}

// TestWebhookProgress runs a webhook handler (on loopback) that reports
// through the API with its attempt's token, and checks each answer of the
// endpoint: bad input 400 naming the field, no token 401, a wrong token
// 403, too soon 429, and after the attempt its own token 403.
func TestWebhookProgress(t *testing.T) {
	env := stacktest.New(t)
	a := env.App(t, nil)
	const interval = 400 * time.Millisecond
	srv := apiServer(t, a, interval)

	type answer struct {
		status int
		field  string
		retry  string
	}
	var mu sync.Mutex
	answers := map[string]answer{}
	var token, progressURL, midStatus string
	var midPercent int
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req handler.Request
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		record := func(name, tok, body string) {
			st, v, hdr, err := post(req.ProgressURL, tok, body)
			a := answer{status: st}
			if err != nil {
				a.field = err.Error()
			}
			if e, ok := v["error"].(map[string]any); ok {
				a.field, _ = e["field"].(string)
			}
			if hdr != nil {
				a.retry = hdr.Get("Retry-After")
			}
			mu.Lock()
			answers[name] = a
			mu.Unlock()
		}
		record("first", req.ProgressToken, `{"percent":0,"message":"starting"}`)
		record("too soon", req.ProgressToken, `{"percent":10}`)
		record("no token", "", `{"percent":10}`)
		record("wrong token", task.NewProgressToken(), `{"percent":10}`)
		record("percent out of range", req.ProgressToken, `{"percent":150}`)
		record("message without percent", req.ProgressToken, `{"message":"hi"}`)
		record("unknown field", req.ProgressToken, `{"percent":5,"pct":5}`)
		record("checkpoint too large", req.ProgressToken, `{"checkpoint":"`+string(bytes.Repeat([]byte("x"), task.MaxCheckpointBytes))+`"}`)
		time.Sleep(interval + 50*time.Millisecond)
		record("last", req.ProgressToken, `{"percent":100,"message":"done","checkpoint":{"page":3}}`)
		tk := getTask(t, srv, req.ID)
		mu.Lock()
		token, progressURL = req.ProgressToken, req.ProgressURL
		midStatus, midPercent = string(tk.Status), -1
		if tk.Progress != nil {
			midPercent = tk.Progress.Percent
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	defer hook.Close()

	a = env.App(t, map[string]string{triageconfig.EnvRoutes: "hook=" + hook.URL, triageconfig.EnvWebhookSecret: "whsec", triageconfig.EnvAPIURL: srv.URL})
	reg, err := consumerapp.Handlers(a)
	if err != nil {
		t.Fatal(err)
	}
	id := submit(t, a, "hook", triagetype.High, 1, `{}`)[0]
	stacktest.Run(t, consumerapp.New(a, reg, stacktest.FastDispatch(), dispatch.Deps{}))
	stacktest.WaitStatus(t, a.Store, id, triagetype.Completed, 30*time.Second)

	mu.Lock()
	defer mu.Unlock()
	if want := srv.URL + "/api/v1/tasks/" + id + "/progress"; progressURL != want || len(token) != 43 {
		t.Fatalf("request carried progress_url %q and a %d-character token; want %q and 43", progressURL, len(token), want)
	}
	for name, want := range map[string]answer{
		"first":                   {status: 200},
		"too soon":                {status: 429, retry: "1"},
		"no token":                {status: 401},
		"wrong token":             {status: 403},
		"percent out of range":    {status: 400, field: "percent"},
		"message without percent": {status: 400, field: "percent"},
		"unknown field":           {status: 400, field: "pct"},
		"checkpoint too large":    {status: 413, field: "checkpoint"},
		"last":                    {status: 200},
	} {
		if got := answers[name]; got != want {
			t.Errorf("%s: got %+v, want %+v", name, got, want)
		}
	}
	if midStatus != string(triagetype.Executing) || midPercent != 100 {
		t.Errorf("GET while the webhook ran: %s at %d%%; want executing at 100%%", midStatus, midPercent)
	}
	done := getTask(t, srv, id)
	if done.Progress == nil || done.Progress.Percent != 100 || done.Progress.Message != "done" || string(done.Checkpoint) != `{"page":3}` {
		t.Errorf("finished task: progress %+v checkpoint %s; want 100%% done and {\"page\":3}", done.Progress, done.Checkpoint)
	}
	if st, _, _, err := post(progressURL, token, `{"percent":50}`); err != nil || st != http.StatusForbidden {
		t.Errorf("a report with the token of an ended attempt: %d %v; want 403", st, err)
	}
}
