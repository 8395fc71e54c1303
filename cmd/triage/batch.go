package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/triagetype"
)

// Batch submission tuning. 100 is the API's batch limit; four requests in
// flight keep a Lambda-backed API busy without tripping its throttles.
const (
	batchSize        = triage.MaxBatch
	batchConcurrency = 4
	// A throttled (429) or unqueued (503) batch or item is sent again up to
	// batchTries times in all, waiting Retry-After or a doubling backoff.
	batchTries       = 5
	batchBackoff     = 500 * time.Millisecond
	batchMaxBackoff  = 10 * time.Second
	maxFailuresShown = 20
)

// lineResult is the outcome of one input line.
type lineResult struct {
	Line   int                     `json:"line"`
	Status int                     `json:"status"`
	Task   *triage.Task            `json:"task,omitempty"`
	Error  *triagetype.ErrorDetail `json:"error,omitempty"`
}

func (r *lineResult) ok() bool { return r.Status == http.StatusCreated || r.Status == http.StatusOK }

// batchSummary is the --json output of a file submit.
type batchSummary struct {
	Submitted int          `json:"submitted"`
	Created   int          `json:"created"`
	Existing  int          `json:"existing"`
	Failed    int          `json:"failed"`
	Results   []lineResult `json:"results"`
}

// submitFile submits every line of an NDJSON file through the batch
// endpoint and reports per line.
func (c *cli) submitFile(cmd *cobra.Command, name string, ids bool) error {
	var r io.Reader = cmd.InOrStdin()
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return usageError{fmt.Errorf("--file: %w", err)}
		}
		defer f.Close()
		r = f
	}
	lines, reqs, err := parseNDJSON(r)
	if err != nil {
		return usageError{err}
	}
	if len(reqs) == 0 {
		return usageError{fmt.Errorf("--file %s holds no tasks", name)}
	}
	prog := newProgress(c.err, len(reqs))
	results, err := c.sendBatches(cmd.Context(), lines, reqs, prog)
	prog.done()
	if err != nil {
		return err
	}

	sum := batchSummary{Submitted: len(results), Results: results}
	for i := range results {
		switch {
		case results[i].Status == http.StatusCreated:
			sum.Created++
		case results[i].Status == http.StatusOK:
			sum.Existing++
		default:
			sum.Failed++
		}
	}
	summary := fmt.Sprintf("submitted %d %s: %d created, %d existing, %d failed",
		sum.Submitted, plural(sum.Submitted, "task", "tasks"), sum.Created, sum.Existing, sum.Failed)
	switch {
	case c.json:
		if err := c.printJSON(sum); err != nil {
			return err
		}
	case ids:
		for _, res := range results {
			if res.ok() {
				fmt.Fprintln(c.out, res.Task.ID)
			}
		}
		fmt.Fprintln(c.err, summary)
	default:
		fmt.Fprintln(c.out, summary)
	}
	if sum.Failed == 0 {
		return nil
	}
	if !c.json {
		shown := 0
		for _, res := range results {
			if res.ok() {
				continue
			}
			if shown == maxFailuresShown {
				fmt.Fprintf(c.err, "... and %d more failures (--json lists them all)\n", sum.Failed-shown)
				break
			}
			shown++
			fmt.Fprintf(c.err, "line %d: %d %s: %s\n", res.Line, res.Status, res.Error.Code, res.Error.Message)
		}
	}
	return fmt.Errorf("%d of %d tasks failed", sum.Failed, sum.Submitted)
}

// parseNDJSON reads one submit body per non-blank line, checking them all
// before anything is sent, so a typo on line 900 does not leave 899 tasks
// submitted. Unknown fields are refused here as the API would refuse them.
func parseNDJSON(r io.Reader) (lines []int, reqs []triage.SubmitRequest, err error) {
	sc := bufio.NewScanner(r)
	// A line may be as large as the API's biggest request body, and more.
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var bad []string
	n := 0
	for sc.Scan() {
		n++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		var req triage.SubmitRequest
		dec := json.NewDecoder(bytes.NewReader(text))
		dec.DisallowUnknownFields()
		err := dec.Decode(&req)
		if err == nil && dec.More() {
			err = errors.New("data after the JSON object")
		}
		if err == nil && req.Type == "" {
			err = errors.New(`"type" is required`)
		}
		if err != nil {
			bad = append(bad, fmt.Sprintf("line %d: %v", n, err))
			continue
		}
		lines = append(lines, n)
		reqs = append(reqs, req)
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("read line %d: %w", n+1, err)
	}
	if len(bad) > 0 {
		if len(bad) > 10 {
			bad = append(bad[:10], fmt.Sprintf("... and %d more", len(bad)-10))
		}
		return nil, nil, fmt.Errorf("nothing was sent; fix these lines:\n  %s", strings.Join(bad, "\n  "))
	}
	return lines, reqs, nil
}

