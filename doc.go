// Package triage is the Go client of triage, a serverless priority task
// dispatcher for AWS: submit tasks, read and cancel them, and operate the
// dispatcher (pause, limits, dead letters, stats).
//
// One Client works over either of two transports, with the same methods,
// the same idempotency, the same validation (errors name the field at
// fault) and the same backpressure:
//
//	// Anywhere, through the HTTP API:
//	c := triage.NewClient(triage.HTTP("https://triage.example.com", token))
//
//	// Inside AWS next to the dispatcher, writing DynamoDB and SQS itself
//	// (package github.com/triagehq/triage/direct):
//	tr, err := direct.New(ctx, awsCfg, direct.Options{Config: &cfg}) // nil Config: the TRIAGE_* environment
//	c := triage.NewClient(tr)
//
//	task, created, err := c.Submit(ctx, "resize", img, triage.WithPriority(triage.High))
//	if errors.Is(err, triage.ErrTooMany) { /* the queue is over its depth limit */ }
//
// Each transport has one plain and one typed way to submit: Submit and
// SubmitBatch take the task type as a string, SubmitArgs and
// SubmitArgsBatch take it from the payload's Kind method (Args, River's
// JobArgs), the same interface package worker's AddWorker registers a
// handler by:
//
//	type Resize struct{ URL string }
//	func (Resize) Kind() string { return "resize" }
//
//	task, created, err := c.SubmitArgs(ctx, Resize{URL: u}, triage.WithPriority(triage.High))
//
// # Design
//
// The vocabulary (Task, Priority, Status, SubmitRequest, the API's answers
// and errors) is defined once, in package triagetype, and re-exported here
// in one alias block (types.go), so a caller needs one import. It lives in
// its own leaf package because triage's internal packages use the same
// definitions directly (the store persists a triagetype.Status, the
// consumer records a triagetype.Attempt), and they cannot import this
// package: the direct transport imports them. So a task travels from the
// store to a caller by a Go conversion, never through JSON, and there is
// one definition of each wire type.
//
// The HTTP transport lives here. Outside the standard library this package
// depends only on triagetype, two small internal packages (the task rules
// and the token header's name) and github.com/oklog/ulid. The direct
// transport lives in package direct so that a program that only talks HTTP
// does not link the AWS SDK.
//
// A deployment's settings are one struct, triageconfig.Config (River's
// style: fields document their defaults; WithDefaults, then Validate; a
// broken rule is a *triageconfig.Error naming the field and its variable),
// which worker.New and direct.New both take in their Options (a nil Config
// reads the TRIAGE_* variables, triageconfig.Decode) and the dispatcher's
// own functions read from their environment. Per-call choices are
// functional options: HTTPOption for the HTTP transport, SubmitOption for
// a submit. Plain structs carry data (wire types and ListParams).
//
// Every method takes a context first. Every failure the API answers with
// is an *Error that matches one sentinel with errors.Is (ErrNotFound,
// ErrBadRequest, ErrTooMany, ...) and carries the code, the message, the
// field at fault and the Retry-After. Wait returns the finished task, and
// with it an error matching ErrDeadLettered or ErrCancelled when the task
// ended without completing.
//
// Handlers are run by package worker (your own consumer with Go handlers)
// and tested without AWS by package workertest.
package triage
