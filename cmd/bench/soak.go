package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/triagehq/triage/internal/api"
	"github.com/triagehq/triage/internal/queue"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triageconfig"
	"github.com/triagehq/triage/triagetype"
)

// Group soak (issue #31, "Done when"): tasks submitted over HTTP, singles
// and batches with idempotency keys, to two API processes, run by three
// consumer processes and swept by one promoter process, all this binary
// re-executed (soakchild.go) on the same emulators, table and queues.
// While tasks flow, a random consumer is SIGKILLed every 1-3 s and the
// APIs a few times, each restarted at once; a submit whose connection
// dies is sent again with the same keys to the other API, as a client
// does. Then the chaos stops and the soak waits (bounded) until every
// accepted task is terminal. The handlers' trace files (one line per
// start, done or abort, appended with O_APPEND) give the runs per task and
// any two runs of a task that overlapped; the children's logs stay in
// cmd/bench/out/soak/ for whoever investigates.

// Soak is the soak group's figures.
type Soak struct {
	Planned        int     `json:"tasks_planned"`
	Consumers      int     `json:"consumers"`
	Slots          int     `json:"slots_per_consumer"`
	APIs           int     `json:"apis"`
	LeaseSeconds   float64 `json:"lease_seconds"`
	PromoteSeconds float64 `json:"promote_interval_seconds"`
	Seed           uint64  `json:"seed"`

	SingleRequests int `json:"single_requests"`
	BatchRequests  int `json:"batch_requests"`
	Accepted       int `json:"accepted"`
	NotAccepted    int `json:"not_accepted"`
	// SubmitsRetried counts requests sent again with the same keys after
	// their connection died (ConnErrors) or the API answered 429, 503 or
	// another 5xx for them or their items.
	SubmitsRetried int      `json:"submits_retried"`
	ConnErrors     int      `json:"submit_connection_errors"`
	SubmitErrors   []string `json:"submit_errors,omitempty"`

	ConsumerKills int     `json:"consumer_kills"`
	APIKills      int     `json:"api_kills"`
	SubmitSeconds float64 `json:"submit_seconds"`
	ChaosSeconds  float64 `json:"chaos_seconds"`
	// DrainSeconds is the time from the chaos's end until every accepted
	// task was terminal (or DrainLimit, when some never were).
	DrainSeconds float64 `json:"seconds_to_drain"`
	DrainLimit   float64 `json:"drain_limit_seconds"`

	Completed  int `json:"completed"`
	DeadLetter int `json:"dead_letter"`
	Cancelled  int `json:"cancelled"`
	// DeadLetterTasks are the dead-lettered tasks, "id attempts=N runs=R
	// error": the handler never fails, so each was dead-lettered by
	// triage itself (kills, receives) and is a finding.
	DeadLetterTasks []string `json:"dead_letter_tasks,omitempty"`
	// DLQ counts the messages in the DLQs at the end by reason (the
	// reason triage gave, or "redriven by SQS" when none).
	DLQ map[string]int `json:"dlq_messages_by_reason,omitempty"`
	// DLQAccepted counts the DLQ messages at the end that name an
	// accepted task (the rest name tasks never recorded: a killed or
	// refused submit's messages, resent under new ids with the same keys).
	DLQAccepted int `json:"dlq_messages_of_accepted_tasks"`
	// Stranded are accepted tasks not terminal at the end, as "id status
	// attempts=N priority=P" (or "id missing" with no record).
	Stranded      int      `json:"stranded"`
	StrandedTasks []string `json:"stranded_tasks,omitempty"`

	// From the handlers' traces.
	Runs            int      `json:"runs"`
	MaxRuns         int      `json:"max_runs_per_task"`
	RanMoreThanOnce int      `json:"tasks_started_more_than_once"`
	Overlapping     int      `json:"tasks_with_overlapping_runs"`
	OverlapExamples []string `json:"overlap_examples,omitempty"`
	// LiveLeaseExpiries counts reclaims (consumer log "reclaiming task
	// whose lease expired") whose previous worker was still alive then:
	// the only way two runs of a task may overlap.
	LiveLeaseExpiries int `json:"lease_expiries_of_live_workers"`
	// ClaimToStart is, for completed tasks, the time from the claim (the
	// record's started_at, taken before the claim's write) to the
	// handler's start line of that attempt: mostly the claim's write. A
	// kill in this window loses the attempt without a run.
	ClaimToStart Dist `json:"claim_to_handler_start"`
	// Reclaims counts all of them (a killed worker's claims, mostly), and
	// RunsCut the handler runs a SIGKILL ended (no done or abort line).
	Reclaims            int `json:"reclaims"`
	RunsCut             int `json:"runs_cut_by_a_kill"`
	RanNotAccepted      int `json:"ran_not_accepted"`
	CompletedWithoutRun int `json:"completed_without_a_run"`

	// The promoter child's sweeps, summed from its log.
	PromoterReleased   int `json:"promoter_released"`
	PromoterReconciled int `json:"promoter_reconciled"`
	PromoterRescued    int `json:"promoter_rescued"`
	// ChildWarnings are the children's warnings and errors, "N × role:
	// message", most frequent first.
	ChildWarnings []string `json:"child_warnings,omitempty"`

	Targets []Target `json:"targets"`
	Logs    string   `json:"logs"`
}

// runSoak runs the soak group into r.
func runSoak(ctx context.Context, o options, cl clients, root string, r *Results, probs *problems, progress func(string, ...any)) error {
	progress("soak: %d tasks while consumer and API processes are SIGKILLed", o.SoakTasks)
	s, err := measureSoak(ctx, cl, root, o.SoakTasks, o.Quick, probs, progress)
	r.Soak = &s
	if err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	return nil
}