// sendBatches sends reqs in chunks of batchSize with batchConcurrency
// chunks in flight and returns one result per request. Failures of single
// items are results; only an auth failure (every other chunk would fail the
// same way) or a cancelled context is an error.
func (c *cli) sendBatches(ctx context.Context, lines []int, reqs []triage.SubmitRequest, prog *progress) ([]lineResult, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	cl := c.client()
	results := make([]lineResult, len(reqs))
	for i := range results {
		results[i].Line = lines[i]
	}
	chunks := make(chan int)
	var wg sync.WaitGroup
	for range min(batchConcurrency, (len(reqs)+batchSize-1)/batchSize) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for start := range chunks {
				end := min(start+batchSize, len(reqs))
				// Each chunk writes only its own slots of results.
				if err := sendChunk(ctx, cl, reqs[start:end], results[start:end]); err != nil {
					cancel(err)
				}
				prog.add(end - start)
			}
		}()
	}
feed:
	for start := 0; start < len(reqs); start += batchSize {
		select {
		case chunks <- start:
		case <-ctx.Done():
			break feed
		}
	}
	close(chunks)
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	return results, nil
}

// sendChunk submits one chunk, resending its throttled or unqueued items,
// and fills res. It returns an error only when the whole run should stop.
func sendChunk(ctx context.Context, cl *triage.Client, reqs []triage.SubmitRequest, res []lineResult) error {
	pending := make([]int, len(reqs))
	for i := range pending {
		pending[i] = i
	}
	for try := 0; len(pending) > 0; try++ {
		batch := make([]triage.SubmitRequest, len(pending))
		for j, i := range pending {
			batch[j] = reqs[i]
		}
		items, err := cl.SubmitBatch(ctx, batch)
		last := try == batchTries-1
		if err != nil {
			if errors.Is(err, triage.ErrUnauthorized) || errors.Is(err, triage.ErrForbidden) || ctx.Err() != nil {
				return err
			}
			var ae *triage.Error
			if !last && (errors.Is(err, triage.ErrTooMany) || errors.Is(err, triage.ErrUnavailable)) {
				errors.As(err, &ae)
				if err := sleep(ctx, backoff(try, ae.RetryAfter)); err != nil {
					return err
				}
				continue
			}
			detail := &triagetype.ErrorDetail{Code: "request_failed", Message: err.Error()}
			status := 0
			if errors.As(err, &ae) {
				status, detail = ae.Status, &triagetype.ErrorDetail{Code: ae.Code, Message: ae.Message, Field: ae.Field}
			}
			for _, i := range pending {
				res[i].Status, res[i].Error = status, detail
			}
			return nil
		}
		var again []int
		for j, it := range items {
			i := pending[j]
			if (it.Status == http.StatusTooManyRequests || it.Status == http.StatusServiceUnavailable) && !last {
				again = append(again, i)
				continue
			}
			res[i].Status, res[i].Task, res[i].Error = it.Status, it.Task, it.Error
			if it.Error != nil {
				// The server names the field by its index in the batch
				// ("tasks[3].priority"); the line number already says which.
				if _, f, ok := strings.Cut(it.Error.Field, "]."); ok {
					e := *it.Error
					e.Field = f
					res[i].Error = &e
				}
			} else if !res[i].ok() || it.Task == nil {
				res[i].Status = 0
				res[i].Error = &triagetype.ErrorDetail{Code: "unexpected", Message: fmt.Sprintf("status %d without a task or an error", it.Status)}
			}
		}
		pending = again
		if len(pending) > 0 {
			if err := sleep(ctx, backoff(try, 0)); err != nil {
				return err
			}
		}
	}
	return nil
}

// backoff is how long to wait before try+1: the server's Retry-After when
// it gave one, else a doubling wait, both capped.
func backoff(try int, retryAfter time.Duration) time.Duration {
	d := retryAfter
	if d <= 0 {
		d = batchBackoff << try
	}
	return min(d, batchMaxBackoff)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// progress draws "[#####     ] 512/1000" on a terminal, redrawn in place.
// On anything else (a file, a pipe, a test buffer) it draws nothing, so
// logs and captured output stay clean.
type progress struct {
	mu         sync.Mutex
	w          io.Writer
	total, n   int
	drawn, off bool
}

func newProgress(w io.Writer, total int) *progress {
	return &progress{w: w, total: total, off: !isTerminal(w)}
}

func (p *progress) add(k int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n += k
	if !p.off {
		fmt.Fprint(p.w, "\r"+progressBar(p.n, p.total, 30))
		p.drawn = true
	}
}

// done ends the bar's line so the summary starts on a fresh one.
func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprintln(p.w)
	}
}

func progressBar(n, total, width int) string {
	filled := 0
	if total > 0 {
		filled = min(width, n*width/total)
	}
	return fmt.Sprintf("[%s%s] %d/%d", strings.Repeat("#", filled), strings.Repeat(" ", width-filled), n, total)
}

// isTerminal reports whether w is a character device. golang.org/x/term
// would also do, but it is not a dependency of this module.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
