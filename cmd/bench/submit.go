package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"github.com/triagehq/triage/internal/api"
	"github.com/triagehq/triage/internal/app/apiapp"
	"github.com/triagehq/triage/internal/auth"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Submit is scenario 2: submitting through the HTTP API.
type Submit struct {
	Single    []SubmitLevel `json:"single"`
	BatchMode string        `json:"batch_mode"`
	BatchSize int           `json:"batch_size"`
	Batch     []SubmitLevel `json:"batch"`
	// Calls made per submitted task, for the request counts of scenario 5.
	SingleCounts counts `json:"-"`
	SingleTasks  int    `json:"-"`
	BatchCounts  counts `json:"-"`
	BatchTasks   int    `json:"-"`
	// Baselines are the raw floors for these figures (group 2a).
	Baselines Baselines `json:"baselines"`
}

// SubmitLevel is one concurrency level of a submit test.
type SubmitLevel struct {
	Concurrency int     `json:"concurrency"`
	Requests    int     `json:"requests"`
	Tasks       int     `json:"tasks"`
	Errors      int     `json:"errors"`
	Seconds     float64 `json:"seconds"`
	ReqPerSec   float64 `json:"requests_per_second"`
	TasksPerSec float64 `json:"tasks_per_second"`
	Latency     Dist    `json:"latency"`
}

// Batch modes.
const (
	batchViaAPI       = "API POST /api/v1/tasks/batch"
	batchViaInProcess = "in-process SubmitBatch (API batch endpoint not available)"
	batchSize         = 100
)

// benchToken and benchReadToken are the bearer tokens of the loopback
// API (submit, and read for GET /stats); they exist only in this process.
const (
	benchToken     = "bench-submit-token"
	benchReadToken = "bench-read-token"
)

// producer submits tasks through the app's HTTP API (app.API, the handler
// `triage dev` serves and the API Lambda wraps) on a loopback server.
type producer struct {
	d        *deployment
	srv      *httptest.Server
	hc       *http.Client
	batchAPI bool
	// resent counts batch items the API refused with 503 or 429 (nothing
	// accepted: safe to send again) and that were sent again, as a
	// producer following the API's advice does.
	resent atomic.Int64
}

func newProducer(d *deployment, batchAPI bool) *producer {
	toks := &auth.Tokens{}
	toks.Add(benchToken, auth.Submit)
	toks.Add(benchReadToken, auth.Read)
	return &producer{
		d:   d,
		srv: httptest.NewServer(apiapp.Handler(d.app, toks, api.Options{})),
		hc: &http.Client{
			// Longer than API Gateway's 29 s: on a loaded machine DynamoDB
			// Local, slowed by the run's stream records, took over 30 s for
			// batches of 100 sent 16 at a time, and a request the client
			// gives up on still creates its tasks (unknown to the ledger).
			Timeout:   2 * time.Minute,
			Transport: &http.Transport{MaxIdleConns: 2 * maxIdleConnsPerHost, MaxIdleConnsPerHost: maxIdleConnsPerHost},
		},
		batchAPI: batchAPI,
	}
}

func (p *producer) close() {
	p.hc.CloseIdleConnections()
	p.srv.Close()
	if n := p.resent.Load(); n > 0 {
		// Reported with the deployment's warnings, so the run's notes say it.
		p.d.app.Log.Warn(fmt.Sprintf("bench producer: %d batch items refused with 503 or 429 (nothing accepted) were sent again", n))
	}
}

func (p *producer) post(ctx context.Context, path string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+benchToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	return resp.StatusCode, b, err
}

// get GETs path with the read token.
func (p *producer) get(ctx context.Context, path string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.srv.URL+path, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+benchReadToken)
	resp, err := p.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	return resp.StatusCode, b, err
}

// submit POSTs one task and returns its id.
func (p *producer) submit(ctx context.Context, r task.Request) (string, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return "", err
	}
	code, b, err := p.post(ctx, "/api/v1/tasks", body)
	if err != nil {
		return "", fmt.Errorf("POST /api/v1/tasks: %w", err)
	}
	if code != http.StatusCreated {
		return "", fmt.Errorf("POST /api/v1/tasks: status %d: %s", code, bytes.TrimSpace(b))
	}
	var t struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(b, &t); err != nil || t.ID == "" {
		return "", fmt.Errorf("POST /api/v1/tasks: no task id in %s", bytes.TrimSpace(b))
	}
	return t.ID, nil
}

// batchRounds bounds how often submitBatch sends the items the API
// refused with 503 or 429 again, a second apart.
const batchRounds = 5