// soakSettings are the soak's sizes: the full run's, or -quick's.
type soakSettings struct {
	tasks       int
	window      time.Duration // submits spread over this long
	tail        time.Duration // chaos goes on this long after the last submit
	maxChaos    time.Duration // and never longer than this
	consumerMax int           // consumer kills at most
	apiKills    int           // API kills (spread over the window)
	drain       time.Duration // wait at most this long for every task to be terminal
}

func soakSizes(tasks int, quick bool) soakSettings {
	if quick {
		return soakSettings{tasks: tasks, window: 15 * time.Second, tail: 5 * time.Second, maxChaos: 45 * time.Second, consumerMax: 15, apiKills: 2, drain: 5 * time.Minute}
	}
	return soakSettings{tasks: tasks, window: 45 * time.Second, tail: 10 * time.Second, maxChaos: 2 * time.Minute, consumerMax: 40, apiKills: 4, drain: 5 * time.Minute}
}

const (
	soakConsumers = 3
	soakAPIs      = 2
	soakSlots     = 4
	soakLease     = 10 * time.Second
	soakPromote   = 3 * time.Second
	soakToken     = "bench-soak-token"
	soakSubmitW   = 4 // submits in flight at once
	soakRounds    = 40
)

// measureSoak runs the soak; figures that fail it (a stranded task, two
// overlapping runs, a completion without a run) are added to probs.
func measureSoak(ctx context.Context, cl clients, root string, tasks int, quick bool, probs *problems, progress func(string, ...any)) (Soak, error) {
	set := soakSizes(tasks, quick)
	s := Soak{Planned: set.tasks, Consumers: soakConsumers, Slots: soakSlots, APIs: soakAPIs, LeaseSeconds: soakLease.Seconds(),
		PromoteSeconds: soakPromote.Seconds(), Seed: rand.Uint64(), DrainLimit: set.drain.Seconds()}
	rng := rand.New(rand.NewPCG(s.Seed, 31))
	dir := filepath.Join(root, "cmd", "bench", "out", "soak")
	if err := os.RemoveAll(dir); err != nil {
		return s, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "runs"), 0o755); err != nil {
		return s, err
	}
	s.Logs, _ = filepath.Rel(root, dir)
	prefix := fmt.Sprintf("bs%d", time.Now().UnixNano()%1e6)
	d, err := deploy(ctx, cl, prefix)
	if err != nil {
		return s, err
	}
	defer func() { _ = d.teardown(context.WithoutCancel(ctx), cl) }()

	exe, err := os.Executable()
	if err != nil {
		return s, fmt.Errorf("find the bench binary: %w", err)
	}
	env := append(os.Environ(),
		triageconfig.EnvPrefix+"="+prefix,
		triageconfig.EnvTable+"="+d.app.Config.Table,
		triageconfig.EnvBucket+"="+d.app.Config.Bucket,
		triageconfig.EnvToken+"="+soakToken,
		triageconfig.EnvConcurrency+"="+strconv.Itoa(soakSlots),
		triageconfig.EnvLease+"="+soakLease.String(),
		triageconfig.EnvPromoteInterval+"="+soakPromote.String(),
		triageconfig.EnvLogLevel+"=debug", // every task transition, for the evidence
		soakRunsEnv+"="+filepath.Join(dir, "runs"),
	)
	fl := newFleet(exe, env, dir)
	defer fl.stop() // every child, on any return (a panic here included; Ctrl-C ends ctx)
	if _, err := fl.start(ctx, "promoter", 0); err != nil {
		return s, err
	}
	for i := range soakConsumers {
		if _, err := fl.start(ctx, "consumer", i); err != nil {
			return s, err
		}
	}
	pool := &apiPool{addrs: make([]string, soakAPIs)}
	for i := range soakAPIs {
		p, err := fl.start(ctx, "api", i)
		if err != nil {
			return s, err
		}
		pool.set(i, p.ready)
	}
	progress("   soak: %d tasks over %v to %d API processes, %d consumer processes (%d slots, lease %v), a promoter every %v; logs in %s",
		set.tasks, set.window, soakAPIs, soakConsumers, soakSlots, soakLease, soakPromote, s.Logs)

	// Submits and chaos, side by side.
	drv := &soakDriver{pool: pool, hc: &http.Client{Timeout: time.Minute}, prefix: prefix, ids: make([]string, set.tasks)}
	units := soakUnits(set.tasks, rng)
	start := time.Now()
	submitted := make(chan struct{})
	go func() {
		defer close(submitted)
		drv.run(ctx, units, set.window)
	}()
	chaosErr := make(chan error, 1)
	go func() {
		chaosErr <- soakChaos(ctx, fl, pool, set, rand.New(rand.NewPCG(s.Seed, 32)), submitted, &s, progress)
	}()
	<-submitted
	s.SubmitSeconds = round(time.Since(start).Seconds(), 1)
	if err := <-chaosErr; err != nil {
		return s, fmt.Errorf("chaos: %w", err)
	}
	chaosEnd := time.Now()
	s.ChaosSeconds = round(chaosEnd.Sub(start).Seconds(), 1)
	drv.figures(&s)
	progress("   soak: %d of %d accepted in %.1f s (%d requests retried, %d cut by a kill); %d consumer and %d API kills in %.1f s",
		s.Accepted, s.Planned, s.SubmitSeconds, s.SubmitsRetried, s.ConnErrors, s.ConsumerKills, s.APIKills, s.ChaosSeconds)
	if err := ctx.Err(); err != nil {
		return s, err
	}

	// Drain: consumers and promoter keep running, nothing is killed.
	accepted := drv.acceptedIDs()
	final, err := soakDrain(ctx, d.app.Store.GetMany, accepted, set.drain, progress)
	if err != nil {
		return s, err
	}
	s.DrainSeconds = round(time.Since(chaosEnd).Seconds(), 1)
	fl.stop()

	// The verdict.
	for _, id := range accepted {
		t := final[id]
		switch {
		case t == nil:
			s.StrandedTasks = append(s.StrandedTasks, id+" missing (no record)")
		case t.Status == triagetype.Completed:
			s.Completed++
		case t.Status == triagetype.DeadLetter:
			s.DeadLetter++
			why := ""
			if t.Error != nil {
				why = t.Error.Message
			}
			s.DeadLetterTasks = append(s.DeadLetterTasks, fmt.Sprintf("%s attempts=%d priority=%s: %s", id, t.Attempts, t.Priority, why))
		case t.Status == triagetype.Cancelled:
			s.Cancelled++
		default:
			s.StrandedTasks = append(s.StrandedTasks, fmt.Sprintf("%s %s attempts=%d priority=%s", id, t.Status, t.Attempts, t.EffectivePriority))
		}
	}
	s.Stranded = len(s.StrandedTasks)
	tr, err := readTraces(filepath.Join(dir, "runs"))
	if err != nil {
		return s, err
	}
	tr.judge(&s, accepted, final, fl.exits())
	for i, x := range s.DeadLetterTasks {
		id, rest, _ := strings.Cut(x, " ")
		s.DeadLetterTasks[i] = fmt.Sprintf("%s runs=%d %s", id, len(tr.runs[id]), rest)
	}
	dlq, err := dlqCensus(ctx, d.app.Queues)
	if err != nil {
		probs.note("soak: reading the DLQs: %v", err)
	}
	s.DLQ = map[string]int{}
	isAccepted := map[string]bool{}
	for _, id := range accepted {
		isAccepted[id] = true
	}
	for _, m := range dlq {
		s.DLQ[dlqReason(m)]++
		var msg struct {
			ID string `json:"id"`
		}
		if json.Unmarshal([]byte(m.Body), &msg) == nil && isAccepted[msg.ID] {
			s.DLQAccepted++
		}
	}
	logs := readChildLogs(fl)
	s.LiveLeaseExpiries, s.Reclaims = logs.liveLeaseExpiries, logs.reclaims
	if err := fl.writeProcs(filepath.Join(dir, "procs.txt")); err != nil {
		probs.note("soak: writing the children's list: %v", err)
	}
	s.PromoterReleased, s.PromoterReconciled, s.PromoterRescued = logs.released, logs.reconciled, logs.rescued
	s.ChildWarnings = logs.top(12)
	if s.Stranded+s.DeadLetter > 0 {
		if err := writeEvidence(filepath.Join(dir, "evidence.txt"), append(slices.Clone(s.StrandedTasks), s.DeadLetterTasks...), final, fl, tr, dlq); err != nil {
			probs.note("soak: writing the evidence: %v", err)
		}
	}
	s.Targets = []Target{
		newTarget("soak: accepted tasks not terminal at the end (stranded)", float64(s.Stranded), 0, "tasks", true, "issue #31: every accepted task terminal"),
		newTarget("soak: tasks with two overlapping runs", float64(s.Overlapping), 0, "tasks", true, "a claim's lease; 0 unless a live worker's lease expired"),
		newTarget("soak: completed tasks whose handler never started", float64(s.CompletedWithoutRun), 0, "tasks", true, "every completion is a run"),
		newTarget("soak: tasks dead-lettered although their handler never failed", float64(s.DeadLetter), 0, "tasks", true, "the soak's handler always succeeds"),
	}
	if s.Stranded > 0 {
		probs.add("soak: %d of %d accepted tasks not terminal after %.0f s of drain: %s (evidence in %s/evidence.txt)",
			s.Stranded, s.Accepted, set.drain.Seconds(), strings.Join(s.StrandedTasks[:min(5, s.Stranded)], "; "), s.Logs)
	}
	if s.Overlapping > 0 {
		probs.add("soak: %d tasks ran twice at once in different processes (%d lease expiries of live workers): %s",
			s.Overlapping, s.LiveLeaseExpiries, strings.Join(s.OverlapExamples, "; "))
	}
	if s.CompletedWithoutRun > 0 {
		probs.add("soak: %d tasks completed without a handler start in the traces", s.CompletedWithoutRun)
	}
	if s.DeadLetter > 0 {
		probs.note("soak: %d accepted tasks dead-lettered although the handler never fails: %s (evidence in %s/evidence.txt)",
			s.DeadLetter, strings.Join(s.DeadLetterTasks[:min(5, s.DeadLetter)], "; "), s.Logs)
	}
	if s.NotAccepted > 0 {
		probs.note("soak: %d of %d tasks never accepted (every submit of them failed): %s", s.NotAccepted, s.Planned, strings.Join(s.SubmitErrors, "; "))
	}
	progress("   soak: %d terminal (%d completed, %d dead_letter), %d stranded, %.1f s to drain; runs: max %d, %d started more than once, %d overlapping",
		s.Completed+s.DeadLetter+s.Cancelled, s.Completed, s.DeadLetter, s.Stranded, s.DrainSeconds, s.MaxRuns, s.RanMoreThanOnce, s.Overlapping)
	return s, nil
}

