package triage_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/direct"
	"github.com/triagehq/triage/triageconfig"
)

// A client of a deployment's HTTP API: submit a task, then wait for it.
func Example() {
	ctx := context.Background()
	c := triage.NewClient(triage.HTTP("http://127.0.0.1:8080", os.Getenv("TRIAGE_TOKEN")))

	type resize struct {
		URL   string `json:"url"`
		Width int    `json:"width"`
	}
	t, created, err := c.Submit(ctx, "resize", resize{URL: "s3://photos/cat.jpg", Width: 320},
		triage.WithPriority(triage.High),
		triage.WithIdempotencyKey("resize-cat-320"), // a retried submit returns the same task
		triage.WithMaxAttempts(5),
		triage.WithTimeout(time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(t.ID, created, t.Status)

	done, err := c.Wait(ctx, t.ID, time.Second)
	switch {
	case errors.Is(err, triage.ErrDeadLettered), errors.Is(err, triage.ErrCancelled):
		fmt.Println(done.Status, done.Error.Message) // the task comes back with the error
	case err != nil:
		log.Fatal(err)
	default:
		fmt.Println(done.Status, string(done.Result))
	}
}

// The same client inside AWS, writing DynamoDB and SQS itself: the
// transport changes, nothing else does.
func Example_direct() {
	ctx := context.Background()
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// The deployment's settings: here its resource prefix, the rest at
	// their defaults (direct.Options{} would read the TRIAGE_* variables of
	// a function deployed beside the dispatcher).
	tr, err := direct.New(ctx, awsCfg, direct.Options{Config: &triageconfig.Config{Prefix: "triage"}})
	if err != nil {
		log.Fatal(err)
	}
	c := triage.NewClient(tr)
	t, _, err := c.Submit(ctx, "welcome-email", map[string]string{"to": "ada@example.com"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(t.ID)
}

// Errors match sentinels with errors.Is, and carry the field at fault and
// the wait the deployment asks for.
func ExampleClient_Submit_errors() {
	ctx := context.Background()
	c := triage.NewClient(triage.HTTP("http://127.0.0.1:8080", os.Getenv("TRIAGE_TOKEN")))

	_, _, err := c.Submit(ctx, "report", nil, triage.WithPriority(triage.Low))
	var e *triage.Error
	switch {
	case errors.Is(err, triage.ErrTooMany) && errors.As(err, &e):
		// The low queue is over its depth limit (TRIAGE_MAX_QUEUE_DEPTH).
		time.Sleep(e.RetryAfter)
	case errors.Is(err, triage.ErrUnavailable):
		// Nothing was accepted; the same call may be repeated.
	case errors.Is(err, triage.ErrBadRequest) && errors.As(err, &e):
		log.Fatalf("field %s: %s", e.Field, e.Message)
	case err != nil:
		log.Fatal(err)
	}
}

// A batch is built with NewRequest; each item has its own outcome.
func ExampleClient_SubmitBatch() {
	ctx := context.Background()
	c := triage.NewClient(triage.HTTP("http://127.0.0.1:8080", os.Getenv("TRIAGE_TOKEN")))

	var rs []triage.SubmitRequest
	for i := range 3 {
		r, err := triage.NewRequest("thumbnail", map[string]int{"page": i}, triage.WithIdempotencyKey(fmt.Sprint("thumb-", i)))
		if err != nil {
			log.Fatal(err)
		}
		rs = append(rs, r)
	}
	results, err := c.SubmitBatch(ctx, rs)
	if err != nil {
		log.Fatal(err) // the whole request failed: authorization, the network
	}
	for _, r := range results {
		if err := r.Err(); err != nil {
			fmt.Println(r.Index, "failed:", err)
			continue
		}
		fmt.Println(r.Index, r.Task.ID, "created:", r.Created())
	}
}

// Resize is a typed payload: its Kind is its task type, for SubmitArgs
// here and for worker.AddWorker in the worker that runs it.
type Resize struct {
	URL   string `json:"url"`
	Width int    `json:"width"`
}

func (Resize) Kind() string { return "resize" }

// A typed submit takes the task type from the payload's Kind, so the
// producer and the worker (worker.AddWorker[Resize]) cannot disagree.
func ExampleClient_SubmitArgs() {
	ctx := context.Background()
	c := triage.NewClient(triage.HTTP("http://127.0.0.1:8080", os.Getenv("TRIAGE_TOKEN")))

	t, _, err := c.SubmitArgs(ctx, Resize{URL: "s3://photos/cat.jpg", Width: 320}, triage.WithPriority(triage.High))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(t.Type, t.ID)
}

// A typed batch: each item's type comes from its args; each item has its
// own outcome, as in SubmitBatch.
func ExampleClient_SubmitArgsBatch() {
	ctx := context.Background()
	c := triage.NewClient(triage.HTTP("http://127.0.0.1:8080", os.Getenv("TRIAGE_TOKEN")))

	var items []triage.ArgsItem
	for _, w := range []int{160, 320, 640} {
		items = append(items, triage.ArgsItem{
			Args: Resize{URL: "s3://photos/cat.jpg", Width: w},
			Opts: []triage.SubmitOption{triage.WithIdempotencyKey(fmt.Sprint("cat-", w))},
		})
	}
	results, err := c.SubmitArgsBatch(ctx, items)
	if err != nil {
		log.Fatal(err) // nothing was accepted: the request failed, or an item could not be encoded
	}
	for _, r := range results {
		if err := r.Err(); err != nil {
			fmt.Println(r.Index, "failed:", err)
			continue
		}
		fmt.Println(r.Index, r.Task.ID)
	}
}

// ListAll walks every page; ErrStop ends the walk early.
func ExampleClient_ListAll() {
	ctx := context.Background()
	c := triage.NewClient(triage.HTTP("http://127.0.0.1:8080", os.Getenv("TRIAGE_TOKEN")))

	n := 0
	err := c.ListAll(ctx, triage.ListParams{Status: triage.DeadLetter}, func(t *triage.Task) error {
		fmt.Println(t.ID, t.Type, t.Error.Message)
		if n++; n == 50 {
			return triage.ErrStop
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}

// ValidateRequest runs the deployment's own checks locally.
func ExampleValidateRequest() {
	r, err := triage.NewRequest("echo", nil, triage.WithPriority("urgent"), triage.WithMaxAttempts(3))
	var e *triage.Error
	if errors.As(err, &e) {
		fmt.Println(errors.Is(err, triage.ErrBadRequest), e.Field)
	}
	r.Priority = triage.Medium
	fmt.Println(triage.ValidateRequest(r))
	// Output:
	// true priority
	// <nil>
}