// submitBatch submits rs (at most 100) in one batch: through the API's
// batch endpoint when it exists, else through the enqueuer in process.
// Items refused with 503 or 429 (nothing was accepted) are sent again, up
// to batchRounds times. It returns the ids of the tasks created and an
// error naming the first task that was not.
func (p *producer) submitBatch(ctx context.Context, rs []task.Request) ([]string, error) {
	var ids []string
	for round := 1; ; round++ {
		got, again, err := p.submitBatchOnce(ctx, rs)
		ids = append(ids, got...)
		if err != nil || len(again) == 0 {
			return ids, err
		}
		if round == batchRounds {
			return ids, fmt.Errorf("POST /api/v1/tasks/batch: %d tasks still refused after %d rounds", len(again), round)
		}
		p.resent.Add(int64(len(again)))
		retry := make([]task.Request, len(again))
		for i, j := range again {
			retry[i] = rs[j]
		}
		rs = retry
		select {
		case <-ctx.Done():
			return ids, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// submitBatchOnce sends rs once; again lists the items refused with 503
// or 429.
func (p *producer) submitBatchOnce(ctx context.Context, rs []task.Request) (ids []string, again []int, err error) {
	if !p.batchAPI {
		ts := make([]*task.Task, len(rs))
		for i := range rs {
			ts[i] = rs[i].NewTask(time.Now().UTC(), 15*time.Minute)
		}
		var firstErr error
		for _, r := range p.d.app.Enqueuer.SubmitBatch(ctx, ts) {
			switch {
			case r.Err != nil && firstErr == nil:
				firstErr = fmt.Errorf("SubmitBatch: %w", r.Err)
			case r.Err == nil:
				ids = append(ids, r.Task.ID)
			}
		}
		return ids, nil, firstErr
	}
	body, err := json.Marshal(api.BatchRequest{Tasks: rs})
	if err != nil {
		return nil, nil, err
	}
	code, b, err := p.post(ctx, "/api/v1/tasks/batch", body)
	if err != nil {
		return nil, nil, fmt.Errorf("POST /api/v1/tasks/batch: %w", err)
	}
	if code/100 != 2 {
		return nil, nil, fmt.Errorf("POST /api/v1/tasks/batch: status %d: %s", code, bytes.TrimSpace(b))
	}
	var out struct {
		Results []struct {
			Status int `json:"status"`
			Task   *struct {
				ID string `json:"id"`
			} `json:"task"`
			Error *triagetype.ErrorDetail `json:"error"`
		} `json:"results"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, nil, fmt.Errorf("POST /api/v1/tasks/batch: response: %w", err)
	}
	var firstErr error
	for i, r := range out.Results {
		switch {
		case r.Status == http.StatusCreated && r.Task != nil:
			ids = append(ids, r.Task.ID)
		case r.Status == http.StatusServiceUnavailable || r.Status == http.StatusTooManyRequests:
			again = append(again, i)
		case firstErr == nil:
			msg := fmt.Sprintf("status %d", r.Status)
			if r.Error != nil {
				msg += ": " + r.Error.Message
			}
			firstErr = fmt.Errorf("POST /api/v1/tasks/batch: task %d not created: %s", i, msg)
		}
	}
	if len(out.Results) != len(rs) && firstErr == nil {
		firstErr = fmt.Errorf("POST /api/v1/tasks/batch: %d results for %d tasks", len(out.Results), len(rs))
	}
	return ids, again, firstErr
}

// detectBatchAPI asks the API whether POST /api/v1/tasks/batch exists: an
// empty batch is refused with 400 by the endpoint, and with 404 (or 405)
// when there is no such route. Nothing is created either way.
func detectBatchAPI(ctx context.Context, d *deployment) (bool, error) {
	p := newProducer(d, false)
	defer p.close()
	code, b, err := p.post(ctx, "/api/v1/tasks/batch", []byte(`{"tasks":[]}`))
	if err != nil {
		return false, fmt.Errorf("probe POST /api/v1/tasks/batch: %w", err)
	}
	switch {
	case code == http.StatusNotFound || code == http.StatusMethodNotAllowed:
		return false, nil
	case code == http.StatusBadRequest || code/100 == 2:
		return true, nil
	}
	return false, fmt.Errorf("probe POST /api/v1/tasks/batch: unexpected status %d: %s", code, bytes.TrimSpace(b))
}

// measureSubmit runs scenario 2 on a fresh deployment.
func measureSubmit(ctx context.Context, cl clients, cnt *counter, o options, batchAPI bool, problems *problems) (Submit, error) {
	d, err := deploy(ctx, cl, "bench-submit")
	if err != nil {
		return Submit{}, err
	}
	defer func() { _ = d.teardown(context.WithoutCancel(ctx), cl) }()
	p := newProducer(d, batchAPI)
	defer p.close()

	one := task.Request{Type: "noop", Priority: triagetype.Medium, Payload: json.RawMessage(`{"bench":true}`)}
	submitOne := func(ctx context.Context) (int, error) {
		_, err := p.submit(ctx, one)
		if err != nil {
			return 0, err
		}
		return 1, nil
	}
	// Warm up connections and DynamoDB Local's JIT outside the measurement.
	if _, err := runLevel(ctx, o.Concurrency, 4*o.Concurrency, submitOne); err != nil {
		return Submit{}, fmt.Errorf("warm-up: %w", err)
	}
	s := Submit{BatchSize: batchSize, BatchMode: batchViaInProcess}
	if batchAPI {
		s.BatchMode = batchViaAPI
	}
	// The raw floors first, on the same deployment and the same warm
	// emulators, so each figure below has its baseline from this run.
	if s.Baselines, err = measureBaselines(ctx, cl, d, o, o.Submits, o.Tasks); err != nil {
		return s, fmt.Errorf("baselines: %w", err)
	}
	before := cnt.snapshot()
	for _, c := range levels(o.Concurrency) {
		lv, err := runLevel(ctx, c, o.Submits, submitOne)
		if err != nil {
			return s, err
		}
		s.Single = append(s.Single, lv)
		s.SingleTasks += lv.Tasks
		if lv.Errors > 0 {
			problems.add("submit: %d of %d single submits at concurrency %d failed", lv.Errors, lv.Requests, c)
		}
	}
	s.SingleCounts = cnt.snapshot().since(before)

	batch := make([]task.Request, batchSize)
	for i := range batch {
		batch[i] = task.Request{Type: "noop", Priority: triagetype.Medium}
	}
	submitBatch := func(ctx context.Context) (int, error) {
		ids, err := p.submitBatch(ctx, batch)
		if err != nil {
			return 0, err
		}
		return len(ids), nil
	}
	before = cnt.snapshot()
	for _, c := range levels(o.Concurrency) {
		lv, err := runLevel(ctx, c, o.Batches, submitBatch)
		if err != nil {
			return s, err
		}
		s.Batch = append(s.Batch, lv)
		s.BatchTasks += lv.Tasks
		if lv.Errors > 0 {
			problems.add("submit: %d of %d batch submits at concurrency %d failed", lv.Errors, lv.Requests, c)
		}
	}
	s.BatchCounts = cnt.snapshot().since(before)
	// Last, the single submit again as `make run` has it: a consumer and
	// the counters poller at work on the same table and queues.
	if s.Baselines.Beside, s.Baselines.PairBeside, err = measureBeside(ctx, cl, d, o, submitOne); err != nil {
		return s, fmt.Errorf("submit beside a consumer: %w", err)
	}
	return s, nil
}

// levels are the concurrency levels measured: 1 and c.
func levels(c int) []int {
	if c <= 1 {
		return []int{1}
	}
	return []int{1, c}
}

// runLevel makes n calls of do from c workers and measures each call.
// A failed call is counted, not retried; the first failure is returned
// only when every call failed.
func runLevel(ctx context.Context, c, n int, do func(context.Context) (int, error)) (SubmitLevel, error) {
	lat := make([]time.Duration, 0, n)
	var mu sync.Mutex
	var wg sync.WaitGroup
	jobs := make(chan struct{}, n)
	for range n {
		jobs <- struct{}{}
	}
	close(jobs)
	lv := SubmitLevel{Concurrency: c, Requests: n}
	var firstErr error
	start := time.Now()
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				if ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				k, err := do(ctx)
				el := time.Since(t0)
				mu.Lock()
				if err != nil {
					lv.Errors++
					if firstErr == nil {
						firstErr = err
					}
				} else {
					lv.Tasks += k
					lat = append(lat, el)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	if err := ctx.Err(); err != nil {
		return lv, err
	}
	if lv.Errors == n {
		return lv, firstErr
	}
	lv.Seconds = round(el.Seconds(), 3)
	lv.ReqPerSec = round(rate(n-lv.Errors, el), 1)
	lv.TasksPerSec = round(rate(lv.Tasks, el), 1)
	lv.Latency = distOf(lat)
	return lv, nil
}

// loadTasks submits rs through p in batches of 100 from workers goroutines
// and returns the ids of the tasks created.
func loadTasks(ctx context.Context, p *producer, rs []task.Request, workers int) ([]string, error) {
	return loadTasksChunked(ctx, p, rs, workers, batchSize)
}

// loadTasksChunked is loadTasks with batches of chunk tasks.
func loadTasksChunked(ctx context.Context, p *producer, rs []task.Request, workers, chunk int) ([]string, error) {
	jobs := make(chan []task.Request)
	var mu sync.Mutex
	var ids []string
	var firstErr error
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for chunk := range jobs {
				got, err := p.submitBatch(ctx, chunk)
				mu.Lock()
				ids = append(ids, got...)
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("load: %w", err)
				}
				mu.Unlock()
			}
		}()
	}
	for start := 0; start < len(rs) && ctx.Err() == nil; start += chunk {
		jobs <- rs[start:min(start+chunk, len(rs))]
	}
	close(jobs)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return ids, err
	}
	return ids, firstErr
}

// requests builds n noop task requests, priority chosen by index.
func requests(n int, prio func(i int) triagetype.Priority) []task.Request {
	rs := make([]task.Request, n)
	for i := range rs {
		rs[i] = task.Request{Type: "noop", Priority: prio(i)}
	}
	return rs
}