// soakUnit is one submit: a single task, or a batch of n.
type soakUnit struct {
	first, n int
	batch    bool
}

// soakUnits splits n tasks into submits: about a third singles, the rest
// in batches of 5 to 40, in random order.
func soakUnits(n int, rng *rand.Rand) []soakUnit {
	var us []soakUnit
	for i := 0; i < n; {
		if rng.IntN(3) == 0 {
			us = append(us, soakUnit{first: i, n: 1})
			i++
			continue
		}
		k := min(5+rng.IntN(36), n-i)
		us = append(us, soakUnit{first: i, n: k, batch: true})
		i += k
	}
	return us
}

// soakRequest is task i's request; its idempotency key makes every resend
// of it the same task.
func soakRequest(prefix string, i int) task.Request {
	prios := []triagetype.Priority{triagetype.High, triagetype.Medium, triagetype.Low}
	return task.Request{
		Type: soakType, Priority: prios[i%3],
		Payload:        json.RawMessage(`{"n":` + strconv.Itoa(i) + `}`),
		IdempotencyKey: fmt.Sprintf("%s-%d", prefix, i),
	}
}

// apiPool is the API processes' addresses ("" while one restarts).
type apiPool struct {
	mu    sync.Mutex
	addrs []string
	next  int
}

func (p *apiPool) set(i int, addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.addrs[i] = addr
}

// pick returns a live API's address other than avoid when there is one,
// round robin; it waits while none is up.
func (p *apiPool) pick(ctx context.Context, avoid string) (string, error) {
	for {
		p.mu.Lock()
		var up []string
		for _, a := range p.addrs {
			if a != "" && a != avoid {
				up = append(up, a)
			}
		}
		if len(up) == 0 && avoid != "" && slices.Contains(p.addrs, avoid) {
			up = []string{avoid}
		}
		if len(up) > 0 {
			p.next++
			a := up[p.next%len(up)]
			p.mu.Unlock()
			return a, nil
		}
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// soakDriver submits the soak's tasks as a client would.
type soakDriver struct {
	pool   *apiPool
	hc     *http.Client
	prefix string

	mu       sync.Mutex
	ids      []string // by task index; "" until accepted
	errs     []string
	singles  atomic.Int64
	batches  atomic.Int64
	retried  atomic.Int64
	connErrs atomic.Int64
}

// run submits units with soakSubmitW in flight, unit k released no
// earlier than k/len(units) of the way through window.
func (dr *soakDriver) run(ctx context.Context, units []soakUnit, window time.Duration) {
	jobs := make(chan soakUnit)
	var wg sync.WaitGroup
	for range soakSubmitW {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range jobs {
				dr.submit(ctx, u)
			}
		}()
	}
	start := time.Now()
	for k, u := range units {
		at := start.Add(window * time.Duration(k) / time.Duration(len(units)))
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(at)):
		}
		if ctx.Err() != nil {
			break
		}
		jobs <- u
	}
	close(jobs)
	wg.Wait()
}

// submit sends u until every task in it was answered 200 or 201, sending
// what is left again (same keys) to another API after a dead connection or
// a 429, 503 or other 5xx, at most soakRounds times.
func (dr *soakDriver) submit(ctx context.Context, u soakUnit) {
	pending := make([]int, u.n)
	for j := range pending {
		pending[j] = u.first + j
	}
	last := ""
	var lastErr string
	for round := 0; round < soakRounds && len(pending) > 0 && ctx.Err() == nil; round++ {
		if round > 0 {
			dr.retried.Add(1)
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(200+rand.IntN(300)) * time.Millisecond):
			}
		}
		addr, err := dr.pool.pick(ctx, last)
		if err != nil {
			break
		}
		last = addr
		var again []int
		again, lastErr = dr.send(ctx, addr, u.batch, pending)
		if lastErr != "" && again == nil {
			break // refused for good
		}
		pending = again
	}
	if len(pending) > 0 {
		dr.mu.Lock()
		defer dr.mu.Unlock()
		if len(dr.errs) < 5 {
			dr.errs = append(dr.errs, fmt.Sprintf("tasks %v: %s", pending[:min(3, len(pending))], lastErr))
		}
	}
}

// send POSTs the pending tasks once and records the ones answered 200 or
// 201; it returns those to send again (nil: none, or refused for good)
// and what went wrong.
func (dr *soakDriver) send(ctx context.Context, addr string, batch bool, pending []int) ([]int, string) {
	rs := make([]task.Request, len(pending))
	for j, i := range pending {
		rs[j] = soakRequest(dr.prefix, i)
	}
	path := "/api/v1/tasks"
	var body []byte
	var err error
	if batch {
		path += "/batch"
		body, err = json.Marshal(api.BatchRequest{Tasks: rs})
		dr.batches.Add(1)
	} else {
		body, err = json.Marshal(rs[0])
		dr.singles.Add(1)
	}
	if err != nil {
		return nil, err.Error()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, bytes.NewReader(body))
	if err != nil {
		return nil, err.Error()
	}
	req.Header.Set("Authorization", "Bearer "+soakToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := dr.hc.Do(req)
	if err != nil {
		dr.connErrs.Add(1)
		return pending, err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		dr.connErrs.Add(1)
		return pending, "reading the answer: " + err.Error()
	}
	retriable := func(code int) bool {
		return code == http.StatusTooManyRequests || code >= 500
	}
	what := fmt.Sprintf("POST %s: %d %s", path, resp.StatusCode, task.Truncate(string(bytes.TrimSpace(b)), 200))
	if !batch || resp.StatusCode != http.StatusOK {
		switch {
		case resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusCreated:
			var t struct {
				ID string `json:"id"`
			}
			if batch || json.Unmarshal(b, &t) != nil || t.ID == "" {
				return nil, what
			}
			dr.accept(pending[0], t.ID)
			return nil, ""
		case retriable(resp.StatusCode):
			return pending, what
		}
		return nil, what
	}
	var out struct {
		Results []api.BatchItem `json:"results"`
	}
	if err := json.Unmarshal(b, &out); err != nil || len(out.Results) != len(pending) {
		return nil, what
	}
	var again []int
	problem := ""
	for j, it := range out.Results {
		switch {
		case (it.Status == http.StatusOK || it.Status == http.StatusCreated) && it.Task != nil:
			dr.accept(pending[j], it.Task.ID)
		case retriable(it.Status):
			again = append(again, pending[j])
			problem = fmt.Sprintf("item status %d", it.Status)
		default:
			msg := ""
			if it.Error != nil {
				msg = it.Error.Message
			}
			return nil, fmt.Sprintf("item %d: status %d %s", j, it.Status, msg)
		}
	}
	return again, problem
}

func (dr *soakDriver) accept(i int, id string) {
	dr.mu.Lock()
	defer dr.mu.Unlock()
	dr.ids[i] = id
}

// acceptedIDs are the ids of the tasks answered 200 or 201.
func (dr *soakDriver) acceptedIDs() []string {
	dr.mu.Lock()
	defer dr.mu.Unlock()
	var ids []string
	for _, id := range dr.ids {
		if id != "" {
			ids = append(ids, id)
		}
	}
	return ids
}

func (dr *soakDriver) figures(s *Soak) {
	s.SingleRequests, s.BatchRequests = int(dr.singles.Load()), int(dr.batches.Load())
	s.SubmitsRetried, s.ConnErrors = int(dr.retried.Load()), int(dr.connErrs.Load())
	s.Accepted = len(dr.acceptedIDs())
	s.NotAccepted = s.Planned - s.Accepted
	dr.mu.Lock()
	s.SubmitErrors = slices.Clone(dr.errs)
	dr.mu.Unlock()
}

// soakChaos kills a random consumer every 1-3 s and an API set.apiKills
// times over the submit window, restarting each at once, until the
// submits are done and set.tail has passed (or set.maxChaos, or the kill
// budget is spent). It kills only processes fl started.
func soakChaos(ctx context.Context, fl *fleet, pool *apiPool, set soakSettings, rng *rand.Rand, submitted <-chan struct{}, s *Soak, progress func(string, ...any)) error {
	start := time.Now()
	var doneAt time.Time
	nextConsumer := start.Add(time.Second + time.Duration(rng.Int64N(int64(2*time.Second))))
	apiEvery := set.window / time.Duration(set.apiKills+1)
	nextAPI := start.Add(apiEvery)
	for {
		now := time.Now()
		if doneAt.IsZero() {
			select {
			case <-submitted:
				doneAt = now
			default:
			}
		}
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case !doneAt.IsZero() && now.Sub(doneAt) >= set.tail && s.APIKills >= set.apiKills,
			now.Sub(start) >= set.maxChaos,
			s.ConsumerKills >= set.consumerMax && s.APIKills >= set.apiKills:
			return nil
		}
		next := nextConsumer
		if s.APIKills < set.apiKills && nextAPI.Before(next) {
			next = nextAPI
		}
		wake := submitted // until the submits are done: notice it at once
		if !doneAt.IsZero() {
			wake = nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Until(next)):
		case <-wake:
			continue
		}
		if s.APIKills < set.apiKills && !time.Now().Before(nextAPI) {
			slot := s.APIKills % soakAPIs
			pool.set(slot, "")
			if err := fl.restart(ctx, "api", slot); err != nil {
				return err
			}
			s.APIKills++
			pool.set(slot, fl.current("api", slot).ready)
			nextAPI = nextAPI.Add(apiEvery)
			continue
		}
		if s.ConsumerKills < set.consumerMax {
			if err := fl.restart(ctx, "consumer", rng.IntN(soakConsumers)); err != nil {
				return err
			}
			s.ConsumerKills++
		}
		nextConsumer = time.Now().Add(time.Second + time.Duration(rng.Int64N(int64(2*time.Second))))
	}
}

// soakDrain polls the accepted tasks until all are terminal or limit
// passes, and returns their last records by id.
func soakDrain(ctx context.Context, getMany func(context.Context, []string) ([]*task.Task, error), ids []string, limit time.Duration, progress func(string, ...any)) (map[string]*task.Task, error) {
	final := map[string]*task.Task{}
	deadline := time.Now().Add(limit)
	lastSay := time.Now()
	for {
		ts, err := getMany(ctx, ids)
		if err != nil && ctx.Err() != nil {
			return final, ctx.Err()
		}
		if err == nil {
			for _, t := range ts {
				final[t.ID] = t
			}
		}
		open := 0
		for _, id := range ids {
			if t := final[id]; t == nil || !t.Status.Terminal() {
				open++
			}
		}
		if open == 0 || time.Now().After(deadline) {
			return final, nil
		}
		if time.Since(lastSay) > 15*time.Second {
			progress("   soak: %d of %d accepted tasks not terminal yet", open, len(ids))
			lastSay = time.Now()
		}
		select {
		case <-ctx.Done():
			return final, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// fleet is the soak's child processes: every one it started, by role and
// slot, each SIGKILLed by its pid only. Children run in process groups of
// their own (so a Ctrl-C reaches the bench, which kills them) and get
// SIGKILL if the bench dies first (Pdeathsig; they are started from one
// locked thread, which the Go runtime does not end while it is locked).
type fleet struct {
	exe string
	env []string
	dir string

	spawn chan func()
	once  sync.Once

	mu    sync.Mutex
	procs []*child
	seq   int
}

// child is one started process.
type child struct {
	role    string
	slot    int
	pid     int
	ready   string // what its ready line said: the API's address, the consumer's worker id
	log     string // its stderr file
	started time.Time
	cmd     *exec.Cmd
	exited  chan struct{}
	exitAt  time.Time // set before exited closes
	killed  bool      // by the chaos or at the end
	chaos   bool      // by the chaos, mid-run
}

func newFleet(exe string, env []string, dir string) *fleet {
	f := &fleet{exe: exe, env: env, dir: dir, spawn: make(chan func())}
	go func() {
		// Pdeathsig fires when the thread that started a child ends: all
		// children are started here, on one thread that no other goroutine
		// uses meanwhile. It is unlocked at the end, not left to exit with
		// the goroutine: a locked goroutine's exit ends its thread, and
		// that thread may have started the emulators, whose own Pdeathsig
		// would then kill them (a first version did, mid-run).
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for fn := range f.spawn {
			fn()
		}
	}()
	return f
}

// start starts role in slot and waits (at most a minute) for its ready line.
func (f *fleet) start(ctx context.Context, role string, slot int) (*child, error) {
	f.mu.Lock()
	f.seq++
	name := fmt.Sprintf("%s%d-%03d.log", role, slot, f.seq)
	f.mu.Unlock()
	errf, err := os.Create(filepath.Join(f.dir, name))
	if err != nil {
		return nil, err
	}
	defer errf.Close() // the child has its own copy
	ready := make(chan string, 1)
	c := &child{role: role, slot: slot, log: name, exited: make(chan struct{})}
	c.cmd = exec.Command(f.exe)
	c.cmd.Env = append(slices.Clone(f.env), soakChildEnv+"="+role)
	c.cmd.Stdout = &firstLine{ch: ready}
	c.cmd.Stderr = errf
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	f.spawn <- func() { started <- c.cmd.Start() }
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start %s: %w", role, err)
	}
	c.pid, c.started = c.cmd.Process.Pid, time.Now()
	f.mu.Lock()
	f.procs = append(f.procs, c)
	f.mu.Unlock()
	go func() {
		_ = c.cmd.Wait()
		c.exitAt = time.Now()
		close(c.exited)
	}()
	select {
	case l := <-ready:
		c.ready = strings.TrimSpace(strings.TrimPrefix(l, soakReady))
		return c, nil
	case <-c.exited:
		return nil, fmt.Errorf("%s child (pid %d) exited before it was ready; see %s", role, c.pid, filepath.Join(f.dir, name))
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(time.Minute):
		return nil, fmt.Errorf("%s child (pid %d) not ready after a minute; see %s", role, c.pid, filepath.Join(f.dir, name))
	}
}

// current is the live child of role in slot (nil if none).
func (f *fleet) current(role string, slot int) *child {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.procs) - 1; i >= 0; i-- {
		if c := f.procs[i]; c.role == role && c.slot == slot && !c.killed {
			return c
		}
	}
	return nil
}

// kill SIGKILLs c and waits for it to be gone.
func (f *fleet) kill(c *child) {
	f.mu.Lock()
	c.killed = true
	f.mu.Unlock()
	select {
	case <-c.exited:
		return
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
	}
}

// restart kills the child of role in slot and starts another in its place.
func (f *fleet) restart(ctx context.Context, role string, slot int) error {
	if c := f.current(role, slot); c != nil {
		f.mu.Lock()
		c.chaos = true
		f.mu.Unlock()
		f.kill(c)
	}
	_, err := f.start(ctx, role, slot)
	return err
}

// stop kills every child still running; it may be called more than once.
func (f *fleet) stop() {
	f.mu.Lock()
	procs := slices.Clone(f.procs)
	f.mu.Unlock()
	for _, c := range procs {
		f.kill(c)
	}
	f.once.Do(func() { close(f.spawn) })
}

// exits maps each child's pid to when it exited (zero if it has not).
func (f *fleet) exits() map[string]time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := map[string]time.Time{}
	for _, c := range f.procs {
		select {
		case <-c.exited:
			m[strconv.Itoa(c.pid)] = c.exitAt
		default:
			m[strconv.Itoa(c.pid)] = time.Time{}
		}
	}
	return m
}

// writeProcs lists every child: role, slot, pid, what its ready line
// said, its log file, when it started and exited, and whether the soak
// killed it.
func (f *fleet) writeProcs(path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	for _, c := range f.procs {
		exit := "running"
		select {
		case <-c.exited:
			exit = c.exitAt.UTC().Format(time.RFC3339Nano)
		default:
		}
		fmt.Fprintf(&b, "%s%d pid=%d ready=%q log=%s started=%s exited=%s killed_by_chaos=%v\n",
			c.role, c.slot, c.pid, c.ready, c.log, c.started.UTC().Format(time.RFC3339Nano), exit, c.chaos)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// firstLine is a child's stdout: its first line goes to ch, the rest is
// dropped.
type firstLine struct {
	ch   chan string
	buf  []byte
	sent bool
}

func (w *firstLine) Write(p []byte) (int, error) {
	if w.sent {
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	if i := bytes.IndexByte(w.buf, '\n'); i >= 0 {
		w.ch <- string(w.buf[:i])
		w.sent, w.buf = true, nil
	}
	return len(p), nil
}

// handlerRun is one handler attempt as the traces tell it.
type handlerRun struct {
	pid        string
	attempt    int
	start, end time.Time
	ended      string // traceDone, traceAbort, or "killed" (the process's exit)
}

// traces are the runs by task id.
type traces struct {
	runs map[string][]*handlerRun
}

// readTraces reads every consumer's trace file in dir.
func readTraces(dir string) (*traces, error) {
	tr := &traces{runs: map[string][]*handlerRun{}}
	files, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return nil, err
	}
	for _, fn := range files {
		b, err := os.ReadFile(fn)
		if err != nil {
			return nil, err
		}
		open := map[string]*handlerRun{} // by task id, in this file (one pid)
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) != 5 {
				continue // a line cut by the kill (not expected: one write each)
			}
			ns, err := strconv.ParseInt(f[3], 10, 64)
			if err != nil {
				continue
			}
			at := time.Unix(0, ns)
			id := f[1]
			switch f[0] {
			case traceStart:
				// A start while this process still runs the task leaves
				// the first run open until the process's exit: an overlap.
				n, _ := strconv.Atoi(f[4])
				r := &handlerRun{pid: f[2], attempt: n, start: at}
				open[id] = r
				tr.runs[id] = append(tr.runs[id], r)
			case traceDone, traceAbort:
				if r := open[id]; r != nil {
					r.end, r.ended = at, f[0]
					delete(open, id)
				}
			}
		}
	}
	return tr, nil
}

// judge fills s's run figures: runs per task, tasks started more than
// once, and tasks with two runs that overlapped in time. A run with no
// done or abort line ended when its process exited (exits, by pid).
func (tr *traces) judge(s *Soak, accepted []string, final map[string]*task.Task, exits map[string]time.Time) {
	acc := map[string]bool{}
	for _, id := range accepted {
		acc[id] = true
	}
	for id, rs := range tr.runs {
		s.Runs += len(rs)
		s.MaxRuns = max(s.MaxRuns, len(rs))
		if len(rs) > 1 {
			s.RanMoreThanOnce++
		}
		if !acc[id] {
			s.RanNotAccepted++
		}
		for _, r := range rs {
			if r.ended == "" {
				s.RunsCut++
				r.ended = "killed"
				r.end = exits[r.pid]
				if r.end.IsZero() {
					r.end = time.Now()
				}
			}
		}
		overlap := ""
		for i, a := range rs {
			for _, b := range rs[i+1:] {
				if a.start.Before(b.end) && b.start.Before(a.end) {
					overlap = fmt.Sprintf("%s: pid %s %s-%s (%s) and pid %s %s-%s (%s)", id,
						a.pid, a.start.Format("15:04:05.000"), a.end.Format("15:04:05.000"), a.ended,
						b.pid, b.start.Format("15:04:05.000"), b.end.Format("15:04:05.000"), b.ended)
				}
			}
		}
		if overlap != "" {
			s.Overlapping++
			if len(s.OverlapExamples) < 5 {
				s.OverlapExamples = append(s.OverlapExamples, overlap)
			}
		}
	}
	var claimToStart []time.Duration
	for _, id := range accepted {
		t := final[id]
		if t == nil || t.Status != triagetype.Completed {
			continue
		}
		if len(tr.runs[id]) == 0 {
			s.CompletedWithoutRun++
		}
		for _, r := range tr.runs[id] {
			if r.attempt == t.Attempts && t.StartedAt != nil {
				claimToStart = append(claimToStart, r.start.Sub(*t.StartedAt))
			}
		}
	}
	s.ClaimToStart = distOf(claimToStart)
}

// childLogs is what the children's logs say, summed.
type childLogs struct {
	warnings                      map[string]int // "role: level message"
	liveLeaseExpiries, reclaims   int
	released, reconciled, rescued int
}

// readChildLogs reads every child's stderr (JSON lines from slog; any
// other line, a panic say, counts as a warning of its own).
func readChildLogs(fl *fleet) childLogs {
	out := childLogs{warnings: map[string]int{}}
	fl.mu.Lock()
	procs := slices.Clone(fl.procs)
	fl.mu.Unlock()
	byWorker := map[string]*child{}
	for _, c := range procs {
		if c.role == "consumer" {
			byWorker[c.ready] = c
		}
	}
	for _, c := range procs {
		fh, err := os.Open(filepath.Join(fl.dir, c.log))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		for sc.Scan() {
			var e struct {
				Time           time.Time `json:"time"`
				Level          string    `json:"level"`
				Msg            string    `json:"msg"`
				PreviousWorker string    `json:"previous_worker"`
				Released       int       `json:"released"`
				Reconciled     int       `json:"reconciled"`
				Rescued        int       `json:"rescued"`
			}
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				out.warnings[c.role+": "+task.Truncate(sc.Text(), 120)]++
				continue
			}
			switch {
			case e.Msg == soakSweepMsg:
				out.released += e.Released
				out.reconciled += e.Reconciled
				out.rescued += e.Rescued
			case e.Msg == "reclaiming task whose lease expired":
				// A previous worker not among the soak's consumers counts
				// as alive: nothing says it was dead.
				out.reclaims++
				if p := byWorker[e.PreviousWorker]; p == nil || p.exitAt.IsZero() || p.exitAt.After(e.Time) {
					out.liveLeaseExpiries++
				}
			}
			if e.Level == "WARN" || e.Level == "ERROR" {
				out.warnings[c.role+": "+e.Level+" "+e.Msg]++
			}
		}
		fh.Close()
	}
	return out
}

// top returns the n most frequent warnings as "N × what".
func (l childLogs) top(n int) []string {
	keys := make([]string, 0, len(l.warnings))
	for k := range l.warnings {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if l.warnings[keys[i]] != l.warnings[keys[j]] {
			return l.warnings[keys[i]] > l.warnings[keys[j]]
		}
		return keys[i] < keys[j]
	})
	var out []string
	for _, k := range keys[:min(n, len(keys))] {
		out = append(out, fmt.Sprintf("%d × %s", l.warnings[k], k))
	}
	return out
}

// dlqCensus reads every message left in the DLQs (each hidden for a
// minute, so each is read once).
func dlqCensus(ctx context.Context, qs *queue.Queues) ([]queue.Received, error) {
	var all []queue.Received
	for _, p := range []triagetype.Priority{triagetype.High, triagetype.Medium, triagetype.Low} {
		for range 200 {
			ms, err := qs.ReceiveDLQ(ctx, p, 10, time.Second, time.Minute)
			if err != nil {
				return all, err
			}
			if len(ms) == 0 {
				break
			}
			all = append(all, ms...)
		}
	}
	return all, nil
}

// dlqReason is a DLQ message's reason, without the task id and detail.
func dlqReason(m queue.Received) string {
	switch {
	case m.Reason == "":
		return "redriven by SQS (maxReceiveCount), not reconciled yet"
	case strings.HasPrefix(m.Reason, queue.ReasonNoTask):
		return queue.ReasonNoTask
	case strings.HasPrefix(m.Reason, queue.ReasonAhead):
		return queue.ReasonAhead
	}
	r, _, _ := strings.Cut(m.Reason, ";")
	return task.Truncate(r, 60)
}

// writeEvidence writes, for each task named first in lines, its record,
// its runs, its DLQ messages and every child log line naming it, for
// whoever investigates.
func writeEvidence(path string, lines []string, final map[string]*task.Task, fl *fleet, tr *traces, dlq []queue.Received) error {
	var b strings.Builder
	fl.mu.Lock()
	procs := slices.Clone(fl.procs)
	fl.mu.Unlock()
	logs := map[string][]byte{}
	for _, c := range procs {
		if data, err := os.ReadFile(filepath.Join(fl.dir, c.log)); err == nil {
			logs[c.log] = data
		}
	}
	for _, line := range lines {
		id, _, _ := strings.Cut(line, " ")
		fmt.Fprintf(&b, "== %s\n", line)
		if t := final[id]; t != nil {
			rec, _ := json.Marshal(t)
			fmt.Fprintf(&b, "record: %s\n", rec)
			// Each attempt beside the end of the process that claimed it.
			for _, a := range t.History {
				for _, c := range procs {
					if c.role != "consumer" || c.ready != a.WorkerID {
						continue
					}
					ran := 0
					for _, r := range tr.runs[id] {
						if r.pid == strconv.Itoa(c.pid) && r.attempt == a.Attempt {
							ran++
						}
					}
					fmt.Fprintf(&b, "attempt %d: claimed by %s (pid %d) at %s; the process exited %.3f s later (killed by the chaos: %v); handler starts of this attempt: %d; %s\n",
						a.Attempt, a.WorkerID, c.pid, a.StartedAt.UTC().Format(time.RFC3339Nano), c.exitAt.Sub(a.StartedAt).Seconds(), c.chaos, ran, a.Error)
				}
			}
		}
		for _, m := range dlq {
			if strings.Contains(m.Body, id) {
				fmt.Fprintf(&b, "DLQ %s: receives=%d sent=%s first_sent=%s reason=%q body=%s\n", m.Priority, m.ReceiveCount,
					m.SentAt.UTC().Format(time.RFC3339Nano), m.FirstSentAt.UTC().Format(time.RFC3339Nano), m.Reason, m.Body)
			}
		}
		for _, r := range tr.runs[id] {
			fmt.Fprintf(&b, "run: pid %s %s - %s (%s)\n", r.pid, r.start.Format(time.RFC3339Nano), r.end.Format(time.RFC3339Nano), r.ended)
		}
		for _, c := range procs {
			for _, l := range bytes.Split(logs[c.log], []byte("\n")) {
				if bytes.Contains(l, []byte(id)) {
					fmt.Fprintf(&b, "%s (pid %d): %s\n", c.log, c.pid, l)
				}
			}
		}
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// printSoak prints the soak group's table.
func printSoak(w io.Writer, s Soak) {
	t := &table{
		title: fmt.Sprintf("soak: %d tasks, %d API and %d consumer processes under SIGKILL, then drained", s.Planned, s.APIs, s.Consumers),
		head:  []string{"figure", "value"},
	}
	t.row("tasks accepted (answered 200/201) / planned", fmt.Sprintf("%d / %d", s.Accepted, s.Planned))
	t.row("requests: single / batch (5-40 tasks)", fmt.Sprintf("%d / %d", s.SingleRequests, s.BatchRequests))
	t.row("submits retried (same keys, other API)", fmt.Sprintf("%d (%d connections cut by a kill)", s.SubmitsRetried, s.ConnErrors))
	t.row("consumer kills / API kills (SIGKILL)", fmt.Sprintf("%d / %d in %.1f s", s.ConsumerKills, s.APIKills, s.ChaosSeconds))
	t.row("terminal: completed / dead_letter / cancelled", fmt.Sprintf("%d / %d / %d", s.Completed, s.DeadLetter, s.Cancelled))
	t.row("dead_letter although the handler never fails (target 0)", d(s.DeadLetter))
	t.row("stranded (not terminal at the end; target 0)", d(s.Stranded))
	t.row("time to drain after the chaos", fmt.Sprintf("%.1f s (limit %.0f s)", s.DrainSeconds, s.DrainLimit))
	t.row("handler runs / max runs of a task", fmt.Sprintf("%d / %d", s.Runs, s.MaxRuns))
	t.row("tasks started more than once (expected after kills)", d(s.RanMoreThanOnce))
	t.row("tasks with two overlapping runs (target 0)", d(s.Overlapping))
	t.row("handler runs cut by a kill / claims reclaimed after their lease", fmt.Sprintf("%d / %d", s.RunsCut, s.Reclaims))
	t.row("lease expiries of live workers", d(s.LiveLeaseExpiries))
	t.row("claim to handler start, p50 / p99 / max (completed tasks)", fmt.Sprintf("%.0f / %.0f / %.0f ms", s.ClaimToStart.P50, s.ClaimToStart.P99, s.ClaimToStart.Max))
	t.row("ran but never accepted / completed without a run", fmt.Sprintf("%d / %d", s.RanNotAccepted, s.CompletedWithoutRun))
	t.row("promoter: released / reconciled / rescued", fmt.Sprintf("%d / %d / %d", s.PromoterReleased, s.PromoterReconciled, s.PromoterRescued))
	t.note("%d consumers x %d slots (lease %.0f s), %d APIs, a promoter every %.0f s: this binary re-executed (%s), on the run's emulators; seed %d",
		s.Consumers, s.Slots, s.LeaseSeconds, s.APIs, s.PromoteSeconds, soakChildEnv, s.Seed)
	for _, x := range s.StrandedTasks {
		t.note("STRANDED %s", x)
	}
	for _, x := range s.OverlapExamples {
		t.note("OVERLAP %s", x)
	}
	for _, x := range s.DeadLetterTasks {
		t.note("DEAD_LETTER %s", x)
	}
	for _, k := range sortedKeys(s.DLQ) {
		t.note("left in the DLQs: %d × %s", s.DLQ[k], k)
	}
	if len(s.DLQ) > 0 {
		t.note("DLQ messages naming an accepted task: %d (the others name tasks a killed or refused submit never recorded)", s.DLQAccepted)
	}
	for _, x := range s.SubmitErrors {
		t.note("never accepted: %s", x)
	}
	for _, x := range s.ChildWarnings {
		t.note("child log: %s", x)
	}
	t.note("children's logs and the handlers' traces: %s", s.Logs)
	t.write(w)
}
